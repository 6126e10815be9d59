package main

import (
	"io"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// acpOnTerminal is `agentwire acp` with stdin on a pseudo-terminal.
type acpOnTerminal struct {
	t         *testing.T
	cmd       *exec.Cmd
	master    io.Writer
	out, errb *lockedBuffer
	done      chan error
}

func startACPOnTerminal(t *testing.T, args ...string) *acpOnTerminal {
	t.Helper()
	master, slave := openPTY(t)
	a := &acpOnTerminal{t: t, master: master, out: &lockedBuffer{}, errb: &lockedBuffer{}, done: make(chan error, 1)}
	a.cmd = exec.Command(binary, append([]string{"acp"}, args...)...)
	a.cmd.Stdin, a.cmd.Stdout, a.cmd.Stderr = slave, a.out, a.errb
	if err := a.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	slave.Close()
	go io.Copy(io.Discard, master) // the terminal's echo
	go func() { a.done <- a.cmd.Wait() }()
	t.Cleanup(func() {
		select {
		case <-a.done:
		default:
			a.cmd.Process.Kill()
			<-a.done
		}
		master.Close()
	})
	return a
}

// waitFor polls until ok holds, for at most 10 s.
func (a *acpOnTerminal) waitFor(what string, ok func() bool) {
	a.t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !ok(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			a.t.Fatalf("waited 10 s for %s; stdout %q; stderr %q", what, a.out.String(), a.errb.String())
		}
	}
}

// idle waits for the interactive prompt.
func (a *acpOnTerminal) idle() {
	a.t.Helper()
	a.waitFor("the prompt", func() bool {
		return strings.HasSuffix(a.errb.String(), "> ") && !strings.HasSuffix(a.errb.String(), "rejects) > ")
	})
}

func (a *acpOnTerminal) typeLine(l string) {
	a.t.Helper()
	if _, err := io.WriteString(a.master, l+"\n"); err != nil {
		a.t.Fatal(err)
	}
}

func (a *acpOnTerminal) exitCode(within time.Duration) int {
	a.t.Helper()
	select {
	case err := <-a.done:
		a.done <- err
		if ee, ok := err.(*exec.ExitError); ok {
			return ee.ExitCode()
		}
		if err != nil {
			a.t.Fatal(err)
		}
		return 0
	case <-time.After(within):
		a.t.Fatalf("still running %v later; stdout %q; stderr %q", within, a.out.String(), a.errb.String())
		return -1
	}
}

// With --prompt, SIGINT cancels the turn, runs the ladder and exits 130.
func TestACPSigintDuringAPromptExits130(t *testing.T) {
	t.Parallel()
	a := startACPOnTerminal(t, append([]string{"--prompt", "slow 40", "--grace", "0.3s"}, demoAgent()...)...)
	a.waitFor("the first chunk", func() bool { return strings.Contains(a.out.String(), "chunk 1 of 40") })
	a.cmd.Process.Signal(syscall.SIGINT)
	if code := a.exitCode(5 * time.Second); code != 130 {
		t.Errorf("exit %d, want 130; stderr %q", code, a.errb.String())
	}
	if strings.Contains(a.out.String(), "chunk 40 of 40") || !strings.Contains(a.errb.String(), "interrupted by SIGINT") {
		t.Errorf("stdout %q; stderr %q", a.out.String(), a.errb.String())
	}
}

// Interactive on a terminal: a permission question answered by typing 1,
// a terminal the agent runs, Ctrl-C once cancelling the turn (and the
// prompt coming back), twice ending the run with 130.
func TestACPInteractiveOnATerminal(t *testing.T) {
	t.Parallel()
	a := startACPOnTerminal(t, append([]string{"--grace", "0.3s", "--cancel-grace", "2s"}, demoAgent()...)...)
	a.idle()
	a.typeLine("permission")
	a.waitFor("the question", func() bool { return strings.Contains(a.errb.String(), "rejects) > ") })
	if e := a.errb.String(); !strings.Contains(e, "Permission: Write a file (edit)") || !strings.Contains(e, "[1] Allow once (allow_once)") {
		t.Errorf("question: %q", e)
	}
	a.typeLine("1")
	a.waitFor("the allowed reply", func() bool { return strings.Contains(a.out.String(), "permission: allow\n") })
	a.idle()

	a.typeLine("run echo hi")
	a.waitFor("the terminal", func() bool { return strings.Contains(a.out.String(), "exit code 0") })
	a.idle()
	// The command line when the tool call shows the terminal, its output
	// when the tool call completes.
	if e := a.errb.String(); !strings.Contains(e, "\n  $ echo hi\n") || !strings.Contains(e, ": completed\n  hi\n") {
		t.Errorf("terminal rendering: %q", e)
	}

	a.typeLine("slow 40")
	a.waitFor("the first chunk", func() bool { return strings.Count(a.out.String(), "chunk 1 of 40") == 1 })
	a.cmd.Process.Signal(syscall.SIGINT)
	a.waitFor("the cancelled turn", func() bool { return strings.Contains(a.errb.String(), "\ncancelled\n") })
	a.idle()
	if strings.Contains(a.out.String(), "chunk 40 of 40") {
		t.Errorf("the turn was not cancelled: %q", a.out.String())
	}

	a.typeLine("slow 40")
	a.waitFor("the first chunk again", func() bool { return strings.Count(a.out.String(), "chunk 1 of 40") == 2 })
	a.cmd.Process.Signal(syscall.SIGINT)
	a.waitFor("the cancel", func() bool { return strings.Count(a.errb.String(), "cancelling the turn") == 2 })
	a.cmd.Process.Signal(syscall.SIGINT)
	if code := a.exitCode(5 * time.Second); code != 130 {
		t.Errorf("exit %d, want 130; stderr %q", code, a.errb.String())
	}
}
