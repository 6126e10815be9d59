package tasks_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/agentwire/agentwire/mcp/tasks"
	"github.com/agentwire/agentwire/mcp/tasks/storetest"
	"go.uber.org/goleak"
)

// The helpers the store tests share (mcp/tasks/storetest).
type clock = storetest.Clock

var (
	newClock = storetest.NewClock
	working  = storetest.Working
	result   = storetest.Result
	complete = storetest.Complete
	mustGet  = storetest.MustGet
	notFound = storetest.NotFound
)

// TestMain checks that no test leaves a goroutine behind (a subscription
// that was not stopped).
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var quiet = slog.New(slog.DiscardHandler)

func newStore(c *clock, o tasks.MemoryOptions) *tasks.Memory {
	o.Logger = quiet
	if c != nil {
		o.Now = c.Now
	}
	return tasks.NewMemory(&o)
}

// The TTL counts from the end, never while the task runs: a task working
// for longer than its TTL is kept, and an ended one is forgotten exactly
// TTL after it ended.
func TestTTLCountsFromTheEndNeverWhileRunning(t *testing.T) {
	c := newClock()
	m := newStore(c, tasks.MemoryOptions{})
	if err := m.Create(t.Context(), working("a", time.Minute)); err != nil {
		t.Fatal(err)
	}
	c.Advance(48 * time.Hour)
	m.Sweep()
	if got := mustGet(t, m, "a"); got.Status != tasks.Working || !got.ExpiresAt().IsZero() {
		t.Fatalf("a running task: %+v", got)
	}
	complete(t, m, "a", 10)
	end := c.Now()
	if got := mustGet(t, m, "a"); !got.ExpiresAt().Equal(end.Add(time.Minute)) {
		t.Errorf("ExpiresAt %v, want %v", got.ExpiresAt(), end.Add(time.Minute))
	}
	c.Advance(time.Minute - time.Millisecond)
	mustGet(t, m, "a")
	c.Advance(time.Millisecond)
	notFound(t, m, "a")
	if _, err := m.Update(t.Context(), "a", func(*tasks.Task) error { return nil }); !errors.Is(err, tasks.ErrNotFound) {
		t.Errorf("Update of an expired task: %v", err)
	}
	if st := m.Stats(); st.Expired != 1 || st.Tasks != 0 || st.Bytes != 0 || st.Evicted != 0 {
		t.Errorf("stats %+v", st)
	}

	// Sweep forgets what has expired without any other call.
	for i := range 3 {
		id := fmt.Sprint("s", i)
		if err := m.Create(t.Context(), working(id, time.Duration(i+1)*time.Second)); err != nil {
			t.Fatal(err)
		}
		complete(t, m, id, 10)
	}
	c.Advance(2 * time.Second)
	m.Sweep()
	if st := m.Stats(); st.Tasks != 1 || st.Expired != 3 {
		t.Errorf("after Sweep: %+v", st)
	}
}

// MaxTasks: when full, the ended task closest to its expiry is forgotten
// first; when every task is live, Create fails with ErrFull.
func TestAFullStoreEvictsTheEndedTaskSoonestToExpireAndRefusesWhenAllAreLive(t *testing.T) {
	c := newClock()
	m := newStore(c, tasks.MemoryOptions{MaxTasks: 3})
	for _, tc := range []struct {
		id  string
		ttl time.Duration
	}{{"3h", 3 * time.Hour}, {"1h", time.Hour}, {"2h", 2 * time.Hour}} {
		if err := m.Create(t.Context(), working(tc.id, tc.ttl)); err != nil {
			t.Fatal(err)
		}
		complete(t, m, tc.id, 10)
	}
	if err := m.Create(t.Context(), working("new1", time.Hour)); err != nil {
		t.Fatal(err)
	}
	notFound(t, m, "1h")
	mustGet(t, m, "2h")
	mustGet(t, m, "3h")
	if err := m.Create(t.Context(), working("new2", time.Hour)); err != nil {
		t.Fatal(err)
	}
	notFound(t, m, "2h")
	if err := m.Create(t.Context(), working("new3", time.Hour)); err != nil {
		t.Fatal(err)
	}
	notFound(t, m, "3h")
	// Three live tasks: nothing may go.
	err := m.Create(t.Context(), working("new4", time.Hour))
	if !errors.Is(err, tasks.ErrFull) {
		t.Fatalf("Create with every task live: %v, want ErrFull", err)
	}
	for _, id := range []string{"new1", "new2", "new3"} {
		mustGet(t, m, id)
	}
	notFound(t, m, "new4")
	if st := m.Stats(); st.Tasks != 3 || st.Live != 3 || st.Evicted != 3 || st.Refused != 1 || st.Expired != 0 {
		t.Errorf("stats %+v", st)
	}
	// One ends: it makes the room.
	complete(t, m, "new2", 10)
	if err := m.Create(t.Context(), working("new4", time.Hour)); err != nil {
		t.Fatal(err)
	}
	notFound(t, m, "new2")
}

