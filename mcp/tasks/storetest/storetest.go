// Package storetest checks that a tasks.Store keeps the contract the
// server relies on: durable creation, copies in and out, an atomic
// Update whose error writes nothing, ended tasks that stay ended, listing
// by owner or scope oldest first with cursors, and every change told to a
// subscriber in order. tasks.Memory and the Redis store run it; a store
// of your own can too:
//
//	func TestMyStore(t *testing.T) {
//		storetest.Run(t, func(t *testing.T, now func() time.Time) tasks.Store { return openMine(t, now) })
//	}
//
// What a store adds beyond the contract (its bounds, its expiry, what it
// counts) its own tests check.
package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentwire/agentwire/mcp/tasks"
)

// Open returns an empty store for one test, whose clock is now (the
// timestamps it sets, such as EndedAt).
type Open func(t *testing.T, now func() time.Time) tasks.Store

// Run runs the contract's tests against the stores open makes, each as a
// subtest of t with a store of its own.
func Run(t *testing.T, open Open) {
	t.Run("ACreatedTaskIsFoundTheMomentCreateReturns", func(t *testing.T) { createdIsFound(t, open) })
	t.Run("UpdateIsAtomicAndAnErrorWritesNothing", func(t *testing.T) { updateIsAtomic(t, open) })
	t.Run("AnEndedTaskStaysEnded", func(t *testing.T) { endedStaysEnded(t, open) })
	t.Run("ListPagesOneOwnerOrScopeOldestFirst", func(t *testing.T) { listPages(t, open) })
	t.Run("SubscribeDeliversEveryChangeOfATaskInOrder", func(t *testing.T) { subscribeInOrder(t, open) })
}

// Clock is an injected Now: time moves only when the test says.
type Clock struct {
	mu  sync.Mutex
	now time.Time
}

// NewClock returns a clock at a fixed instant.
func NewClock() *Clock { return &Clock{now: time.Date(2026, 7, 28, 12, 0, 0, 0, time.UTC)} }

// Now is the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock on by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// Working is a running task with a TTL.
func Working(id string, ttl time.Duration) *tasks.Task {
	return &tasks.Task{ID: id, Tool: "t", Status: tasks.Working, TTL: ttl}
}

// Result is a tool result of about n bytes.
func Result(n int) json.RawMessage {
	if n < len(`{"x":""}`) {
		return json.RawMessage(`{}`)
	}
	return json.RawMessage(`{"x":"` + strings.Repeat("a", n-len(`{"x":""}`)) + `"}`)
}

// Complete ends a task with a result of about resultBytes.
func Complete(t testing.TB, m tasks.Store, id string, resultBytes int) {
	t.Helper()
	if _, err := m.Update(context.Background(), id, func(tk *tasks.Task) error {
		tk.Status = tasks.Completed
		tk.Result = Result(resultBytes)
		return nil
	}); err != nil {
		t.Fatalf("completing %s: %v", id, err)
	}
}

// MustGet reads a task, failing t when it cannot.
func MustGet(t testing.TB, m tasks.Store, id string) *tasks.Task {
	t.Helper()
	tk, err := m.Get(context.Background(), id)
	if err != nil {
		t.Fatalf("Get %s: %v", id, err)
	}
	return tk
}

// NotFound checks that the store has no task id.
func NotFound(t testing.TB, m tasks.Store, id string) {
	t.Helper()
	if _, err := m.Get(context.Background(), id); !errors.Is(err, tasks.ErrNotFound) {
		t.Fatalf("Get %s: %v, want ErrNotFound", id, err)
	}
}

