package stdio_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"

	"github.com/agentwire/agentwire/rpc"
	"github.com/agentwire/agentwire/stdio"
	"go.uber.org/goleak"
)

const childEnv = "AGENTWIRE_STDIO_TEST_CHILD"

func TestMain(m *testing.M) {
	if mode := os.Getenv(childEnv); mode != "" {
		os.Exit(child(mode))
	}
	goleak.VerifyTestMain(m)
}

// child is the test binary re-executed as a stdio server whose handler
// writes to stdout every way it can.
func child(mode string) int {
	h := rpc.Methods{"chatty": func(ctx context.Context, r *rpc.Request) (any, error) {
		fmt.Println("DEBUG: looking things up...")
		os.Stdout.WriteString("more stray output\n")
		if runtime.GOOS != "windows" {
			cmd := exec.Command("sh", "-c", "echo from a child process")
			cmd.Stdout = os.Stdout
			cmd.Run()
		}
		return "result", nil
	}}
	conn, err := stdio.Serve(h, nil, &stdio.Config{NoGuard: mode == "unguarded"})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := conn.Wait(); err != nil {
		return 1
	}
	return 0
}

func runChild(t *testing.T, mode string) (stdout, stderr string) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), childEnv+"="+mode)
	cmd.Stdin = strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"chatty"}` + "\n")
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("child: %v\n%s", err, errb.String())
	}
	return out.String(), errb.String()
}

// The stdout guard (guarantee C9): whatever a handler prints goes to stderr, and
// stdout carries only the protocol.
func TestGuardKeepsStdoutForProtocol(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("the guard is a Unix facility")
	}
	stdout, stderr := runChild(t, "guarded")
	if stdout != `{"jsonrpc":"2.0","id":1,"result":"result"}`+"\n" {
		t.Errorf("stdout = %q", stdout)
	}
	for _, want := range []string{"DEBUG: looking things up...", "more stray output", "from a child process"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q: %q", want, stderr)
		}
	}
}

// Without the guard, the same handler corrupts the stream: this is what the
// guard prevents.
func TestWithoutGuardStdoutIsPolluted(t *testing.T) {
	stdout, _ := runChild(t, "unguarded")
	sc := bufio.NewScanner(strings.NewReader(stdout))
	lines := 0
	for sc.Scan() {
		lines++
	}
	if lines < 2 {
		t.Fatalf("expected stray lines on an unguarded stdout, got %q", stdout)
	}
}

// Serve with explicit streams (as tests and embedders use it).
func TestServeWithStreams(t *testing.T) {
	var out bytes.Buffer
	h := rpc.Methods{"ping": func(context.Context, *rpc.Request) (any, error) { return "pong", nil }}
	conn, err := stdio.Serve(h, nil, &stdio.Config{
		Stdin:  strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`),
		Stdout: struct{ io.Writer }{&out},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := conn.Wait(); err != nil {
		t.Fatal(err)
	}
	if out.String() != `{"jsonrpc":"2.0","id":1,"result":"pong"}`+"\n" {
		t.Fatalf("got %q", out.String())
	}
}