// MaxBytes bounds the payloads of all tasks (ended ones are evicted to
// make room, like MaxTasks); MaxTaskBytes bounds one (ErrTooLarge, the
// record unchanged).
func TestMaxBytesAndMaxTaskBytes(t *testing.T) {
	c := newClock()
	m := newStore(c, tasks.MemoryOptions{MaxBytes: 1000, MaxTaskBytes: 400})
	base := working("x", time.Hour).Size() // id and tool: one byte each
	for i := range 3 {
		id := fmt.Sprint(i)
		if err := m.Create(t.Context(), working(id, time.Duration(i+1)*time.Hour)); err != nil {
			t.Fatal(err)
		}
		complete(t, m, id, 300)
	}
	if st := m.Stats(); st.Bytes != 3*(300+base) {
		t.Fatalf("bytes %d, want %d", st.Bytes, 3*(300+base))
	}
	// A fourth 300-byte result does not fit beside three: the one soonest
	// to expire goes.
	if err := m.Create(t.Context(), working("3", time.Hour)); err != nil {
		t.Fatal(err)
	}
	complete(t, m, "3", 300)
	notFound(t, m, "0")
	if st := m.Stats(); st.Bytes > 1000 || st.Evicted != 1 || st.Tasks != 3 {
		t.Errorf("stats %+v", st)
	}

	// One task's payload past MaxTaskBytes: refused, nothing written.
	if err := m.Create(t.Context(), working("big", time.Hour)); err != nil {
		t.Fatal(err)
	}
	_, err := m.Update(t.Context(), "big", func(tk *tasks.Task) error {
		tk.Status = tasks.Completed
		tk.Result = result(500)
		return nil
	})
	if !errors.Is(err, tasks.ErrTooLarge) {
		t.Fatalf("a 500-byte result at MaxTaskBytes 400: %v", err)
	}
	if got := mustGet(t, m, "big"); got.Status != tasks.Working || got.Result != nil {
		t.Errorf("a refused update was written: %+v", got)
	}
	huge := working("huge", time.Hour)
	huge.StatusMessage = strings.Repeat("m", 500)
	if err := m.Create(t.Context(), huge); !errors.Is(err, tasks.ErrTooLarge) {
		t.Errorf("Create past MaxTaskBytes: %v", err)
	}
	notFound(t, m, "huge")
	if st := m.Stats(); st.TooLarge != 2 {
		t.Errorf("TooLarge %d, want 2", st.TooLarge)
	}
}

// Regression: with MaxBytes set below the default MaxTaskBytes (8 MiB), a
// task larger than the whole store was let through the MaxTaskBytes check,
// evicted every ended task trying to make room, and then failed with
// ErrFull. It is too large (ErrTooLarge) and evicts nothing.
func TestATaskLargerThanTheWholeStoreIsTooLargeAndEvictsNothing(t *testing.T) {
	m := newStore(newClock(), tasks.MemoryOptions{MaxBytes: 1 << 10})
	for i := range 3 {
		id := fmt.Sprint(i)
		if err := m.Create(t.Context(), working(id, time.Hour)); err != nil {
			t.Fatal(err)
		}
		complete(t, m, id, 100)
	}
	big := working("big", time.Hour)
	big.Result = result(2 << 10)
	if err := m.Create(t.Context(), big); !errors.Is(err, tasks.ErrTooLarge) {
		t.Errorf("Create of a task larger than MaxBytes: %v, want ErrTooLarge", err)
	}
	if err := m.Create(t.Context(), working("grows", time.Hour)); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Update(t.Context(), "grows", func(tk *tasks.Task) error {
		tk.Result = result(2 << 10)
		return nil
	}); !errors.Is(err, tasks.ErrTooLarge) {
		t.Errorf("Update past MaxBytes: %v, want ErrTooLarge", err)
	}
	for i := range 3 {
		mustGet(t, m, fmt.Sprint(i))
	}
	if st := m.Stats(); st.Evicted != 0 || st.TooLarge != 2 || st.Refused != 0 {
		t.Errorf("stats %+v", st)
	}
}

