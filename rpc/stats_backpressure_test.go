package rpc_test

import (
	"context"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/agentwire/agentwire/rpc"
)

// Stats.OutputQueued is the bytes waiting in the output queue now, and
// Stats.BlockedOnOutput the time writers waited for room: a peer whose
// handlers are stuck stops reading (its queue of notifications is full),
// our notifications fill our queue, and the one that finds it full waits
// until the peer reads again. The wait is counted while it lasts, and
// stays counted after; the queue empties once the peer reads.
func TestStatsCountBackpressure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		peer := rpc.Methods{"tick": func(ctx context.Context, r *rpc.Request) (any, error) {
			<-release
			return nil, nil
		}}
		client, server := rpc.Pipe(nil, peer,
			&rpc.Options{Logger: quiet, OutputQueueBytes: 256},
			&rpc.Options{Logger: quiet, MaxConcurrentRequests: 1, MaxQueuedRequests: 1})
		if s := server.Stats(); s.OutputQueued != 0 || s.BlockedOnOutput != 0 {
			t.Fatalf("a new connection's Stats = %+v", s)
		}
		payload := map[string]string{"pad": strings.Repeat("x", 100)}
		sent := make(chan error, 1)
		go func() {
			for range 20 {
				if err := server.Notify(context.Background(), "tick", payload); err != nil {
					sent <- err
					return
				}
			}
			sent <- nil
		}()
		synctest.Wait()
		time.Sleep(2 * time.Second)
		s := server.Stats()
		if s.OutputQueued <= 0 || s.OutputQueued > 256 {
			t.Fatalf("OutputQueued = %d with a stalled peer, want 1..256", s.OutputQueued)
		}
		// The writer started waiting within the peer's first promotions
		// (a few InlineBudgets of the fake clock), two seconds ago.
		if s.BlockedOnOutput < 2*time.Second-time.Millisecond || s.BlockedOnOutput > 2*time.Second {
			t.Fatalf("BlockedOnOutput = %v while a writer waits, want about 2s", s.BlockedOnOutput)
		}

		close(release)
		if err := <-sent; err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		after := server.Stats()
		if after.OutputQueued != 0 {
			t.Fatalf("OutputQueued = %d once the peer reads again, want 0", after.OutputQueued)
		}
		if after.BlockedOnOutput < s.BlockedOnOutput || after.BlockedOnOutput > s.BlockedOnOutput+time.Millisecond {
			t.Fatalf("BlockedOnOutput = %v after the wait, want it kept (%v)", after.BlockedOnOutput, s.BlockedOnOutput)
		}
		if c := client.Stats(); c.BlockedOnOutput != 0 {
			t.Fatalf("the client, which wrote nothing, has BlockedOnOutput = %v", c.BlockedOnOutput)
		}
		client.Close()
		server.Close()
	})
}

// Over a MessageWriter there is no queue: the two are zero.
func TestStatsOutputQueueIsZeroOverMessages(t *testing.T) {
	var out collected
	c := rpc.NewMessages(nil, &out, nil, &rpc.Options{Logger: quiet})
	if err := c.Notify(context.Background(), "n", nil); err != nil {
		t.Fatal(err)
	}
	if s := c.Stats(); s.OutputQueued != 0 || s.BlockedOnOutput != 0 {
		t.Fatalf("Stats over messages = %+v", s)
	}
	c.Close()
}
