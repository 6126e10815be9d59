//go:build unix

package client_test

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/agentwire/agentwire/client"
	"github.com/agentwire/agentwire/rpc"
)

// Stats says what became of every lost server: restarted, or given up on
// once MaxRestarts were used (Lost, Restarts, RestartsExhausted).
func TestStatsCountRestartOutcomes(t *testing.T) {
	c := startClient(t, "crash", &client.Options{
		Restart: &client.RestartPolicy{MaxRestarts: 1, Backoff: time.Millisecond},
		Logger:  slog.New(slog.DiscardHandler),
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if s := c.Stats(); s.Lost != 0 || s.Restarts != 0 || s.RestartsFailed != 0 || s.RestartsExhausted != 0 {
		t.Fatalf("a new client's Stats = %+v", s)
	}
	if _, err := c.Call(ctx, "crash", nil); !errors.Is(err, client.ErrConnectionLost) {
		t.Fatalf("crash: %v", err)
	}
	if err := c.Ready(ctx); err != nil {
		t.Fatalf("not restarted: %v", err)
	}
	if s := c.Stats(); s.Lost != 1 || s.Restarts != 1 || s.RestartsFailed != 0 || s.RestartsExhausted != 0 {
		t.Fatalf("after one crash and a restart, Stats = %+v", s)
	}
	if _, err := c.Call(ctx, "crash", nil); !errors.Is(err, client.ErrConnectionLost) {
		t.Fatalf("second crash: %v", err)
	}
	select {
	case <-c.Done():
	case <-ctx.Done():
		t.Fatal("the client did not give up after its one restart")
	}
	if s := c.Stats(); s.Lost != 2 || s.Restarts != 1 || s.RestartsFailed != 0 || s.RestartsExhausted != 1 {
		t.Fatalf("after the restarts were used up, Stats = %+v", s)
	}
}

// A restart whose Handshake fails gives no usable server: RestartsFailed.
func TestStatsCountFailedRestarts(t *testing.T) {
	c := startClient(t, "crash", &client.Options{
		Restart: &client.RestartPolicy{Backoff: time.Millisecond},
		Handshake: func(ctx context.Context, conn *rpc.Conn) error {
			return errors.New("refused by the test")
		},
		Logger: slog.New(slog.DiscardHandler),
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := c.Call(ctx, "crash", nil); !errors.Is(err, client.ErrConnectionLost) {
		t.Fatalf("crash: %v", err)
	}
	select {
	case <-c.Done():
	case <-ctx.Done():
		t.Fatal("the client did not give up after a failed restart")
	}
	if s := c.Stats(); s.Lost != 1 || s.Restarts != 0 || s.RestartsFailed != 1 || s.RestartsExhausted != 0 {
		t.Fatalf("after a failed restart, Stats = %+v", s)
	}
}