// A store's bound holds however many tasks pass through it: 10,000 tasks
// that end, 20 times MaxTasks, leave at most MaxTasks tasks and MaxBytes
// bytes held, and the heap stays about where it was (the 10,000 results
// alone would be 10 MiB).
func TestTenThousandFinishedTasksDoNotGrowMemoryPastTheStoresBound(t *testing.T) {
	const n, maxTasks, maxBytes, resultSize = 10_000, 500, 256 << 10, 1 << 10
	heap := func() uint64 {
		runtime.GC()
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc
	}
	c := newClock()
	m := newStore(c, tasks.MemoryOptions{MaxTasks: maxTasks, MaxBytes: maxBytes})
	before := heap()
	for i := range n {
		id := fmt.Sprintf("task-%05d", i)
		if err := m.Create(t.Context(), working(id, time.Hour)); err != nil {
			t.Fatalf("task %d: %v", i, err)
		}
		complete(t, m, id, resultSize)
		if st := m.Stats(); st.Tasks > maxTasks || st.Bytes > maxBytes {
			t.Fatalf("after %d tasks: %d tasks, %d bytes held (bounds %d, %d)", i+1, st.Tasks, st.Bytes, maxTasks, maxBytes)
		}
		c.Advance(time.Millisecond)
	}
	after := heap()
	st := m.Stats()
	if st.Created != n || st.Evicted+int64(st.Tasks) != n || st.Live != 0 {
		t.Errorf("stats %+v", st)
	}
	// The bytes bound is the tighter: about 250 tasks of 1 KiB.
	if st.Tasks < maxBytes/(resultSize+64) {
		t.Errorf("only %d tasks held: the store evicted more than it had to", st.Tasks)
	}
	mustGet(t, m, fmt.Sprintf("task-%05d", n-1)) // the newest are the ones kept
	grown := int64(after) - int64(before)
	const allowed = 4 << 20 // generous: what is held is ~300 KiB; 10,000 results are ~10 MiB
	if grown > allowed {
		t.Errorf("the heap grew by %d KiB over 10,000 finished tasks; allowed %d KiB", grown>>10, allowed>>10)
	}
	t.Logf("heap grew by %d KiB holding %d tasks, %d bytes", grown>>10, st.Tasks, st.Bytes)
	runtime.KeepAlive(m)
}

// A slow subscriber loses the oldest events past EventBuffer, counted in
// Stats.EventsDropped; what it does get is the newest, in order.
func TestASlowSubscriberLosesTheOldestEventsPastEventBuffer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newStore(nil, tasks.MemoryOptions{EventBuffer: 4})
		release := make(chan struct{})
		var mu sync.Mutex
		var seen []string
		stop, _ := m.Subscribe(t.Context(), func(ev tasks.Event) {
			mu.Lock()
			seen = append(seen, ev.Task.StatusMessage)
			first := len(seen) == 1
			mu.Unlock()
			if first {
				<-release // stuck on the first event
			}
		})
		defer stop()
		ctx := context.Background()
		m.Create(ctx, working("a", time.Hour))
		synctest.Wait() // the subscriber holds the create event
		for i := 1; i <= 10; i++ {
			m.Update(ctx, "a", func(tk *tasks.Task) error { tk.StatusMessage = fmt.Sprint(i); return nil })
		}
		if st := m.Stats(); st.EventsDropped != 6 {
			t.Errorf("EventsDropped %d, want 6 (10 queued behind a buffer of 4)", st.EventsDropped)
		}
		close(release)
		synctest.Wait()
		mu.Lock()
		defer mu.Unlock()
		if got := fmt.Sprint(seen); got != "[ 7 8 9 10]" {
			t.Errorf("delivered %s, want the create and the newest 4", got)
		}
	})
}

// Regression: Stats.EventsDropped summed the drops of the subscribers
// still subscribed, so a counter went down when a slow subscriber
// stopped. What was lost stays counted.
func TestEventsDroppedStaysCountedAfterTheSubscriberStops(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newStore(nil, tasks.MemoryOptions{EventBuffer: 1})
		release := make(chan struct{})
		stop, _ := m.Subscribe(t.Context(), func(tasks.Event) { <-release })
		ctx := context.Background()
		m.Create(ctx, working("a", time.Hour))
		synctest.Wait()
		for range 3 {
			m.Update(ctx, "a", func(tk *tasks.Task) error { tk.Keys++; return nil })
		}
		if st := m.Stats(); st.EventsDropped != 2 {
			t.Fatalf("EventsDropped %d, want 2", st.EventsDropped)
		}
		stop()
		close(release)
		synctest.Wait()
		if st := m.Stats(); st.EventsDropped != 2 {
			t.Errorf("after the subscriber stopped, EventsDropped %d, want 2", st.EventsDropped)
		}
	})
}

