//go:build unix

package process_test

import (
	"io"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentwire/agentwire/process"
)

// Terminate is the ladder without the stdin step: with grace 0.3 s a server
// that obeys SIGTERM is Terminated at once (no wait on stdin, where
// Shutdown takes ~0.3 s) and one that ignores it is Killed after the grace
// (~0.3 s, where Shutdown takes ~0.6 s), each with the signal that ended it
// named. The "echo" server exits on stdin EOF, so it would read as Exited
// if Terminate closed stdin first.
func TestTerminateSignalsTheGroupWithoutClosingStdin(t *testing.T) {
	const grace = 300 * time.Millisecond
	cases := []struct {
		mode    string
		outcome process.Outcome
		signal  string
	}{
		{"echo", process.Terminated, "SIGTERM"},
		{"ignore-eof", process.Terminated, "SIGTERM"},
		{"ignore-term", process.Killed, "SIGKILL"},
	}
	for _, tc := range cases {
		t.Run(tc.mode, func(t *testing.T) {
			p := start(t, tc.mode, &process.Options{Grace: 10 * time.Second})
			roundTrip(t, p)
			r := p.Terminate(grace)
			// Only the killed case waits out the grace; the bound on the
			// other is loose on purpose (a loaded machine).
			if r.Outcome != tc.outcome || r.ExitCode != -1 || (r.Outcome == process.Killed) != (r.Duration >= grace) {
				t.Fatalf("Terminate = %+v, want %s by a signal (after the %v grace only when killed)", r, tc.outcome, grace)
			}
			if e := p.ExitError(); e == nil || e.Signal != tc.signal || e.ExitCode != -1 {
				t.Fatalf("ExitError = %+v, want signal %s", e, tc.signal)
			}
			if again := p.Shutdown(); again != r {
				t.Errorf("Shutdown after Terminate = %+v, want the same result %+v", again, r)
			}
			if again := p.Terminate(grace); again != r {
				t.Errorf("second Terminate = %+v, want the same result", again)
			}
			t.Logf("%s: %s in %v", tc.mode, r.Outcome, r.Duration)
		})
	}
}

// Shutdown first, then Terminate: the ladder runs once and both report it.
func TestTerminateAfterShutdownReturnsTheShutdownResult(t *testing.T) {
	p := start(t, "echo", &process.Options{Grace: 300 * time.Millisecond})
	roundTrip(t, p)
	r := p.Shutdown()
	if r.Outcome != process.Exited {
		t.Fatalf("Shutdown = %+v", r)
	}
	if again := p.Terminate(time.Hour); again != r {
		t.Fatalf("Terminate after Shutdown = %+v, want %+v", again, r)
	}
	if e := p.ExitError(); e.Signal != "" || e.ExitCode != 0 {
		t.Fatalf("ExitError of a clean exit = %+v, want no signal", e)
	}
}

// A process that already exited is reported Exited, with its own code.
func TestTerminateOfAnExitedProcess(t *testing.T) {
	p, err := process.Start(process.Command{Path: "/bin/sh", Args: []string{"-c", "exit 3"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	<-p.Exited()
	r := p.Terminate(time.Hour)
	if r.Outcome != process.Exited || r.ExitCode != 3 {
		t.Fatalf("Terminate = %+v, want exited with 3", r)
	}
	p.Stdout().Close()
}

// Terminate leaves stdout readable: what the command wrote before it was
// killed is still there, up to EOF (Shutdown closes it instead).
func TestTerminateKeepsStdoutReadable(t *testing.T) {
	// The trap is set before "before" is written: reading it means SIGTERM
	// is already ignored (the other order raced the signal).
	p, err := process.Start(process.Command{Path: "/bin/sh", Args: []string{"-c", `trap "" TERM; echo before; exec sleep 600`}},
		&process.Options{CombinedOutput: true})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Stdout().Close()
	buf := make([]byte, 7)
	if _, err := io.ReadFull(p.Stdout(), buf); err != nil || string(buf) != "before\n" {
		t.Fatalf("read %q %v", buf, err)
	}
	r := p.Terminate(300 * time.Millisecond)
	if r.Outcome != process.Killed {
		t.Fatalf("Terminate = %+v, want killed (sleep ignores SIGTERM through the trap)", r)
	}
	rest, err := io.ReadAll(p.Stdout())
	if err != nil || len(rest) != 0 {
		t.Fatalf("after Terminate: %q %v, want a clean EOF", rest, err)
	}
	if e := p.ExitError(); e.Signal != "SIGKILL" {
		t.Fatalf("ExitError = %+v", e)
	}
}

// CombinedOutput: stderr shares stdout's pipe, so interleaved writes to both
// arrive in the order they were made, and there is no stderr tail.
func TestCombinedOutputKeepsTheKernelsOrder(t *testing.T) {
	script := `for i in 1 2 3 4 5 6 7 8 9 10; do echo out$i; echo err$i >&2; done`
	p, err := process.Start(process.Command{Path: "/bin/sh", Args: []string{"-c", script}},
		&process.Options{CombinedOutput: true, Stderr: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(p.Stdout())
	if err != nil {
		t.Fatal(err)
	}
	var want strings.Builder
	for i := 1; i <= 10; i++ {
		want.WriteString("out" + strconv.Itoa(i) + "\nerr" + strconv.Itoa(i) + "\n")
	}
	if string(got) != want.String() {
		t.Fatalf("combined output:\n%s\nwant:\n%s", got, want.String())
	}
	r := p.Shutdown()
	if r.Outcome != process.Exited || p.StderrTail() != "" || p.ExitError().StderrTail != "" {
		t.Fatalf("Shutdown = %+v, tail %q", r, p.StderrTail())
	}
}
