//go:build unix

package stdio

import (
	"fmt"
	"os"
	"sync"
	"syscall"
)

var guardOnce struct {
	sync.Mutex
	f *os.File
}

// GuardStdout keeps stdout for protocol messages only (guarantee C9). It
// duplicates file descriptor 1 to a new descriptor (close-on-exec, so child
// processes do not inherit it), returns that as the protocol stream, and
// points descriptor 1 at standard error. After it, a stray fmt.Println in a
// handler, or a child process started with os.Stdout, writes to stderr and
// cannot corrupt the stream. It changes the process, so only a main package
// should call it, once; later calls return the same file.
func GuardStdout() (*os.File, error) {
	guardOnce.Lock()
	defer guardOnce.Unlock()
	if guardOnce.f != nil {
		return guardOnce.f, nil
	}
	syscall.ForkLock.Lock()
	fd, err := syscall.Dup(1)
	if err == nil {
		syscall.CloseOnExec(fd)
	}
	syscall.ForkLock.Unlock()
	if err != nil {
		return nil, fmt.Errorf("stdio: duplicating stdout: %w", err)
	}
	if err := dupTo(2, 1); err != nil {
		syscall.Close(fd)
		return nil, fmt.Errorf("stdio: pointing stdout at stderr: %w", err)
	}
	guardOnce.f = os.NewFile(uintptr(fd), "/dev/stdout (protocol)")
	return guardOnce.f, nil
}
