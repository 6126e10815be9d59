package redisstate

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentwire/agentwire/mcp/tasks"
	"github.com/agentwire/agentwire/mcp/tasks/storetest"
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

// The tests of this file mirror mcp/tasks' tests of Memory: the same
// semantics, through Redis.

// f may be called more than once: when another writer changes the task
// between the read and the write, the update is tried again on the new
// record, and the other writer's change is kept.
func TestAnOvertakenUpdateIsTriedAgainOnTheNewRecord(t *testing.T) {
	t.Parallel()
	r := startRedis(t)
	a, b := newState(t, r, Options{}), newState(t, r, Options{})
	if err := a.Tasks().Create(t.Context(), working("a", time.Hour)); err != nil {
		t.Fatal(err)
	}
	calls := 0
	got, err := a.Tasks().Update(t.Context(), "a", func(tk *tasks.Task) error {
		calls++
		if calls == 1 { // another instance writes while this one holds the record
			if _, err := b.Tasks().Update(context.Background(), "a", func(tk *tasks.Task) error { tk.StatusMessage = "b's"; return nil }); err != nil {
				t.Errorf("b's update: %v", err)
			}
		}
		tk.Keys++
		return nil
	})
	if err != nil || calls != 2 || got.Keys != 1 || got.StatusMessage != "b's" {
		t.Fatalf("after %d calls: %+v %v", calls, got, err)
	}
	if s := a.Stats(); s.UpdateRetries != 1 {
		t.Errorf("stats %+v", s)
	}
}

// The TTL counts from the end, never while the task runs: a task working
// for longer than its TTL is kept, and an ended one is gone about TTL
// after it ended (Redis expires the record).
func TestTTLCountsFromTheEndNeverWhileRunning(t *testing.T) {
	t.Parallel()
	r := startRedis(t)
	c := newClock()
	st := newState(t, r, Options{Now: c.Now})
	m := st.Tasks()
	if err := m.Create(t.Context(), working("a", time.Minute)); err != nil {
		t.Fatal(err)
	}
	c.Advance(48 * time.Hour)
	if got := mustGet(t, m, "a"); got.Status != tasks.Working || !got.ExpiresAt().IsZero() {
		t.Fatalf("a running task: %+v", got)
	}
	if ttl, _ := st.client.PTTL(t.Context(), st.k.task("a")).Result(); ttl >= 0 {
		t.Errorf("a running task's record has a Redis TTL: %v", ttl)
	}
	complete(t, m, "a", 10)
	end := c.Now()
	if got := mustGet(t, m, "a"); !got.ExpiresAt().Equal(end.Add(time.Minute)) {
		t.Errorf("ExpiresAt %v, want %v", got.ExpiresAt(), end.Add(time.Minute))
	}
	if ttl, _ := st.client.PTTL(t.Context(), st.k.task("a")).Result(); ttl <= 58*time.Second || ttl > time.Minute {
		t.Errorf("the ended task's record expires in %v, want about a minute", ttl)
	}
	// A later update of the ended task keeps its expiry.
	if _, err := m.Update(t.Context(), "a", func(tk *tasks.Task) error { tk.StatusMessage = "late"; return nil }); err != nil {
		t.Fatal(err)
	}
	if ttl, _ := st.client.PTTL(t.Context(), st.k.task("a")).Result(); ttl <= 58*time.Second {
		t.Errorf("after a later update the record expires in %v", ttl)
	}

	// A short TTL, in real time: found right after the end, gone after.
	const ttl = 300 * time.Millisecond
	if err := m.Create(t.Context(), working("short", ttl)); err != nil {
		t.Fatal(err)
	}
	complete(t, m, "short", 10)
	ended := time.Now()
	mustGet(t, m, "short")
	eventually(t, 5*time.Second, "the ended task expires", func() bool {
		_, err := m.Get(t.Context(), "short")
		return errors.Is(err, tasks.ErrNotFound)
	})
	if gone := time.Since(ended); gone < ttl-50*time.Millisecond {
		t.Errorf("gone %v after its end, before its TTL %v", gone, ttl)
	}
	if _, err := m.Update(t.Context(), "short", func(*tasks.Task) error { return nil }); !errors.Is(err, tasks.ErrNotFound) {
		t.Errorf("Update of an expired task: %v", err)
	}
}

// MaxTaskBytes bounds one task (ErrTooLarge, the record unchanged).
func TestMaxTaskBytes(t *testing.T) {
	t.Parallel()
	st := newState(t, startRedis(t), Options{MaxTaskBytes: 400})
	m := st.Tasks()
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
	complete(t, m, "big", 300)
	if s := st.Stats(); s.TooLarge != 2 {
		t.Errorf("TooLarge %d, want 2", s.TooLarge)
	}
}

type recorder struct {
	mu   sync.Mutex
	seen []string
}

