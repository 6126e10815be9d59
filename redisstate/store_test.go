package redisstate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentwire/agentwire/mcp/tasks"
)

// The tests of this file mirror mcp/tasks' tests of Memory: the same
// semantics, through Redis.

// clock is an injected Now: time moves only when the test says. Redis
// expiry is relative (PEXPIRE, counted by the State's clock), so a clock
// far from the real one is fine.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func newClock() *clock { return &clock{now: time.Date(2026, 7, 28, 12, 0, 0, 0, time.UTC)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

func working(id string, ttl time.Duration) *tasks.Task {
	return &tasks.Task{ID: id, Tool: "t", Status: tasks.Working, TTL: ttl}
}

func result(n int) json.RawMessage {
	if n < len(`{"x":""}`) {
		return json.RawMessage(`{}`)
	}
	return json.RawMessage(`{"x":"` + strings.Repeat("a", n-len(`{"x":""}`)) + `"}`)
}

func complete(t *testing.T, m tasks.Store, id string, resultBytes int) {
	t.Helper()
	if _, err := m.Update(t.Context(), id, func(tk *tasks.Task) error {
		tk.Status = tasks.Completed
		tk.Result = result(resultBytes)
		return nil
	}); err != nil {
		t.Fatalf("completing %s: %v", id, err)
	}
}

func mustGet(t *testing.T, m tasks.Store, id string) *tasks.Task {
	t.Helper()
	tk, err := m.Get(t.Context(), id)
	if err != nil {
		t.Fatalf("Get %s: %v", id, err)
	}
	return tk
}

func notFound(t *testing.T, m tasks.Store, id string) {
	t.Helper()
	if _, err := m.Get(t.Context(), id); !errors.Is(err, tasks.ErrNotFound) {
		t.Fatalf("Get %s: %v, want ErrNotFound", id, err)
	}
}

// Durable creation: Create returns only once Get finds the task; the
// store keeps its own copy, and hands out copies.
func TestACreatedTaskIsFoundTheMomentCreateReturns(t *testing.T) {
	t.Parallel()
	st := newState(t, startRedis(t), Options{})
	m := st.Tasks()
	in := &tasks.Task{ID: "a", Owner: "o", Scope: "s", Design: "2026-07-28", Tool: "job", Status: tasks.Working,
		TTL: time.Minute, PollInterval: time.Second, InputRequests: map[string]json.RawMessage{"k": json.RawMessage(`{"method":"m"}`)}}
	if err := m.Create(t.Context(), in); err != nil {
		t.Fatal(err)
	}
	got := mustGet(t, m, "a")
	if got.Owner != "o" || got.Scope != "s" || got.Design != "2026-07-28" || got.Tool != "job" || got.Status != tasks.Working ||
		got.TTL != time.Minute || got.PollInterval != time.Second || string(got.InputRequests["k"]) != `{"method":"m"}` {
		t.Errorf("read back %+v", got)
	}
	in.Status = tasks.Failed
	in.InputRequests["k"][2] = 'X'
	got.InputRequests["k"] = json.RawMessage(`{}`)
	got.Status = tasks.Cancelled
	again := mustGet(t, m, "a")
	if again.Status != tasks.Working || string(again.InputRequests["k"]) != `{"method":"m"}` {
		t.Errorf("the store's record changed through a copy: %+v", again)
	}
	if err := m.Create(t.Context(), working("a", 0)); !errors.Is(err, tasks.ErrExists) {
		t.Errorf("a second Create of the id: %v, want ErrExists", err)
	}
	if again := mustGet(t, m, "a"); again.Tool != "job" {
		t.Errorf("a refused Create overwrote the task: %+v", again)
	}
	notFound(t, m, "nope")
	if s := st.Stats(); s.Created != 1 || s.Published != 1 {
		t.Errorf("stats %+v", s)
	}
	// A task created ended (rare, but a Store allows it) is given its end.
	done := working("done", time.Hour)
	done.Status = tasks.Completed
	if err := m.Create(t.Context(), done); err != nil {
		t.Fatal(err)
	}
	if got := mustGet(t, m, "done"); got.EndedAt.IsZero() || got.ExpiresAt().IsZero() {
		t.Errorf("an ended task created without EndedAt: %+v", got)
	}
}