// A subscription ends with its stop function (called any number of
// times) or its context, and is told nothing after.
func TestASubscriptionEndsWithStopOrItsContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newStore(nil, tasks.MemoryOptions{})
		var mu sync.Mutex
		counts := map[string]int{}
		count := func(name string) func(tasks.Event) {
			return func(tasks.Event) { mu.Lock(); counts[name]++; mu.Unlock() }
		}
		stop, _ := m.Subscribe(t.Context(), count("stopped"))
		ctx, cancel := context.WithCancel(t.Context())
		m.Subscribe(ctx, count("cancelled"))
		stay, _ := m.Subscribe(t.Context(), count("stays"))
		defer stay()
		m.Create(context.Background(), working("a", time.Hour))
		synctest.Wait()
		stop()
		stop()
		cancel()
		synctest.Wait()
		m.Update(context.Background(), "a", func(tk *tasks.Task) error { tk.Keys++; return nil })
		synctest.Wait()
		mu.Lock()
		defer mu.Unlock()
		if counts["stopped"] != 1 || counts["cancelled"] != 1 || counts["stays"] != 2 {
			t.Errorf("events per subscriber: %v", counts)
		}
	})
}

// The bounded in-memory store: a task is created, runs, ends, and is
// forgotten its TTL after it ended.
func ExampleMemory() {
	now := time.Date(2026, 7, 28, 9, 0, 0, 0, time.UTC)
	store := tasks.NewMemory(&tasks.MemoryOptions{
		MaxTasks: 1000,
		Now:      func() time.Time { return now },
	})
	ctx := context.Background()
	store.Create(ctx, &tasks.Task{ID: "t1", Tool: "build", Status: tasks.Working, TTL: time.Hour})

	t, _ := store.Update(ctx, "t1", func(t *tasks.Task) error {
		t.Status = tasks.Completed
		t.Result = json.RawMessage(`{"content":[{"type":"text","text":"built"}]}`)
		return nil
	})
	fmt.Println(t.Status, string(t.Result), t.ExpiresAt().Sub(now))

	now = now.Add(time.Hour)
	_, err := store.Get(ctx, "t1")
	fmt.Println(err)
	fmt.Printf("%+v\n", store.Stats())
	// Output:
	// completed {"content":[{"type":"text","text":"built"}]} 1h0m0s
	// tasks: no such task
	// {Tasks:0 Live:0 Bytes:0 Created:1 Expired:1 Evicted:0 Refused:0 TooLarge:0 EventsDropped:0}
}

// A selective subscription (tasks.Selective) is told only of the tasks
// its keep accepts; keep is asked before anything is copied.
func TestASelectiveSubscriptionHearsOnlyTheTasksItKeeps(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := tasks.NewMemory(&tasks.MemoryOptions{Logger: quiet})
		var mu sync.Mutex
		var got []string
		stop, err := m.SubscribeSelected(t.Context(), func(id string) bool { return id == "mine" }, func(ev tasks.Event) {
			mu.Lock()
			got = append(got, ev.Task.ID+":"+string(ev.Task.Status))
			mu.Unlock()
		})
		if err != nil {
			t.Fatal(err)
		}
		defer stop()
		ctx := context.Background()
		for _, id := range []string{"other", "mine"} {
			if err := m.Create(ctx, &tasks.Task{ID: id, Status: tasks.Working}); err != nil {
				t.Fatal(err)
			}
			m.Update(ctx, id, func(t *tasks.Task) error { t.Status = tasks.Completed; return nil })
		}
		synctest.Wait()
		mu.Lock()
		defer mu.Unlock()
		if strings.Join(got, " ") != "mine:working mine:completed" {
			t.Fatalf("heard %q", got)
		}
	})
}

// Memory keeps the tasks.Store contract (mcp/tasks/storetest).
func TestMemoryKeepsTheStoreContract(t *testing.T) {
	storetest.Run(t, func(t *testing.T, now func() time.Time) tasks.Store {
		return tasks.NewMemory(&tasks.MemoryOptions{Logger: quiet, Now: now})
	})
}

// Memory counts what it holds: a created task is held and live, an ended
// one held but not live.
func TestMemoryCountsTheTasksItHolds(t *testing.T) {
	c := newClock()
	m := newStore(c, tasks.MemoryOptions{})
	if err := m.Create(t.Context(), working("a", time.Hour)); err != nil {
		t.Fatal(err)
	}
	if st := m.Stats(); st.Tasks != 1 || st.Live != 1 || st.Created != 1 {
		t.Errorf("stats after Create %+v", st)
	}
	complete(t, m, "a", 10)
	if st := m.Stats(); st.Live != 0 || st.Tasks != 1 {
		t.Errorf("stats after the end %+v", st)
	}
}
