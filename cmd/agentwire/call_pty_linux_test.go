package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"
)

// openPTY opens a pseudo-terminal pair: what is written to master is typed
// on slave.
func openPTY(t *testing.T) (master, slave *os.File) {
	t.Helper()
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR, 0)
	if err != nil {
		t.Skip("no pseudo-terminals:", err)
	}
	var unlock int32
	var n uint32
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, m.Fd(), syscall.TIOCSPTLCK, uintptr(unsafe.Pointer(&unlock))); e != 0 {
		m.Close()
		t.Skip("unlockpt:", e)
	}
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, m.Fd(), syscall.TIOCGPTN, uintptr(unsafe.Pointer(&n))); e != 0 {
		m.Close()
		t.Skip("ptsname:", e)
	}
	s, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		m.Close()
		t.Skip("opening the slave:", err)
	}
	return m, s
}

// With stdin on a terminal and no --input, call asks: the form's fields
// are prompted for on stderr and typed on the terminal, in both eras.
func TestCallCannotAnswerTheServerTerminal(t *testing.T) {
	t.Parallel()
	for _, era := range []string{"modern", "legacy"} {
		t.Run(era, func(t *testing.T) {
			t.Parallel()
			master, slave := openPTY(t)
			defer master.Close()
			// --timeout does not count the time the user takes.
			cmd := exec.Command(binary, append([]string{"call", "--era", era, "--timeout", "300ms", "--tool", "test_elicitation", "--args", `{"message":"Who are you?"}`}, fixtureServer()...)...)
			var out bytes.Buffer
			var errb lockedBuffer
			cmd.Stdin, cmd.Stdout, cmd.Stderr = slave, &out, &errb
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			slave.Close()
			echoed := make(chan struct{})
			go func() { io.Copy(io.Discard, master); close(echoed) }() // the terminal's echo
			for deadline := time.Now().Add(10 * time.Second); !strings.Contains(errb.String(), "email"); time.Sleep(5 * time.Millisecond) {
				if time.Now().After(deadline) {
					cmd.Process.Kill()
					break
				}
			}
			time.Sleep(500 * time.Millisecond) // the user thinks
			// The fields come in the schema's order: email, then username.
			io.WriteString(master, "ann@example.com\nann\n")
			err := cmd.Wait()
			master.Close()
			<-echoed
			if err != nil || !strings.Contains(out.String(), `content={\"email\":\"ann@example.com\",\"username\":\"ann\"}`) {
				t.Errorf("%v; stdout %q; stderr %q", err, out.String(), errb.String())
			}
			if !strings.Contains(errb.String(), "The server asks: Who are you?") || !strings.Contains(errb.String(), "email (string, required)") {
				t.Errorf("prompts: %q", errb.String())
			}
		})
	}
}

// A signal while the user is being asked stops the call at once, the
// ladder included (the prompt does not hold it up), in both eras.
func TestCtrlCLeavesTheServerRunningCallPrompt(t *testing.T) {
	t.Parallel()
	for _, era := range []string{"modern", "legacy"} {
		t.Run(era, func(t *testing.T) {
			t.Parallel()
			master, slave := openPTY(t)
			defer master.Close()
			cmd := exec.Command(binary, append([]string{"call", "--era", era, "--grace", "0.2s", "--tool", "test_elicitation", "--args", `{"message":"Who?"}`}, fixtureServer()...)...)
			var out, errb lockedBuffer
			cmd.Stdin, cmd.Stdout, cmd.Stderr = slave, &out, &errb
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			slave.Close()
			go io.Copy(io.Discard, master)
			deadline := time.Now().Add(10 * time.Second)
			for !strings.Contains(errb.String(), "email (string, required)") {
				if time.Now().After(deadline) {
					cmd.Process.Kill()
					t.Fatalf("no prompt; stderr %q", errb.String())
				}
				time.Sleep(5 * time.Millisecond)
			}
			cmd.Process.Signal(syscall.SIGINT)
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			select {
			case err := <-done:
				if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 130 {
					t.Errorf("%v; stderr %q", err, errb.String())
				}
			case <-time.After(3 * time.Second):
				cmd.Process.Kill()
				<-done
				t.Fatalf("still running 3 s after SIGINT; stderr %q", errb.String())
			}
		})
	}
}