// Update is an atomic read-modify-write: f's error writes nothing, the id
// is not f's to change, and concurrent updates are not lost, through one
// State or two.
func TestUpdateIsAtomicAndAnErrorWritesNothing(t *testing.T) {
	t.Parallel()
	r := startRedis(t)
	a, b := newState(t, r, Options{}), newState(t, r, Options{})
	m := a.Tasks()
	if err := m.Create(t.Context(), working("a", time.Hour)); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("boom")
	if _, err := m.Update(t.Context(), "a", func(tk *tasks.Task) error {
		tk.StatusMessage = "half-done"
		return boom
	}); !errors.Is(err, boom) {
		t.Fatalf("Update: %v, want f's error", err)
	}
	if got := mustGet(t, m, "a"); got.StatusMessage != "" {
		t.Errorf("a failed update was written: %q", got.StatusMessage)
	}
	got, err := m.Update(t.Context(), "a", func(tk *tasks.Task) error {
		tk.ID = "b"
		tk.StatusMessage = "renamed?"
		return nil
	})
	if err != nil || got.ID != "a" {
		t.Fatalf("Update: %+v %v", got, err)
	}
	notFound(t, m, "b")
	if _, err := m.Update(t.Context(), "nope", func(*tasks.Task) error { return nil }); !errors.Is(err, tasks.ErrNotFound) {
		t.Errorf("Update of an unknown id: %v", err)
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
	if got := mustGet(t, m, "a"); got.Keys != 50 {
		t.Errorf("50 concurrent increments made %d", got.Keys)
	}
	if a.Stats().UpdateRetries+b.Stats().UpdateRetries == 0 {
		t.Log("no update had to be retried (no contention happened)")
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := m.Update(ctx, "a", func(*tasks.Task) error { return nil }); !errors.Is(err, context.Canceled) {
		t.Errorf("Update with a done context: %v", err)
	}
}

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

// An ended task stays ended: no update moves it out of its terminal
// status (its EndedAt is when it ended).
func TestAnEndedTaskStaysEnded(t *testing.T) {
	t.Parallel()
	r := startRedis(t)
	for _, end := range []tasks.Status{tasks.Completed, tasks.Failed, tasks.Cancelled} {
		t.Run(string(end), func(t *testing.T) {
			c := newClock()
			st := newState(t, r, Options{Now: c.Now, Prefix: "ended-" + string(end) + ":"})
			m := st.Tasks()
			if err := m.Create(t.Context(), working("a", time.Hour)); err != nil {
				t.Fatal(err)
			}
			c.Advance(time.Minute)
			ended, err := m.Update(t.Context(), "a", func(tk *tasks.Task) error { tk.Status = end; return nil })
			if err != nil || ended.Status != end || !ended.EndedAt.Equal(c.Now()) {
				t.Fatalf("ending: %+v %v", ended, err)
			}
			for _, s := range []tasks.Status{tasks.Working, tasks.InputRequired, tasks.Completed, tasks.Failed, tasks.Cancelled} {
				got, err := m.Update(t.Context(), "a", func(tk *tasks.Task) error { tk.Status = s; return nil })
				if err != nil || got.Status != end {
					t.Errorf("moving a %s task to %s: %v %v", end, s, got.Status, err)
				}
			}
			if got := mustGet(t, m, "a"); got.Status != end || !got.EndedAt.Equal(c.Now()) {
				t.Errorf("read back %+v", got)
			}
			// An ended task leaves the live set: no lease is renewed or swept.
			if n, _ := st.client.ZCard(t.Context(), st.k.live).Result(); n != 0 {
				t.Errorf("%d tasks in the live set", n)
			}
		})
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

// List: oldest first, one owner's tasks (and, for owner "", one scope's),
// in pages whose cursor resumes where the last ended; tasks that have
// expired are not listed (and leave the index).
func TestListPagesOneOwnerOrScopeOldestFirst(t *testing.T) {
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
		mk(fmt.Sprint("bob-", i), "bob", "")
		mk(fmt.Sprint("conn1-", i), "", "conn1")
		mk(fmt.Sprint("conn2-", i), "", "conn2")
	}
	mk("alice-in-conn1", "alice", "conn1") // an owner's task, whatever its scope
	list := func(m tasks.Store, owner, scope string, limit int) (pages [][]string) {
		cursor := ""
		for {
			ts, next, err := m.List(t.Context(), owner, scope, cursor, limit)
			if err != nil {
				t.Fatal(err)
			}
			var ids []string
			for _, tk := range ts {
				ids = append(ids, tk.ID)
			}
			pages = append(pages, ids)
			if next == "" {
				return pages
			}
			if len(pages) > 20 {
				t.Fatal("pagination does not end")
			}
			cursor = next
		}
	}
	if got := fmt.Sprint(list(m, "alice", "", 2)); got != "[[alice-0 alice-1] [alice-2 alice-3] [alice-4 alice-in-conn1]]" {
		t.Errorf("alice's pages: %s", got)
	}
	if got := fmt.Sprint(list(m, "", "conn1", 3)); got != "[[conn1-0 conn1-1 conn1-2] [conn1-3 conn1-4]]" {
		t.Errorf("conn1's pages: %s", got)
	}
	if got := fmt.Sprint(list(m, "", "conn2", 5)); got != "[[conn2-0 conn2-1 conn2-2 conn2-3 conn2-4]]" {
		t.Errorf("an exact page has no next cursor: %s", got)
	}
	if got := fmt.Sprint(list(m, "carol", "", 0)); got != "[[]]" {
		t.Errorf("a stranger's list: %s", got)
	}
	if got := fmt.Sprint(list(m, "", "", 0)); got != "[[]]" {
		t.Errorf("no owner, no scope: %s", got)
	}
	if _, _, err := m.List(t.Context(), "alice", "", "not a cursor!", 2); err == nil {
		t.Error("an invalid cursor was accepted")
	}
	// Another instance lists the same.
	other := newState(t, r, Options{})
	if got := fmt.Sprint(list(other.Tasks(), "alice", "", 4)); got != "[[alice-0 alice-1 alice-2 alice-3] [alice-4 alice-in-conn1]]" {
		t.Errorf("alice's pages through another State: %s", got)
	}
	// A task that ends mid-listing does not upset the cursor.
	_, next, _ := m.List(t.Context(), "bob", "", "", 2)
	complete(t, m, "bob-2", 10)
	ts, _, err := m.List(t.Context(), "bob", "", next, 2)
	if err != nil || len(ts) != 2 || ts[0].ID != "bob-2" || ts[0].Status != tasks.Completed || ts[1].ID != "bob-3" {
		t.Errorf("the second page: %v %v", ts, err)
	}
	// Expired tasks are skipped, the page filled from what follows, and
	// their ids leave the index.
	for i := range 3 {
		st.client.Del(t.Context(), st.k.task(fmt.Sprint("conn2-", i))) // as Redis expiry does
	}
	if got := fmt.Sprint(list(m, "", "conn2", 1)); got != "[[conn2-3] [conn2-4]]" {
		t.Errorf("conn2's pages once three expired: %s", got)
	}
	if n, _ := st.client.ZCard(t.Context(), st.k.index("", "conn2")).Result(); n != 2 {
		t.Errorf("the index holds %d ids, want the 2 left", n)
	}
	// Many expired ids: a page ends after a bounded number of round trips,
	// with a cursor to go on from.
	for i := range 100 {
		mk(fmt.Sprint("gone-", i), "dave", "")
		st.client.Del(t.Context(), st.k.task(fmt.Sprint("gone-", i)))
	}
	mk("dave-last", "dave", "")
	if got := list(m, "dave", "", 2); fmt.Sprint(got[len(got)-1]) != "[dave-last]" || len(slices.Concat(got...)) != 1 {
		t.Errorf("dave's pages: %v", got)
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

// Subscribe delivers every change of a task, in the order the changes
// were made, each a copy of the task as it was after the change.
func TestSubscribeDeliversEveryChangeOfATaskInOrder(t *testing.T) {
	t.Parallel()
	st := newState(t, startRedis(t), Options{})
	waitListening(t, st)
	m := st.Tasks()
	var rec recorder
	stop, err := m.Subscribe(t.Context(), func(ev tasks.Event) {
		rec.add(fmt.Sprintf("%s:%s:%s", ev.Task.ID, ev.Task.Status, ev.Task.StatusMessage))
		ev.Task.StatusMessage = "scribbled" // the event's copy is the subscriber's
	})
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	ctx := context.Background()
	m.Create(ctx, working("a", time.Hour))
	m.Create(ctx, working("b", time.Hour))
	for i := range 20 {
		m.Update(ctx, "a", func(tk *tasks.Task) error { tk.StatusMessage = fmt.Sprint(i); return nil })
	}
	m.Update(ctx, "a", func(tk *tasks.Task) error { tk.Status = tasks.InputRequired; return nil })
	m.Update(ctx, "b", func(tk *tasks.Task) error { tk.Status = tasks.Cancelled; return nil })
	m.Update(ctx, "a", func(tk *tasks.Task) error { tk.Status = tasks.Completed; return nil })
	m.Update(ctx, "a", func(tk *tasks.Task) error { return errors.New("no change") }) // nothing written, nothing told
	want := []string{"a:working:", "b:working:"}
	for i := range 20 {
		want = append(want, fmt.Sprintf("a:working:%d", i))
	}
	want = append(want, "a:input_required:19", "b:cancelled:", "a:completed:19")
	eventually(t, 5*time.Second, "every event arrives", func() bool { return rec.len() >= len(want) })
	// Nothing more comes: the refused update told nothing (a marker
	// published after it arrives first).
	m.Create(ctx, working("marker", time.Hour))
	eventually(t, 5*time.Second, "the marker arrives", func() bool { return rec.len() > len(want) })
	got := rec.get()
	if fmt.Sprint(got[:len(want)]) != fmt.Sprint(want) || got[len(want)] != "marker:working:" {
		t.Errorf("events\n got %v\nwant %v and the marker", got, want)
	}
	if got := mustGet(t, m, "a"); got.StatusMessage != "19" {
		t.Errorf("a subscriber's scribble reached the store: %q", got.StatusMessage)
	}
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
