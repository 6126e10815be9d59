package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentwire/agentwire/client"
	"github.com/agentwire/agentwire/echo"
	"github.com/agentwire/agentwire/internal/testserver"
	"github.com/agentwire/agentwire/jsonrpc"
	"github.com/agentwire/agentwire/process"
	"github.com/agentwire/agentwire/rpc"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	testserver.Run()
	goleak.VerifyTestMain(m)
}

func command(t *testing.T, mode string, env ...string) process.Command {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return process.Command{Path: exe, Env: testserver.Command(mode, env...)}
}

func startClient(t *testing.T, mode string, opts *client.Options, env ...string) *client.Client {
	t.Helper()
	if opts == nil {
		opts = &client.Options{}
	}
	if opts.Process == nil {
		opts.Process = &process.Options{Grace: 300 * time.Millisecond}
	}
	c, err := client.Start(command(t, mode, env...), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// Any number of calls in flight, matched by id (guarantee K1).
func TestManyCallsInFlight(t *testing.T) {
	c := startClient(t, "echo", nil)
	var wg sync.WaitGroup
	var failed atomic.Int64
	for i := range 200 {
		wg.Go(func() {
			params := fmt.Sprintf(`{"i":%d}`, i)
			res, err := c.Call(context.Background(), "echo", json.RawMessage(params))
			if err != nil || string(res) != params {
				failed.Add(1)
			}
		})
	}
	wg.Wait()
	if failed.Load() != 0 {
		t.Fatalf("%d calls failed", failed.Load())
	}
	if r := c.Close(); r.Outcome != process.Exited {
		t.Errorf("shutdown %s", r.Outcome)
	}
}

// A JSON-RPC error comes back as *jsonrpc.Error.
func TestErrorResponse(t *testing.T) {
	c := startClient(t, "echo", nil)
	_, err := c.Call(context.Background(), "fail", map[string]any{"code": -32042, "message": "nope"})
	var je *jsonrpc.Error
	if !errors.As(err, &je) || je.Code != -32042 || je.Message != "nope" {
		t.Fatalf("err = %v", err)
	}
}

// Cancellation (guarantee K2): the call returns at once, the server receives
// notifications/cancelled with requestId and reason.
func TestCancelledCallSendsNotification(t *testing.T) {
	c := startClient(t, "recorder", nil)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := c.Call(ctx, "sleep", map[string]int{"ms": 60000})
	if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > time.Second {
		t.Fatalf("err = %v after %v", err, time.Since(start))
	}
	p := c.Process()
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(p.StderrTail(), "notifications/cancelled") && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if !strings.Contains(p.StderrTail(), `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1,"reason":"context deadline exceeded"}}`) {
		t.Fatalf("server saw: %s", p.StderrTail())
	}
	// The server dropped the request: the ladder ends with a clean exit.
	if r := c.Close(); r.Outcome != process.Exited {
		t.Errorf("shutdown %s", r.Outcome)
	}
}

// ACP-style cancellation is configurable.
func TestACPCancelStyle(t *testing.T) {
	c := startClient(t, "recorder", &client.Options{Cancel: &rpc.ACPCancel})
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	c.Call(ctx, "sleep", map[string]int{"ms": 60000})
	p := c.Process()
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(p.StderrTail(), "$/cancel_request") && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if !strings.Contains(p.StderrTail(), `{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":1}}`) {
		t.Fatalf("server saw: %s", p.StderrTail())
	}
}

// A response that crosses the cancel is dropped and counted (guarantee K2).
func TestLateResponseIsCounted(t *testing.T) {
	c := startClient(t, "stubborn", nil)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, err := c.Call(ctx, "sleep", map[string]int{"ms": 200}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v", err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for c.Stats().LateResponses == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if s := c.Stats(); s.LateResponses != 1 || s.UnknownResponses != 0 {
		t.Fatalf("stats %+v", s)
	}
	// The connection is fine afterwards.
	if _, err := c.Call(context.Background(), "echo", []int{1}); err != nil {
		t.Fatal(err)
	}
}

// Stdout pollution is a diagnostic, never fatal (guarantee K3); the observer
// sees each line.
func TestNonProtocolLinesAreTolerated(t *testing.T) {
	var seen []string
	var mu sync.Mutex
	c := startClient(t, "polluted", &client.Options{OnViolation: func(v rpc.Violation) {
		mu.Lock()
		seen = append(seen, string(v.Line))
		mu.Unlock()
	}})
	for i := range 3 {
		res, err := c.Call(context.Background(), "echo", []int{i})
		if err != nil || string(res) != fmt.Sprintf("[%d]", i) {
			t.Fatalf("call %d: %s %v", i, res, err)
		}
	}
	if s := c.Stats(); s.Violations != 3 {
		t.Errorf("violations %d, want 3", s.Violations)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 3 || seen[0] != "DEBUG: looking things up..." {
		t.Errorf("observer saw %q", seen)
	}
}

// Strict mode makes pollution fatal: the call fails as a lost connection
// whose cause is the violation.
func TestStrictModeIsFatal(t *testing.T) {
	c := startClient(t, "polluted", &client.Options{Strict: true})
	_, err := c.Call(context.Background(), "echo", []int{1})
	if !errors.Is(err, client.ErrConnectionLost) || !errors.Is(err, rpc.ErrProtocolViolation) {
		t.Fatalf("err = %v", err)
	}
}

// A flood on stderr never blocks the server (guarantee K4).
func TestStderrFloodDoesNotBlock(t *testing.T) {
	c := startClient(t, "stderr-flood", &client.Options{Process: &process.Options{Stderr: io.Discard}})
	for i := range 3 {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err := c.Call(ctx, "echo", []int{i})
		cancel()
		if err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
	}
	// The reply can overtake the last stderr bytes; the drain catches up.
	deadline := time.Now().Add(5 * time.Second)
	for !strings.HasSuffix(c.Process().StderrTail(), "last stderr line\n") && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if tail := c.Process().StderrTail(); !strings.HasSuffix(tail, "last stderr line\n") || len(tail) > process.DefaultStderrTail {
		t.Errorf("tail of %d bytes", len(tail))
	}
}

// A crash fails pending calls promptly, with the exit status and stderr
// tail (guarantee K5).
func TestCrashFailsPendingCalls(t *testing.T) {
	c := startClient(t, "crash", nil)
	slow := make(chan error, 1)
	go func() {
		_, err := c.Call(context.Background(), "sleep", map[string]int{"ms": 60000})
		slow <- err
	}()
	time.Sleep(50 * time.Millisecond)
	start := time.Now()
	_, err := c.Call(context.Background(), "crash", nil)
	if d := time.Since(start); d > time.Second {
		t.Errorf("crash noticed after %v", d)
	}
	var lost *client.ConnectionLostError
	if !errors.As(err, &lost) || !errors.Is(err, client.ErrConnectionLost) || lost.Exit == nil || lost.Exit.ExitCode != 3 ||
		!strings.Contains(err.Error(), "exit status 3") || !strings.Contains(err.Error(), "fatal: crashing on purpose") {
		t.Fatalf("err = %v", err)
	}
	if err := <-slow; !errors.Is(err, client.ErrConnectionLost) {
		t.Errorf("the other pending call: %v", err)
	}
	if _, err := c.Call(context.Background(), "echo", nil); !errors.Is(err, client.ErrConnectionLost) {
		t.Errorf("a call after the crash: %v", err)
	}
}

// With a restart policy, a retryable call survives a crash: the server is
// started twice and the caller learns of the restart (guarantee K6).
func TestRestartAndRetry(t *testing.T) {
	dir := t.TempDir()
	var restarts atomic.Int64
	c := startClient(t, "crash-first", &client.Options{
		Restart:   &client.RestartPolicy{MaxRestarts: 2, Backoff: 10 * time.Millisecond},
		OnRestart: func(n int, lost error) { restarts.Store(int64(n)) },
	}, testserver.StateEnv+"="+dir)
	res, err := c.Call(context.Background(), "crash", nil, client.Retryable())
	if err != nil || string(res) != `{"ok":true}` {
		t.Fatalf("retried call: %s %v", res, err)
	}
	starts, _ := os.ReadFile(dir + "/starts")
	if n := strings.Count(string(starts), "\n"); n != 2 {
		t.Errorf("server started %d times, want 2", n)
	}
	if restarts.Load() != 1 || c.Stats().Restarts != 1 {
		t.Errorf("OnRestart saw %d, Stats %d", restarts.Load(), c.Stats().Restarts)
	}
	// A call that is not retryable is not retried.
	if _, err := c.Call(context.Background(), "echo", []int{7}); err != nil {
		t.Fatalf("call on the restarted server: %v", err)
	}
}

// A non-retryable call fails on a crash even with a restart policy, and the
// client carries on with a new server.
func TestRestartWithoutRetry(t *testing.T) {
	c := startClient(t, "crash", &client.Options{Restart: &client.RestartPolicy{Backoff: time.Millisecond}})
	if _, err := c.Call(context.Background(), "crash", nil); !errors.Is(err, client.ErrConnectionLost) {
		t.Fatalf("err = %v", err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for c.Stats().Restarts == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if res, err := c.Call(context.Background(), "echo", []int{1}); err != nil || string(res) != "[1]" {
		t.Fatalf("after restart: %s %v", res, err)
	}
}

// The client over any stream: an in-memory server.
func TestClientOverAStream(t *testing.T) {
	c2sR, c2sW := io.Pipe()
	s2cR, s2cW := io.Pipe()
	srv := rpc.New(c2sR, s2cW, echo.Handler(), echo.Options(nil))
	c := client.New(s2cR, c2sW, nil)
	res, err := c.Call(context.Background(), "echo", []int{1})
	if err != nil || string(res) != "[1]" {
		t.Fatalf("%s %v", res, err)
	}
	if err := c.Notify(context.Background(), "echo", nil); err != nil {
		t.Fatal(err)
	}
	c.Close()
	srv.Wait()
	if _, err := c.Call(context.Background(), "echo", nil); !errors.Is(err, client.ErrClosed) {
		t.Fatalf("after Close: %v", err)
	}
}

// Closing the connect context never kills a running server (guarantee K8): the
// client is not tied to any context but the calls'.
func TestServerOutlivesCallContexts(t *testing.T) {
	c := startClient(t, "echo", nil)
	ctx, cancel := context.WithCancel(context.Background())
	c.Call(ctx, "echo", nil)
	cancel()
	time.Sleep(20 * time.Millisecond)
	select {
	case <-c.Process().Exited():
		t.Fatal("the server died with a call's context")
	default:
	}
	if _, err := c.Call(context.Background(), "echo", nil); err != nil {
		t.Fatal(err)
	}
}
