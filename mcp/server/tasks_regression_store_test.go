package server_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/agentwire/agentwire/internal/wiretest"
	"github.com/agentwire/agentwire/mcp"
	"github.com/agentwire/agentwire/mcp/internal/mcptest"
	"github.com/agentwire/agentwire/mcp/server"
	"github.com/agentwire/agentwire/mcp/tasks"
)

// A shared store whose stop waits for the delivery in flight (as a
// cancel-then-wg.Wait implementation does).
type waitingStop struct{ tasks.Store }

var logf = func(string, ...any) {}

var subs, stops, deliveries, calls atomic.Int64

func (w waitingStop) Subscribe(ctx context.Context, f func(tasks.Event)) (func(), error) {
	var inflight sync.WaitGroup
	var mu sync.Mutex
	stopped := false
	stop, err := w.Store.Subscribe(ctx, func(ev tasks.Event) {
		calls.Add(1)
		logf("deliver %s %s", ev.Task.ID[:4], ev.Task.Status)
		mu.Lock()
		if stopped {
			mu.Unlock()
			return
		}
		inflight.Add(1)
		mu.Unlock()
		defer inflight.Done()
		deliveries.Add(1)
		time.Sleep(time.Millisecond) // a delivery that takes a moment
		f(ev)
	})
	subs.Add(1)
	return func() {
		stops.Add(1)
		logf("stop")
		stop()
		mu.Lock()
		stopped = true
		mu.Unlock()
		inflight.Wait()
	}, err
}

// Regression: the runtime stopped the store subscription while holding
// its lock, which the store's delivery takes: a store whose stop waits
// for the delivery in flight deadlocked every task call and Shutdown.
// The subscription is now started and stopped outside that lock.
func TestRegressionStoppingTheSubscriptionDoesNotDeadlockWithADelivery(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		logf = t.Logf
		s := mcptest.NewServer(&server.Options{Tasks: &server.TaskOptions{Store: waitingStop{tasks.NewMemory(nil)}}, Logger: wiretest.Quiet})
		s.AddTool(mcp.Tool{Name: "quick", Execution: optional}, func(context.Context, *server.ToolRequest) (*mcp.ToolResult, error) {
			logf("handler")
			time.Sleep(time.Microsecond) // the handler takes a moment
			return mcp.TextResult("done"), nil
		})
		w := wiretest.Start(t, s.Handler(), s.ConnOptions(nil), true)
		tw := &taskWire{Wire: w, t: t, s: s}
		done := make(chan struct{})
		go func() {
			defer close(done)
			for range 20 {
				tw.Send(declared(tw.id(), "tools/call", `"name":"quick","arguments":{}`))
				time.Sleep(5 * time.Millisecond)
			}
		}()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Fatalf("stuck")
		}
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		t.Logf("subs %d stops %d deliveries %d calls %d", subs.Load(), stops.Load(), deliveries.Load(), calls.Load())
		t.Logf("stats %+v lines %d", s.TaskStats(), len(w.Take()))
		if err := s.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown: %v; stats %+v (a finish stuck stopping the subscription, the delivery waiting for the runtime lock)", err, s.TaskStats())
		}
		w.Finish()
	})
}

// flakyOutcome is a store whose updates fail (as a shared store's do in
// an outage) while down is set, and that records Released.
type flakyOutcome struct {
	tasks.Store
	down     atomic.Bool
	failed   atomic.Int64
	released atomic.Int64
}

func (f *flakyOutcome) Update(ctx context.Context, id string, fn func(*tasks.Task) error) (*tasks.Task, error) {
	if f.down.Load() {
		f.failed.Add(1)
		return nil, errors.New("store: connection refused")
	}
	return f.Store.Update(ctx, id, fn)
}

func (f *flakyOutcome) Released(string) { f.released.Add(1) }

