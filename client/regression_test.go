//go:build unix

package client_test

// Regression tests for defects found in review. Each names the bug it pins.

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentwire/agentwire/client"
	"github.com/agentwire/agentwire/internal/testserver"
	"github.com/agentwire/agentwire/process"
	"github.com/agentwire/agentwire/rpc"
)

func sh(t *testing.T, script string, opts *client.Options) *client.Client {
	t.Helper()
	if opts == nil {
		opts = &client.Options{}
	}
	if opts.Process == nil {
		opts.Process = &process.Options{Grace: 300 * time.Millisecond}
	}
	c, err := client.Start(process.Command{Path: "/bin/sh", Args: []string{"-c", script}}, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// Bug: a server that crashed while a child it started still held its
// stdout left pending calls hanging (no end of input ever came).
func TestRegressionCrashWithChildHoldingStdout(t *testing.T) {
	c := sh(t, `sleep 30 & read line; echo "fatal: bye" >&2; exit 3`, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Second)
	defer cancel()
	start := time.Now()
	_, err := c.Call(ctx, "ping", nil)
	if d := time.Since(start); d > 1500*time.Millisecond || !errors.Is(err, client.ErrConnectionLost) ||
		!strings.Contains(err.Error(), "exit status 3") {
		t.Fatalf("after %v: err = %v", d, err)
	}
}

// Bug: Close closed the server's stdin behind the connection's queued
// output, so a cancellation sent just before Close never arrived.
func TestRegressionCloseDeliversQueuedCancellation(t *testing.T) {
	for i := range 10 {
		c := startClient(t, "recorder", nil)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
		c.Call(ctx, "sleep", map[string]int{"ms": 60000})
		cancel()
		r := c.Close()
		if r.Outcome != process.Exited {
			t.Fatalf("run %d: outcome %s", i, r.Outcome)
		}
		p := c.Process()
		p.ExitError() // waits for the stderr drain
		if !strings.Contains(p.StderrTail(), "notifications/cancelled") {
			t.Fatalf("run %d: the cancellation never reached the server: %q", i, p.StderrTail())
		}
	}
}

// Bug: Close called from OnRestart deadlocked (Close waits for the monitor
// that ran the callback).
func TestRegressionCloseFromOnRestart(t *testing.T) {
	dir := t.TempDir()
	closed := make(chan struct{})
	var c *client.Client
	c = startClient(t, "crash-first", &client.Options{
		Restart: &client.RestartPolicy{MaxRestarts: 2, Backoff: time.Millisecond},
		OnRestart: func(n int, lost error) {
			c.Close()
			close(closed)
		},
	}, testserver.StateEnv+"="+dir)
	c.Call(context.Background(), "crash", nil)
	select {
	case <-closed:
	case <-time.After(5 * time.Second):
		t.Fatal("Close called from OnRestart never returned")
	}
}

// Bug: Stats counted the lost server twice while a restart was under way.
func TestRegressionStatsDuringRestart(t *testing.T) {
	var restarted atomic.Bool
	c := sh(t, `read line; echo "DEBUG: looking things up..."; exit 3`, &client.Options{
		Restart:   &client.RestartPolicy{MaxRestarts: 1, Backoff: 500 * time.Millisecond},
		OnRestart: func(int, error) { restarted.Store(true) },
		Process:   &process.Options{Grace: 300 * time.Millisecond},
	})
	c.Call(context.Background(), "ping", nil)
	time.Sleep(100 * time.Millisecond) // inside the backoff
	during := c.Stats().Violations
	for !restarted.Load() {
		time.Sleep(10 * time.Millisecond)
	}
	if after := c.Stats().Violations; during != 1 || after != 1 {
		t.Fatalf("violations: %d during the restart, %d after (want 1, 1)", during, after)
	}
}

// Bug: Notify ignored its context once the server stopped reading stdin.
func TestRegressionNotifyHonoursContext(t *testing.T) {
	c := sh(t, `exec sleep 30`, nil)
	big := strings.Repeat("x", 300<<10)
	for range 8 { // fill the pipe and the queue
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		start := time.Now()
		err := c.Notify(ctx, "log", map[string]string{"s": big})
		cancel()
		if d := time.Since(start); d > time.Second {
			t.Fatalf("Notify with a 200ms context returned after %v (%v)", d, err)
		}
	}
}

// Bug: with no restart policy, a retryable call on a server that closed its
// stdout (and kept running) waited for the whole shutdown ladder, and the
// error had no stderr tail.
func TestRegressionServerClosingStdoutFailsPromptly(t *testing.T) {
	c := sh(t, `trap "" TERM; read line; echo "closing stdout, staying alive" >&2; exec 1>&-; sleep 30`,
		&client.Options{Process: &process.Options{Grace: time.Second}})
	start := time.Now()
	_, err := c.Call(context.Background(), "ping", nil, client.Retryable())
	if d := time.Since(start); d > time.Second || !errors.Is(err, client.ErrConnectionLost) {
		t.Fatalf("failed after %v: %v", d, err)
	}
	if !strings.Contains(err.Error(), "closing stdout, staying alive") {
		t.Errorf("error lacks the stderr tail: %v", err)
	}
}

// Bug: a call made after the server had died, while its restart was
// pending, failed with ErrConnectionLost although it had never been sent
// (seen through the HTTP bridge: the request after a crash failed). It now
// waits for the new server; the restart's Handshake runs first.
func TestRegressionCallDuringRestartWaitsForNewServer(t *testing.T) {
	var handshakes atomic.Int64
	c := startClient(t, "crash", &client.Options{
		Restart: &client.RestartPolicy{Backoff: 200 * time.Millisecond},
		Handshake: func(ctx context.Context, conn *rpc.Conn) error {
			_, err := conn.Call(ctx, "echo", []string{"handshake"})
			if err == nil {
				handshakes.Add(1)
			}
			return err
		},
	})
	if _, err := c.Call(context.Background(), "crash", nil); !errors.Is(err, client.ErrConnectionLost) {
		t.Fatalf("err = %v", err)
	}
	res, err := c.Call(context.Background(), "echo", []int{1})
	if err != nil || string(res) != "[1]" {
		t.Fatalf("call during the restart: %s %v", res, err)
	}
	if handshakes.Load() != 1 || c.Stats().Restarts != 1 {
		t.Errorf("handshakes %d, restarts %d", handshakes.Load(), c.Stats().Restarts)
	}
}