// Eventually polls cond until it holds, failing t after within.
func Eventually(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %v: %s", within, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Durable creation: Create returns only once Get finds the task; the
// store keeps its own copy, and hands out copies.
func createdIsFound(t *testing.T, open Open) {
	m := open(t, time.Now)
	in := &tasks.Task{ID: "a", Owner: "o", Scope: "s", Design: "2026-07-28", Tool: "job", Status: tasks.Working,
		TTL: time.Minute, PollInterval: time.Second, InputRequests: map[string]json.RawMessage{"k": json.RawMessage(`{"method":"m"}`)}}
	if err := m.Create(t.Context(), in); err != nil {
		t.Fatal(err)
	}
	got := MustGet(t, m, "a")
	if got.Owner != "o" || got.Scope != "s" || got.Design != "2026-07-28" || got.Tool != "job" || got.Status != tasks.Working ||
		got.TTL != time.Minute || got.PollInterval != time.Second || string(got.InputRequests["k"]) != `{"method":"m"}` {
		t.Errorf("read back %+v", got)
	}
	// Neither the caller's task nor a copy handed out is the store's.
	in.Status = tasks.Failed
	in.InputRequests["k"][2] = 'X'
	got.InputRequests["k"] = json.RawMessage(`{}`)
	got.Status = tasks.Cancelled
	again := MustGet(t, m, "a")
	if again.Status != tasks.Working || string(again.InputRequests["k"]) != `{"method":"m"}` {
		t.Errorf("the store's record changed through a copy: %+v", again)
	}
	if err := m.Create(t.Context(), Working("a", 0)); !errors.Is(err, tasks.ErrExists) {
		t.Errorf("a second Create of the id: %v, want ErrExists", err)
	}
	if again := MustGet(t, m, "a"); again.Tool != "job" {
		t.Errorf("a refused Create overwrote the task: %+v", again)
	}
	NotFound(t, m, "nope")
	// A task created ended (rare, but a Store allows it) is given its end.
	done := Working("done", time.Hour)
	done.Status = tasks.Completed
	if err := m.Create(t.Context(), done); err != nil {
		t.Fatal(err)
	}
	if got := MustGet(t, m, "done"); got.EndedAt.IsZero() || got.ExpiresAt().IsZero() {
		t.Errorf("an ended task created without EndedAt: %+v", got)
	}
}

// Update is an atomic read-modify-write: f's error writes nothing, the id
// is not f's to change, and concurrent updates are not lost.
func updateIsAtomic(t *testing.T, open Open) {
	m := open(t, time.Now)
	if err := m.Create(t.Context(), Working("a", time.Hour)); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("boom")
	if _, err := m.Update(t.Context(), "a", func(tk *tasks.Task) error {
		tk.StatusMessage = "half-done"
		return boom
	}); !errors.Is(err, boom) {
		t.Fatalf("Update: %v, want f's error", err)
	}
	if got := MustGet(t, m, "a"); got.StatusMessage != "" {
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
	NotFound(t, m, "b")
	if _, err := m.Update(t.Context(), "nope", func(*tasks.Task) error { return nil }); !errors.Is(err, tasks.ErrNotFound) {
		t.Errorf("Update of an unknown id: %v", err)
	}
	var wg sync.WaitGroup
	for range 50 {
		wg.Go(func() {
			if _, err := m.Update(context.Background(), "a", func(tk *tasks.Task) error {
				tk.Keys++
				return nil
			}); err != nil {
				t.Errorf("a concurrent increment: %v", err)
			}
		})
	}
	wg.Wait()
	if got := MustGet(t, m, "a"); got.Keys != 50 {
		t.Errorf("50 concurrent increments made %d", got.Keys)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := m.Update(ctx, "a", func(*tasks.Task) error { return nil }); !errors.Is(err, context.Canceled) {
		t.Errorf("Update with a done context: %v", err)
	}
}

// An ended task stays ended: no update moves it out of its terminal
// status (its EndedAt is when it ended).
func endedStaysEnded(t *testing.T, open Open) {
	for _, end := range []tasks.Status{tasks.Completed, tasks.Failed, tasks.Cancelled} {
		t.Run(string(end), func(t *testing.T) {
			c := NewClock()
			m := open(t, c.Now)
			if err := m.Create(t.Context(), Working("a", time.Hour)); err != nil {
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
			if got := MustGet(t, m, "a"); got.Status != end || !got.EndedAt.Equal(c.Now()) {
				t.Errorf("read back %+v", got)
			}
		})
	}
}

// List pages one owner's tasks (whatever their scope), or for no owner
// one scope's, oldest first; a cursor it did not make is ErrInvalidCursor;
// a task that ends mid-listing does not upset the cursor.
func listPages(t *testing.T, open Open) {
	m := open(t, time.Now)
	mk := func(id, owner, scope string) {
		tk := Working(id, time.Hour)
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
	list := func(owner, scope string, limit int) string { return fmt.Sprint(Pages(t, m, owner, scope, limit)) }
	if got := list("alice", "", 2); got != "[[alice-0 alice-1] [alice-2 alice-3] [alice-4 alice-in-conn1]]" {
		t.Errorf("alice's pages: %s", got)
	}
	if got := list("", "conn1", 3); got != "[[conn1-0 conn1-1 conn1-2] [conn1-3 conn1-4]]" {
		t.Errorf("conn1's pages: %s", got)
	}
	if got := list("", "conn2", 5); got != "[[conn2-0 conn2-1 conn2-2 conn2-3 conn2-4]]" {
		t.Errorf("an exact page has no next cursor: %s", got)
	}
	if got := list("carol", "", 0); got != "[[]]" {
		t.Errorf("a stranger's list: %s", got)
	}
	if got := list("", "", 0); got != "[[]]" {
		t.Errorf("no owner, no scope: %s", got)
	}
	if _, _, err := m.List(t.Context(), "alice", "", "not a cursor!", 2); !errors.Is(err, tasks.ErrInvalidCursor) {
		t.Errorf("an invalid cursor: %v, want ErrInvalidCursor", err)
	}
	_, next, _ := m.List(t.Context(), "bob", "", "", 2)
	Complete(t, m, "bob-2", 10)
	ts, _, err := m.List(t.Context(), "bob", "", next, 2)
	if err != nil || len(ts) != 2 || ts[0].ID != "bob-2" || ts[0].Status != tasks.Completed || ts[1].ID != "bob-3" {
		t.Errorf("the second page: %v %v", ts, err)
	}
}

// Pages lists all of owner's (or scope's) tasks, limit a page, and
// returns the ids page by page.
func Pages(t testing.TB, m tasks.Store, owner, scope string, limit int) [][]string {
	t.Helper()
	var pages [][]string
	cursor := ""
	for {
		ts, next, err := m.List(context.Background(), owner, scope, cursor, limit)
		if err != nil {
			t.Fatal(err)
		}
		ids := []string{}
		for _, tk := range ts {
			ids = append(ids, tk.ID)
		}
		pages = append(pages, ids)
		if next == "" {
			return pages
		}
		if len(pages) > 200 {
			t.Fatal("pagination does not end")
		}
		cursor = next
	}
}

// Subscribe delivers every change of a task, in the order the changes
// were made, each a copy of the task as it was after the change; a
// refused update tells nothing.
func subscribeInOrder(t *testing.T, open Open) {
	m := open(t, time.Now)
	var mu sync.Mutex
	var seen []string
	count := func() int { mu.Lock(); defer mu.Unlock(); return len(seen) }
	stop, err := m.Subscribe(t.Context(), func(ev tasks.Event) {
		mu.Lock()
		seen = append(seen, fmt.Sprintf("%s:%s:%s", ev.Task.ID, ev.Task.Status, ev.Task.StatusMessage))
		mu.Unlock()
		ev.Task.StatusMessage = "scribbled" // the event's copy is the subscriber's
	})
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	ctx := context.Background()
	m.Create(ctx, Working("a", time.Hour))
	m.Create(ctx, Working("b", time.Hour))
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
	Eventually(t, 5*time.Second, "every event arrives", func() bool { return count() >= len(want) })
	// Nothing more comes from the refused update: a marker made after it
	// arrives next.
	m.Create(ctx, Working("marker", time.Hour))
	Eventually(t, 5*time.Second, "the marker arrives", func() bool { return count() > len(want) })
	mu.Lock()
	got := append([]string(nil), seen...)
	mu.Unlock()
	if fmt.Sprint(got[:len(want)]) != fmt.Sprint(want) || got[len(want)] != "marker:working:" {
		t.Errorf("events\n got %v\nwant %v and the marker", got, want)
	}
	if got := MustGet(t, m, "a"); got.StatusMessage != "19" {
		t.Errorf("a subscriber's scribble reached the store: %q", got.StatusMessage)
	}
}
