//go:build unix

package streamable

import (
	"net"
	"syscall"
)

// openFileLimit is the process's soft limit on open files, or 0 when it is
// unknown. (Go raises the soft limit to the hard limit at start.)
func openFileLimit() int {
	var r syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &r) != nil {
		return 0
	}
	if r.Cur > 1<<30 {
		return 1 << 30
	}
	return int(r.Cur)
}

// hasInput reports whether the peer has sent bytes that are waiting to be
// read, without reading them and without waiting (nor taking the
// connection's read lock, which a blocked Read holds).
func hasInput(c net.Conn) bool {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return false
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	pending := false
	raw.Control(func(fd uintptr) {
		var b [1]byte
		n, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		pending = err == nil && n > 0
	})
	return pending
}