func (r *recorder) add(s string) {
	r.mu.Lock()
	r.seen = append(r.seen, s)
	r.mu.Unlock()
}

func (r *recorder) get() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.seen)
}

func (r *recorder) len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.seen)
}

// A task larger than an event carries whole (64 KiB) is told by its id;
// the receiving State reads it and delivers it whole.
func TestAnEventOfALargeTaskCarriesItsIDAndIsReadBack(t *testing.T) {
	t.Parallel()
	r := startRedis(t)
	a, b := newState(t, r, Options{}), newState(t, r, Options{})
	waitListening(t, b)
	got := make(chan *tasks.Task, 4)
	stop, _ := b.Tasks().Subscribe(t.Context(), func(ev tasks.Event) { got <- ev.Task })
	defer stop()
	if err := a.Tasks().Create(t.Context(), working("big", time.Hour)); err != nil {
		t.Fatal(err)
	}
	<-got
	complete(t, a.Tasks(), "big", 200<<10)
	select {
	case tk := <-got:
		if tk.Status != tasks.Completed || len(tk.Result) != 200<<10 {
			t.Errorf("the large task's event: %s, %d bytes", tk.Status, len(tk.Result))
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no event for the large task")
	}
}

// A slow subscriber loses the oldest events past EventBuffer, counted in
// Stats.EventsDropped; what it does get is the newest, in order.
func TestASlowSubscriberLosesTheOldestEventsPastEventBuffer(t *testing.T) {
	t.Parallel()
	st := newState(t, startRedis(t), Options{EventBuffer: 4})
	waitListening(t, st)
	m := st.Tasks()
	release := make(chan struct{})
	var rec recorder
	stop, _ := m.Subscribe(t.Context(), func(ev tasks.Event) {
		rec.add(ev.Task.StatusMessage)
		if rec.len() == 1 {
			<-release // stuck on the first event
		}
	})
	defer stop()
	ctx := context.Background()
	m.Create(ctx, working("a", time.Hour))
	eventually(t, 5*time.Second, "the subscriber holds the create event", func() bool { return rec.len() == 1 })
	for i := 1; i <= 10; i++ {
		m.Update(ctx, "a", func(tk *tasks.Task) error { tk.StatusMessage = fmt.Sprint(i); return nil })
	}
	eventually(t, 5*time.Second, "every event is received", func() bool { return st.Stats().EventsReceived == 11 })
	if s := st.Stats(); s.EventsDropped != 6 {
		t.Errorf("EventsDropped %d, want 6 (10 queued behind a buffer of 4)", s.EventsDropped)
	}
	close(release)
	eventually(t, 5*time.Second, "the queue drains", func() bool { return rec.len() == 5 })
	if got := fmt.Sprint(rec.get()); got != "[ 7 8 9 10]" {
		t.Errorf("delivered %s, want the create and the newest 4", got)
	}
}

// A subscription ends with its stop function (called any number of
// times) or its context, and is told nothing after.
func TestASubscriptionEndsWithStopOrItsContext(t *testing.T) {
	t.Parallel()
	st := newState(t, startRedis(t), Options{})
	waitListening(t, st)
	m := st.Tasks()
	var mu sync.Mutex
	counts := map[string]int{}
	count := func(name string) func(tasks.Event) {
		return func(tasks.Event) { mu.Lock(); counts[name]++; mu.Unlock() }
	}
	get := func(name string) int { mu.Lock(); defer mu.Unlock(); return counts[name] }
	stop, _ := m.Subscribe(t.Context(), count("stopped"))
	ctx, cancel := context.WithCancel(t.Context())
	m.Subscribe(ctx, count("cancelled"))
	stay, _ := m.Subscribe(t.Context(), count("stays"))
	defer stay()
	m.Create(context.Background(), working("a", time.Hour))
	eventually(t, 5*time.Second, "each subscriber hears the create", func() bool {
		return get("stopped") == 1 && get("cancelled") == 1 && get("stays") == 1
	})
	stop()
	stop()
	cancel()
	eventually(t, 5*time.Second, "the cancelled subscription ends", func() bool {
		st.mu.Lock()
		defer st.mu.Unlock()
		return len(st.taskSubs) == 1
	})
	m.Update(context.Background(), "a", func(tk *tasks.Task) error { tk.Keys++; return nil })
	eventually(t, 5*time.Second, "the one left hears the update", func() bool { return get("stays") == 2 })
	m.Create(context.Background(), working("b", time.Hour))
	eventually(t, 5*time.Second, "and the next create", func() bool { return get("stays") == 3 })
	if get("stopped") != 1 || get("cancelled") != 1 {
		t.Errorf("events per subscriber: %v", counts)
	}
}

// The Redis store keeps the tasks.Store contract (mcp/tasks/storetest),
// each check on a Redis of its own.
func TestTheRedisStoreKeepsTheStoreContract(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, now func() time.Time) tasks.Store {
		st := newState(t, startRedis(t), Options{Now: now})
		waitListening(t, st) // events published before the Pub/Sub link is up are not told
		return st.Tasks()
	})
}

