//go:build unix

package client_test

// Regression tests for defects a review found in live() and Options.Handshake.

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentwire/agentwire/client"
	"github.com/agentwire/agentwire/rpc"
)

// Close while a restarted server's Handshake is under way: the handshake
// runs under a context.Background()-derived 30 s timeout that Close does
// not cancel, and Close waits for the monitor running it. Close, and every
// call parked in live() (even one with no deadline), hang until the
// handshake ends: up to 30 s for a restarted server that does not answer
// (for MCP, a legacy server that never answers initialize), forever for a
// Handshake that ignores its context.
func TestRegressionCloseDuringRestartHandshake(t *testing.T) {
	started := make(chan struct{})
	release := make(chan struct{})
	var n atomic.Int32
	c := startClient(t, "crash", &client.Options{
		Restart: &client.RestartPolicy{Backoff: time.Millisecond},
		Handshake: func(ctx context.Context, conn *rpc.Conn) error {
			if n.Add(1) == 1 {
				close(started)
			}
			select {
			case <-ctx.Done(): // what Close should trigger
				return ctx.Err()
			case <-release: // the test's own escape hatch
				return errors.New("released by the test")
			}
		},
	})
	if _, err := c.Call(context.Background(), "crash", nil); !errors.Is(err, client.ErrConnectionLost) {
		t.Fatalf("err = %v", err)
	}
	select {
	case <-started:
	case <-time.After(5 * time.Second):
		t.Fatal("no restart")
	}
	callDone := make(chan error, 1)
	go func() {
		_, err := c.Call(context.Background(), "echo", []int{1}) // parks in live()
		callDone <- err
	}()
	time.Sleep(50 * time.Millisecond)
	closeDone := make(chan struct{})
	go func() {
		c.Close()
		close(closeDone)
	}()
	select {
	case <-closeDone:
	case <-time.After(2 * time.Second):
		t.Error("Close is blocked behind the restart's Handshake (2 s and counting)")
	}
	select {
	case err := <-callDone:
		if !errors.Is(err, client.ErrClosed) {
			t.Errorf("parked call: %v", err)
		}
	case <-time.After(time.Second):
		t.Error("a call parked in live() did not end with Close")
	}
	close(release)
	<-closeDone
}

// Options.Handshake "runs on every restarted server before any call can
// reach it", but Client.Restart (the explicit restart, which mcp uses
// after a probe killed the server and which callers use after an expected
// death) starts the new process without it: for an MCP legacy session,
// calls then reach a server that was never initialized.
func TestRegressionExplicitRestartRunsHandshake(t *testing.T) {
	var handshakes atomic.Int32
	c := startClient(t, "crash", &client.Options{
		Handshake: func(ctx context.Context, conn *rpc.Conn) error {
			handshakes.Add(1)
			return nil
		},
	})
	if _, err := c.Call(context.Background(), "crash", nil); !errors.Is(err, client.ErrConnectionLost) {
		t.Fatalf("err = %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Call(ctx, "echo", []int{1}); err != nil {
		t.Fatal(err)
	}
	if n := handshakes.Load(); n != 1 {
		t.Errorf("Handshake ran %d times on the explicitly restarted server, want 1", n)
	}
}
