// Package testserver holds the misbehaving stdio servers agentwire's tests
// run as real subprocesses: a test binary re-executes itself with
// AGENTWIRE_TEST_SERVER=<mode>, and its TestMain hands control to Run.
//
// Modes (all answer the echo server's methods unless they say otherwise):
//
//	echo          the echo server; exits on stdin EOF
//	polluted      prints "DEBUG: looking things up..." on stdout before every reply
//	stderr-flood  writes 2 MiB to stderr before every reply
//	crash         method "crash" writes "fatal: crashing on purpose" to stderr and exits 3
//	crash-first   like crash, but only in the first process started with a given
//	              AGENTWIRE_TEST_STATE directory; later processes answer {"ok":true}
//	ignore-eof    answers, but keeps running after stdin EOF
//	ignore-term   like ignore-eof, and ignores SIGTERM too
//	grandchild    starts a child process (mode sleeper) in its group, writes
//	              "grandchild <pid>" to stderr, then serves
//	sleeper       sleeps for a minute
//	stubborn-tree like ignore-term (ignores stdin EOF and SIGTERM), and starts a
//	              child (mode sleeper) in its group first, as grandchild does:
//	              only SIGKILL to the group ends them both
//	mcp-stubborn-tree the same as an MCP server (the example server, dual era,
//	              conformance fixtures)
//	stubborn      ignores cancellation: "sleep" always runs to the end
//	recorder      like echo, and copies every line it receives to stderr
//	mcp           the example MCP server (dual era)
//	mcp-probe-exit a legacy MCP server that exits on any request before
//	              initialize, like rmcp 1.7 does on a server/discover probe
//	mcp-reply-exit the same, but it first answers the request with an error
//
// and the modes of checkmodes.go and acpmodes.go.
package testserver

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/agentwire/agentwire/echo"
	"github.com/agentwire/agentwire/internal/seedserver"
	"github.com/agentwire/agentwire/jsonrpc"
	"github.com/agentwire/agentwire/mcp"
	"github.com/agentwire/agentwire/mcp/server"
	"github.com/agentwire/agentwire/rpc"
	"github.com/agentwire/agentwire/stdio"
)

// Env is the variable that selects a mode.
const Env = "AGENTWIRE_TEST_SERVER"

// StateEnv names a directory crash-first uses to remember earlier starts;
// every start appends a line to its "starts" file.
const StateEnv = "AGENTWIRE_TEST_STATE"

// Command returns the environment entries that make the current test binary
// run as the server in mode.
func Command(mode string, extraEnv ...string) []string {
	// A race-enabled binary sleeps a second at exit by default
	// (atexit_sleep_ms), which would read as a server slow to exit.
	env := append(os.Environ(), Env+"="+mode, "GORACE=atexit_sleep_ms=0")
	return append(env, extraEnv...)
}

// SecretInStderr is what the "mcp-secret" mode writes to stderr at start.
const SecretInStderr = "sk-test-0123456789abcdef"

// Run serves the mode named by the environment and exits; it returns
// without doing anything when the variable is not set.
func Run() {
	mode := os.Getenv(Env)
	if mode == "" {
		return
	}
	os.Exit(serve(mode))
}