// A State counts what it created and published.
func TestAStateCountsItsCreations(t *testing.T) {
	t.Parallel()
	st := newState(t, startRedis(t), Options{})
	if err := st.Tasks().Create(t.Context(), working("a", time.Hour)); err != nil {
		t.Fatal(err)
	}
	if s := st.Stats(); s.Created != 1 || s.Published != 1 {
		t.Errorf("stats %+v", s)
	}
}

// Concurrent updates through two States (two instances) are not lost.
func TestUpdatesThroughTwoStatesAreNotLost(t *testing.T) {
	t.Parallel()
	r := startRedis(t)
	a, b := newState(t, r, Options{}), newState(t, r, Options{})
	if err := a.Tasks().Create(t.Context(), working("a", time.Hour)); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i := range 50 {
		s := []tasks.Store{a.Tasks(), b.Tasks()}[i%2]
		wg.Go(func() {
			if _, err := s.Update(context.Background(), "a", func(tk *tasks.Task) error {
				tk.Keys++
				return nil
			}); err != nil {
				t.Errorf("a concurrent increment: %v", err)
			}
		})
	}
	wg.Wait()
	if got := mustGet(t, a.Tasks(), "a"); got.Keys != 50 {
		t.Errorf("50 concurrent increments made %d", got.Keys)
	}
	if a.Stats().UpdateRetries+b.Stats().UpdateRetries == 0 {
		t.Log("no update had to be retried (no contention happened)")
	}
}

// An ended task leaves the live set: no lease is renewed or swept.
func TestAnEndedTaskLeavesTheLiveSet(t *testing.T) {
	t.Parallel()
	r := startRedis(t)
	for _, end := range []tasks.Status{tasks.Completed, tasks.Failed, tasks.Cancelled} {
		st := newState(t, r, Options{Prefix: "ended-" + string(end) + ":"})
		m := st.Tasks()
		if err := m.Create(t.Context(), working("a", time.Hour)); err != nil {
			t.Fatal(err)
		}
		if _, err := m.Update(t.Context(), "a", func(tk *tasks.Task) error { tk.Status = end; return nil }); err != nil {
			t.Fatal(err)
		}
		if n, _ := st.client.ZCard(t.Context(), st.k.live).Result(); n != 0 {
			t.Errorf("%s: %d tasks in the live set", end, n)
		}
	}
}

// Another instance lists the same; expired tasks are skipped, the page
// filled from what follows, and their ids leave the index; many expired
// ids end a page after a bounded number of round trips, with a cursor to
// go on from.
func TestListSkipsExpiredTasksAndReadsTheSameThroughAnotherState(t *testing.T) {
	t.Parallel()
	r := startRedis(t)
	st := newState(t, r, Options{})
	m := st.Tasks()
	mk := func(id, owner, scope string) {
		tk := working(id, time.Hour)
		tk.Owner, tk.Scope = owner, scope
		if err := m.Create(t.Context(), tk); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 5 {
		mk(fmt.Sprint("alice-", i), "alice", "")
		mk(fmt.Sprint("conn2-", i), "", "conn2")
	}
	mk("alice-in-conn1", "alice", "conn1")
	other := newState(t, r, Options{})
	if got := fmt.Sprint(storetest.Pages(t, other.Tasks(), "alice", "", 4)); got != "[[alice-0 alice-1 alice-2 alice-3] [alice-4 alice-in-conn1]]" {
		t.Errorf("alice's pages through another State: %s", got)
	}
	for i := range 3 {
		st.client.Del(t.Context(), st.k.task(fmt.Sprint("conn2-", i))) // as Redis expiry does
	}
	if got := fmt.Sprint(storetest.Pages(t, m, "", "conn2", 1)); got != "[[conn2-3] [conn2-4]]" {
		t.Errorf("conn2's pages once three expired: %s", got)
	}
	if n, _ := st.client.ZCard(t.Context(), st.k.index("", "conn2")).Result(); n != 2 {
		t.Errorf("the index holds %d ids, want the 2 left", n)
	}
	for i := range 100 {
		mk(fmt.Sprint("gone-", i), "dave", "")
		st.client.Del(t.Context(), st.k.task(fmt.Sprint("gone-", i)))
	}
	mk("dave-last", "dave", "")
	if got := storetest.Pages(t, m, "dave", "", 2); fmt.Sprint(got[len(got)-1]) != "[dave-last]" || len(slices.Concat(got...)) != 1 {
		t.Errorf("dave's pages: %v", got)
	}
}