// Regression: when writing a task's
// outcome failed, the task was left working forever (a shared store kept
// renewing its lease). The outcome is now tried again for about a minute,
// and the store is told the handler is done (tasks.Releaser) either way.
func TestRegressionATasksOutcomeOutlastsAStoreOutage(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := &flakyOutcome{Store: tasks.NewMemory(nil)}
		s := mcptest.NewServer(&server.Options{Tasks: &server.TaskOptions{Store: store}, Logger: wiretest.Quiet})
		g := addGated(s, "job", optional)
		w := wiretest.Start(t, s.Handler(), s.ConnOptions(nil), true)
		defer w.Finish()
		defer s.Shutdown(context.Background())
		tw := &taskWire{Wire: w, t: t, s: s}
		id := tw.start("job", `{}`)
		store.down.Store(true)
		close(g.release)
		w.Sleep(3 * time.Second) // the outage lasts through several tries
		store.down.Store(false)
		w.Sleep(10 * time.Second)
		if st := tw.get(id)["status"]; st != "completed" || store.failed.Load() < 3 || store.released.Load() != 1 {
			t.Fatalf("after the outage: status %v, %d failed writes, released %d times", st, store.failed.Load(), store.released.Load())
		}
	})
}

// Regression: a task ended by someone
// else than its handler (a shared store's sweeper that took this
// instance for lost) kept its handler running, and its outcome was
// dropped without a word. The handler's context now ends with
// ErrTaskEnded.
func TestRegressionATaskEndedElsewhereStopsItsHandler(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := tasks.NewMemory(nil)
		s := mcptest.NewServer(&server.Options{Tasks: &server.TaskOptions{Store: store}, Logger: wiretest.Quiet})
		g := addGated(s, "job", optional)
		w := wiretest.Start(t, s.Handler(), s.ConnOptions(nil), true)
		defer w.Finish()
		defer s.Shutdown(context.Background())
		tw := &taskWire{Wire: w, t: t, s: s}
		id := tw.start("job", `{}`)
		store.Update(context.Background(), id, func(t *tasks.Task) error { // the sweeper
			t.Status, t.StatusMessage = tasks.Failed, "the server instance running the task was lost"
			return nil
		})
		synctest.Wait()
		select {
		case cause := <-g.causes:
			if !errors.Is(cause, server.ErrTaskEnded) {
				t.Fatalf("the handler's context ended with %v", cause)
			}
		default:
			t.Fatal("the handler of a task ended elsewhere runs on")
		}
		if st := tw.get(id)["status"]; st != "failed" {
			t.Fatalf("status %v", st)
		}
	})
}

// countingStore counts the updates a store is asked for.
type countingStore struct {
	tasks.Store
	updates atomic.Int64
}

func (c *countingStore) Update(ctx context.Context, id string, f func(*tasks.Task) error) (*tasks.Task, error) {
	c.updates.Add(1)
	return c.Store.Update(ctx, id, f)
}

// Regression: a fast task that set a status message and
// ended cost two store writes (each a round trip to a shared store). The
// message now travels with the task's next change: one write, and the
// message is kept.
func TestAFastTasksStatusMessageTravelsWithItsOutcome(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := &countingStore{Store: tasks.NewMemory(nil)}
		s := mcptest.NewServer(&server.Options{Tasks: &server.TaskOptions{Store: store}, Logger: wiretest.Quiet})
		s.AddTool(mcp.Tool{Name: "quick", Execution: optional}, func(ctx context.Context, r *server.ToolRequest) (*mcp.ToolResult, error) {
			r.SetStatusMessage("nearly done")
			return mcp.TextResult("done"), nil
		})
		w := wiretest.Start(t, s.Handler(), s.ConnOptions(nil), true)
		defer w.Finish()
		defer s.Shutdown(context.Background())
		tw := &taskWire{Wire: w, t: t, s: s}
		id := tw.start("quick", `{}`)
		w.Sleep(time.Second)
		got := tw.get(id)
		if got["status"] != "completed" || got["statusMessage"] != "nearly done" || store.updates.Load() != 1 {
			t.Fatalf("status %v message %v after %d updates", got["status"], got["statusMessage"], store.updates.Load())
		}
	})
}