func serve(mode string) int {
	if dir := os.Getenv(StateEnv); dir != "" {
		f, err := os.OpenFile(filepath.Join(dir, "starts"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		if err == nil {
			fmt.Fprintln(f, os.Getpid())
			f.Close()
		}
	}
	base := echo.Handler()
	opts := echo.Options(nil)
	noGuard := false
	var in io.Reader = os.Stdin
	handler := rpc.HandlerFunc(func(ctx context.Context, r *rpc.Request) (any, error) {
		return base.Handle(ctx, r)
	})
	switch mode {
	case "echo":
	case "polluted":
		noGuard = true
		handler = func(ctx context.Context, r *rpc.Request) (any, error) {
			fmt.Println("DEBUG: looking things up...")
			return base.Handle(ctx, r)
		}
	case "stderr-flood":
		chunk := strings.Repeat("e", 1023) + "\n"
		handler = func(ctx context.Context, r *rpc.Request) (any, error) {
			for range 2048 {
				os.Stderr.WriteString(chunk)
			}
			os.Stderr.WriteString("last stderr line\n")
			return base.Handle(ctx, r)
		}
	case "crash", "crash-first":
		crash := true
		if mode == "crash-first" {
			crash = firstStart()
		}
		handler = func(ctx context.Context, r *rpc.Request) (any, error) {
			if r.Method == "crash" {
				if crash {
					os.Stderr.WriteString("fatal: crashing on purpose\n")
					os.Exit(3)
				}
				return map[string]bool{"ok": true}, nil
			}
			return base.Handle(ctx, r)
		}
	case "ignore-eof", "ignore-term":
		if mode == "ignore-term" {
			signal.Ignore(syscall.SIGTERM)
		}
		conn, err := stdio.Serve(handler, opts, nil)
		if err != nil {
			return 1
		}
		conn.Wait()
		time.Sleep(time.Hour)
		return 0
	case "stubborn-tree", "mcp-stubborn-tree":
		signal.Ignore(syscall.SIGTERM)
		if err := startSleeper(); err != nil {
			return 1
		}
		var conn interface{ Wait() error }
		var err error
		if mode == "mcp-stubborn-tree" {
			conn, err = seedserver.New(seedserver.Options{Fixtures: "conformance"}).ServeStdio(nil, nil)
		} else {
			conn, err = stdio.Serve(handler, opts, nil)
		}
		if err != nil {
			return 1
		}
		conn.Wait()
		time.Sleep(time.Hour)
		return 0
	case "grandchild":
		self, _ := os.Executable()
		cmd := exec.Command(self)
		cmd.Env = append(os.Environ(), Env+"=sleeper")
		if err := cmd.Start(); err != nil {
			fmt.Fprintln(os.Stderr, "cannot start grandchild:", err)
			return 1
		}
		fmt.Fprintf(os.Stderr, "grandchild %d\n", cmd.Process.Pid)
	case "sleeper":
		time.Sleep(time.Minute)
		return 0
	case "stubborn":
		opts.Cancel = []rpc.CancelMethod{}
		handler = func(ctx context.Context, r *rpc.Request) (any, error) {
			if r.Method == "sleep" {
				var p struct{ MS int }
				r.UnmarshalParams(&p)
				time.Sleep(time.Duration(p.MS) * time.Millisecond)
				return map[string]int{"slept": p.MS}, nil
			}
			return base.Handle(ctx, r)
		}
	case "mcp":
		conn, err := seedserver.New(seedserver.Options{}).ServeStdio(nil, nil)
		if err != nil {
			return 1
		}
		conn.Wait()
		return 0
	case "mcp-secret":
		// A server that logs a secret at start-up, as real ones do with
		// their configuration, and whose crash tool ends it mid-call.
		fmt.Fprintln(os.Stderr, "config: API_KEY="+SecretInStderr)
		conn, err := seedserver.New(seedserver.Options{}).ServeStdio(nil, nil)
		if err != nil {
			return 1
		}
		conn.Wait()
		return 0
	case "mcp-probe-exit", "mcp-reply-exit":
		srv := seedserver.New(seedserver.Options{Server: server.Options{Eras: mcp.LegacyOnly}})
		inner := srv.Handler()
		initialized := false
		h := rpc.HandlerFunc(func(ctx context.Context, r *rpc.Request) (any, error) {
			if r.Method == "initialize" {
				initialized = true
			} else if !initialized && !r.IsNotification() {
				fmt.Fprintln(os.Stderr, "expected initialize, got", r.Method, "- exiting")
				if mode == "mcp-reply-exit" {
					fmt.Printf(`{"jsonrpc":"2.0","id":%s,"error":{"code":-32600,"message":"expected initialize"}}`+"\n", r.ID)
				}
				os.Exit(1)
			}
			return inner.Handle(ctx, r)
		})
		conn, err := stdio.Serve(h, srv.ConnOptions(nil), &stdio.Config{NoGuard: mode == "mcp-reply-exit"})
		if err != nil {
			return 1
		}
		conn.Wait()
		return 0
	case "recorder":
		pr, pw := io.Pipe()
		go func() {
			sc := bufio.NewScanner(os.Stdin)
			for sc.Scan() {
				fmt.Fprintf(os.Stderr, "received %s\n", sc.Bytes())
				pw.Write(append(sc.Bytes(), '\n'))
			}
			pw.Close()
		}()
		in = pr
	default:
		if code, ok := serveCheckMode(mode); ok {
			return code
		}
		if code, ok := serveACPMode(mode); ok {
			return code
		}
		fmt.Fprintln(os.Stderr, "testserver: unknown mode", mode)
		return 2
	}
	conn, err := stdio.Serve(handler, opts, &stdio.Config{NoGuard: noGuard, Stdin: in})
	if err != nil {
		return 1
	}
	if err := conn.Wait(); err != nil {
		return 1
	}
	return 0
}

// startSleeper starts a child in mode sleeper, in our process group, and
// writes "grandchild <pid>" to stderr.
func startSleeper() error {
	self, _ := os.Executable()
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(), Env+"=sleeper")
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "cannot start grandchild:", err)
		return err
	}
	fmt.Fprintf(os.Stderr, "grandchild %d\n", cmd.Process.Pid)
	return nil
}

// firstStart reports whether this is the first start recorded in the state
// directory.
func firstStart() bool {
	dir := os.Getenv(StateEnv)
	if dir == "" {
		return true
	}
	b, _ := os.ReadFile(filepath.Join(dir, "starts"))
	return strings.Count(string(b), "\n") <= 1
}

// ErrorCode extracts the code of a *jsonrpc.Error, or 0.
func ErrorCode(err error) int64 {
	if e, ok := err.(*jsonrpc.Error); ok {
		return e.Code
	}
	return 0
}
