//go:build unix

package process_test

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/agentwire/agentwire/internal/testserver"
	"github.com/agentwire/agentwire/process"
)

func self(t *testing.T, mode string) process.Command {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return process.Command{Path: exe, Env: testserver.Command(mode)}
}

func start(t *testing.T, mode string, opts *process.Options) *process.Process {
	t.Helper()
	p, err := process.Start(self(t, mode), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Kill() })
	return p
}

// roundTrip proves the server is up (and past its start-up) before the
// ladder is measured.
func roundTrip(t *testing.T, p *process.Process) {
	t.Helper()
	if _, err := io.WriteString(p.Stdin(), `{"jsonrpc":"2.0","id":1,"method":"echo","params":[1]}`+"\n"); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(p.Stdout()).ReadString('\n')
	if err != nil || !strings.Contains(line, `"result":[1]`) {
		t.Fatalf("round trip: %q %v", line, err)
	}
}

// The shutdown ladder (guarantee K7) with grace 0.3 s gives the three
// outcomes of a server that exits on EOF, one that needs SIGTERM and one that needs SIGKILL: exited (~0.01 s), terminated (~0.3 s), killed (~0.6 s).
func TestShutdownLadder(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("SIGTERM is a POSIX step")
	}
	const grace = 300 * time.Millisecond
	cases := []struct {
		mode     string
		outcome  process.Outcome
		min, max time.Duration
	}{
		{"echo", process.Exited, 0, grace - 50*time.Millisecond},
		{"ignore-eof", process.Terminated, grace, 2*grace - 50*time.Millisecond},
		{"ignore-term", process.Killed, 2 * grace, 4 * grace},
	}
	for _, tc := range cases {
		t.Run(tc.mode, func(t *testing.T) {
			p := start(t, tc.mode, &process.Options{Grace: grace})
			roundTrip(t, p)
			r := p.Shutdown()
			if r.Outcome != tc.outcome || r.Duration < tc.min || r.Duration > tc.max {
				t.Fatalf("got %s after %v, want %s in [%v, %v]", r.Outcome, r.Duration, tc.outcome, tc.min, tc.max)
			}
			if again := p.Shutdown(); again != r {
				t.Errorf("second Shutdown = %+v, want the same result", again)
			}
			t.Logf("%s: %s in %v (exit code %d)", tc.mode, r.Outcome, r.Duration, r.ExitCode)
		})
	}
}

// alive reports whether pid is a live (not zombie) process.
func alive(pid int) bool {
	if err := syscall.Kill(pid, 0); err != nil {
		return false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	f := strings.Fields(string(b))
	return len(f) > 2 && f[2] != "Z"
}

// A server's children die with it: the group is signalled, and leftovers
// are killed when the server itself exits on EOF.
func TestShutdownReachesTheProcessGroup(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("checks processes through /proc")
	}
	p := start(t, "grandchild", &process.Options{Grace: 300 * time.Millisecond})
	roundTrip(t, p)
	var pid int
	deadline := time.Now().Add(5 * time.Second)
	for pid == 0 && time.Now().Before(deadline) {
		if _, err := fmt.Sscanf(p.StderrTail(), "grandchild %d", &pid); err != nil {
			time.Sleep(10 * time.Millisecond)
		}
	}
	if pid == 0 || !alive(pid) {
		t.Fatalf("grandchild not running (stderr %q)", p.StderrTail())
	}
	r := p.Shutdown()
	if r.Outcome != process.Exited {
		t.Errorf("outcome %s", r.Outcome)
	}
	for i := 0; i < 100 && alive(pid); i++ {
		time.Sleep(10 * time.Millisecond)
	}
	if alive(pid) {
		syscall.Kill(pid, syscall.SIGKILL)
		t.Fatalf("grandchild %d outlived the server", pid)
	}
}

// stderr is always drained, kept as a bounded tail and copied to the sink;
// a server flooding it is never blocked (guarantee K4).
func TestStderrIsDrainedIntoATail(t *testing.T) {
	var sink strings.Builder
	sw := &lockedWriter{w: &sink}
	p := start(t, "stderr-flood", &process.Options{StderrTail: 1000, Stderr: sw})
	roundTrip(t, p) // the flood (2 MiB) comes before the reply
	r := p.Shutdown()
	p.ExitError() // waits for the drain to finish
	tail := p.StderrTail()
	if len(tail) != 1000 || !strings.HasSuffix(tail, "last stderr line\n") {
		t.Errorf("tail is %d bytes, ends %q", len(tail), tail[max(0, len(tail)-30):])
	}
	if got := sw.n() + p.StderrDropped(); got < 2<<20 {
		t.Errorf("sink saw %d bytes (and %d dropped), want all 2 MiB", sw.n(), p.StderrDropped())
	}
	if r.Outcome != process.Exited {
		t.Errorf("outcome %s", r.Outcome)
	}
}

type lockedWriter struct {
	w     io.Writer
	count atomic.Int64
}

func (l *lockedWriter) Write(b []byte) (int, error) {
	l.count.Add(int64(len(b))) // only the sink goroutine writes to w
	return l.w.Write(b)
}

func (l *lockedWriter) n() int64 { return l.count.Load() }

// The exit error carries the status and the stderr tail (guarantee K5).
func TestExitError(t *testing.T) {
	p := start(t, "crash", nil)
	io.WriteString(p.Stdin(), `{"jsonrpc":"2.0","id":1,"method":"crash"}`+"\n")
	<-p.Exited()
	e := p.ExitError()
	if e == nil || e.ExitCode != 3 || !strings.Contains(e.Error(), "exit status 3") || !strings.Contains(e.Error(), "fatal: crashing on purpose") {
		t.Fatalf("ExitError = %v", e)
	}
}

func TestStartFailure(t *testing.T) {
	_, err := process.Start(process.Command{Path: "/nonexistent/agentwire-server"}, nil)
	if err == nil || !strings.Contains(err.Error(), "could not be started") {
		t.Fatalf("err = %v", err)
	}
}
