package redisstate

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/agentwire/agentwire/mcp/tasks"
)

// The record Redis keeps names every field of tasks.Task: a field added
// there and not here would be lost silently.
func TestTheRecordCarriesEveryFieldOfATask(t *testing.T) {
	tt, rt := reflect.TypeFor[tasks.Task](), reflect.TypeFor[record]()
	if tt.NumField() != rt.NumField() {
		t.Fatalf("tasks.Task has %d fields, the record %d", tt.NumField(), rt.NumField())
	}
	for i := range tt.NumField() {
		if tt.Field(i).Name != rt.Field(i).Name || tt.Field(i).Type != rt.Field(i).Type {
			t.Errorf("field %d: %s %s, the record's %s %s", i, tt.Field(i).Name, tt.Field(i).Type, rt.Field(i).Name, rt.Field(i).Type)
		}
	}
	full := &tasks.Task{ID: "i", Owner: "o", Scope: "s", Design: "d", Tool: "t", Status: tasks.Failed, StatusMessage: "m",
		CreatedAt: time.Unix(1, 0).UTC(), LastUpdatedAt: time.Unix(2, 0).UTC(), TTL: 3, PollInterval: 4,
		Result: json.RawMessage(`{"r":1}`), Error: json.RawMessage(`{"e":1}`),
		InputRequests: map[string]json.RawMessage{"a": json.RawMessage(`{}`)}, Responses: map[string]json.RawMessage{"b": json.RawMessage(`{}`)},
		Refusals: map[string]json.RawMessage{"c": json.RawMessage(`{}`)}, Keys: 5, CancelRequested: true, EndedAt: time.Unix(6, 0).UTC()}
	b, _ := encodeTask(full)
	back, err := decodeTask("i", b)
	if err != nil || !reflect.DeepEqual(back, full) {
		t.Errorf("round trip:\n got %+v\nwant %+v", back, full)
	}
	b, _ = encodeTask(&tasks.Task{ID: "e"})
	if back, _ := decodeTask("e", b); back.Result != nil || back.Error != nil || back.InputRequests != nil {
		t.Errorf("an empty task read back %+v (from %s)", back, b)
	}
}

// Two instances on one Redis: a task created through A is read, updated
// and listed through B; B's subscriber hears A's changes, and a cancel
// made through B reaches A's subscriber (the instance running the task).
func TestTwoStatesShareTasks(t *testing.T) {
	t.Parallel()
	r := startRedis(t)
	a, b := newState(t, r, Options{Lease: 600 * time.Millisecond}), newState(t, r, Options{Lease: 600 * time.Millisecond})
	waitListening(t, a)
	waitListening(t, b)
	heardA, heardB := make(chan *tasks.Task, 16), make(chan *tasks.Task, 16)
	stopA, _ := a.Tasks().Subscribe(t.Context(), func(ev tasks.Event) { heardA <- ev.Task })
	defer stopA()
	stopB, _ := b.Tasks().Subscribe(t.Context(), func(ev tasks.Event) { heardB <- ev.Task })
	defer stopB()
	next := func(ch chan *tasks.Task, who string) *tasks.Task {
		t.Helper()
		select {
		case tk := <-ch:
			return tk
		case <-time.After(5 * time.Second):
			t.Fatalf("%s heard nothing", who)
			return nil
		}
	}
	tk := working("t1", time.Hour)
	tk.Owner = "alice"
	if err := a.Tasks().Create(t.Context(), tk); err != nil {
		t.Fatal(err)
	}
	if got := mustGet(t, b.Tasks(), "t1"); got.Owner != "alice" || got.Status != tasks.Working {
		t.Fatalf("B reads %+v", got)
	}
	if ev := next(heardB, "B"); ev.ID != "t1" || ev.Status != tasks.Working {
		t.Fatalf("B heard %+v", ev)
	}
	next(heardA, "A")
	if _, err := a.Tasks().Update(t.Context(), "t1", func(tk *tasks.Task) error {
		tk.Status = tasks.InputRequired
		tk.InputRequests = map[string]json.RawMessage{"q": json.RawMessage(`{"method":"elicitation/create"}`)}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if ev := next(heardB, "B"); ev.Status != tasks.InputRequired || len(ev.InputRequests) != 1 {
		t.Fatalf("B heard %+v", ev)
	}
	next(heardA, "A")
	ts, _, err := b.Tasks().List(t.Context(), "alice", "", "", 10)
	if err != nil || len(ts) != 1 || ts[0].ID != "t1" || ts[0].Status != tasks.InputRequired {
		t.Fatalf("B lists %v %v", ts, err)
	}
	// An answer, then a cancel, through B: A hears both, in order.
	if _, err := b.Tasks().Update(t.Context(), "t1", func(tk *tasks.Task) error {
		tk.Responses = map[string]json.RawMessage{"q": json.RawMessage(`{"action":"accept"}`)}
		tk.InputRequests, tk.Status = nil, tasks.Working
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Tasks().Update(t.Context(), "t1", func(tk *tasks.Task) error {
		tk.Status, tk.CancelRequested = tasks.Cancelled, true
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if ev := next(heardA, "A"); ev.Status != tasks.Working || string(ev.Responses["q"]) != `{"action":"accept"}` {
		t.Fatalf("A heard %+v", ev)
	}
	if ev := next(heardA, "A"); ev.Status != tasks.Cancelled || !ev.CancelRequested {
		t.Fatalf("A heard %+v", ev)
	}
	// A created it, B ended it: A stops renewing it.
	eventually(t, 5*time.Second, "A forgets the ended task", func() bool { return !a.isLocal("t1") })
}

// An instance killed mid-task (its State closed without ending its
// tasks: nobody renews their leases) leaves them failed by another
// instance's sweeper within about Lease + Lease/3: never working forever,
// never vanished. Tasks that ended, and tasks of instances that live, are
// left alone.
func TestTheTasksOfALostInstanceAreFailedWithinTheLease(t *testing.T) {
	t.Parallel()
	r := startRedis(t)
	const lease = 600 * time.Millisecond
	killed := newState(t, r, Options{Lease: lease})
	alive := newState(t, r, Options{Lease: lease})
	for i := range 3 {
		if err := killed.Tasks().Create(t.Context(), working(fmt.Sprint("orphan-", i), time.Hour)); err != nil {
			t.Fatal(err)
		}
	}
	if err := killed.Tasks().Create(t.Context(), working("finished", time.Hour)); err != nil {
		t.Fatal(err)
	}
	complete(t, killed.Tasks(), "finished", 10)
	if err := alive.Tasks().Create(t.Context(), working("kept", time.Hour)); err != nil {
		t.Fatal(err)
	}
	killed.Close()
	lost := time.Now()
	for i := range 3 {
		id := fmt.Sprint("orphan-", i)
		eventually(t, lease+lease/3+3*time.Second, id+" is failed", func() bool {
			return mustGet(t, alive.Tasks(), id).Status == tasks.Failed
		})
	}
	took := time.Since(lost)
	if took > lease+lease/3+2*time.Second {
		t.Errorf("the orphans were failed %v after their instance was lost (lease %v)", took, lease)
	}
	got := mustGet(t, alive.Tasks(), "orphan-0")
	var je struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	}
	json.Unmarshal(got.Error, &je)
	if got.StatusMessage != LostMessage || je.Code != -32603 || je.Message != "Internal error: "+LostMessage || got.EndedAt.IsZero() || got.ExpiresAt().IsZero() {
		t.Errorf("a lost task: %+v (error %s)", got, got.Error)
	}
	if s := alive.Stats(); s.Swept != 3 {
		t.Errorf("swept %d, want 3", s.Swept)
	}
	if got := mustGet(t, alive.Tasks(), "finished"); got.Status != tasks.Completed {
		t.Errorf("an ended task was swept: %+v", got)
	}
	// The live instance's own task outlives several leases.
	eventually(t, 5*time.Second, "kept's lease is renewed a few times", func() bool { return alive.Stats().LeasesRenewed >= 4 })
	if got := mustGet(t, alive.Tasks(), "kept"); got.Status != tasks.Working {
		t.Errorf("a task whose instance lives: %+v", got)
	}
	if n, _ := alive.client.ZCard(t.Context(), alive.k.live).Result(); n != 1 {
		t.Errorf("%d tasks in the live set, want 1", n)
	}
}

// A cancellation whose Pub/Sub event was lost still reaches the instance
// running the task: its lease renewal reads the record and tells the
// local subscribers, within Lease/3.
func TestACancelWhoseEventWasLostReachesTheRunningInstanceAtItsRenewal(t *testing.T) {
	t.Parallel()
	r := startRedis(t)
	const lease = 600 * time.Millisecond
	a := newState(t, r, Options{Lease: lease})
	heard := make(chan *tasks.Task, 16)
	stop, _ := a.Tasks().Subscribe(t.Context(), func(ev tasks.Event) { heard <- ev.Task })
	defer stop()
	if err := a.Tasks().Create(t.Context(), working("t", time.Hour)); err != nil {
		t.Fatal(err)
	}
	// Cancelled behind the State's back: the record changes, no event.
	tk := mustGet(t, a.Tasks(), "t")
	tk.Status, tk.CancelRequested, tk.EndedAt = tasks.Cancelled, true, time.Now()
	b, _ := encodeTask(tk)
	if err := a.client.Set(t.Context(), a.k.task("t"), b, time.Hour).Err(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	deadline := time.After(lease/3 + 3*time.Second)
	for {
		select {
		case ev := <-heard:
			if ev.Status != tasks.Cancelled {
				continue // the create's event
			}
			if took := time.Since(start); took > lease/3+2*time.Second {
				t.Errorf("the cancel was told %v later (renewal every %v)", took, lease/3)
			}
			eventually(t, time.Second, "the ended task is forgotten", func() bool { return !a.isLocal("t") })
			return
		case <-deadline:
			t.Fatal("the lost cancel never reached the running instance")
		}
	}
}

// Redis down: every method fails within about OpTimeout (no hang, no
// panic), Subscribe still registers; Redis back: the Pub/Sub connection
// is subscribed again (a new event is delivered), and the store and the
// bus work again.
func TestRedisDownFailsFastAndRecovers(t *testing.T) {
	t.Parallel()
	r := startRedis(t)
	const opTimeout = 300 * time.Millisecond
	a := newState(t, r, Options{OpTimeout: opTimeout, Lease: 3 * time.Second})
	b := newState(t, r, Options{OpTimeout: opTimeout, Lease: 3 * time.Second})
	waitListening(t, a)
	waitListening(t, b)
	if err := a.Tasks().Create(t.Context(), working("before", time.Hour)); err != nil {
		t.Fatal(err)
	}
	r.Stop()
	bound := func(what string, f func() error) {
		t.Helper()
		start := time.Now()
		err := f()
		if took := time.Since(start); took > opTimeout+time.Second {
			t.Errorf("%s took %v with Redis down (OpTimeout %v)", what, took, opTimeout)
		}
		if err == nil {
			t.Errorf("%s succeeded with Redis down", what)
		}
	}
	bound("Create", func() error { return a.Tasks().Create(t.Context(), working("during", time.Hour)) })
	bound("Get", func() error { _, err := a.Tasks().Get(t.Context(), "before"); return err })
	bound("Update", func() error {
		_, err := a.Tasks().Update(t.Context(), "before", func(*tasks.Task) error { return nil })
		return err
	})
	bound("List", func() error { _, _, err := a.Tasks().List(t.Context(), "", "", "", 10); return err })
	bound("Bus.Publish", func() error { return a.Bus().Publish(t.Context(), []byte("x")) })
	bound("RotateKeys", func() error { return a.RotateKeys(t.Context()) })
	bound("StateKeys without a cache", func() error { _, _, err := a.Keys(nil).StateKeys(t.Context()); return err })
	if _, err := a.Tasks().Get(t.Context(), "before"); errors.Is(err, tasks.ErrNotFound) {
		t.Error("Redis down reads as not found")
	}
	eventually(t, 5*time.Second, "the loss is noticed", func() bool { return !b.Stats().Listening })
	heard := make(chan *tasks.Task, 16)
	stop, err := b.Tasks().Subscribe(t.Context(), func(ev tasks.Event) { heard <- ev.Task })
	if err != nil {
		t.Fatalf("Subscribe with Redis down: %v", err)
	}
	defer stop()
	if s := a.Stats(); s.RedisErrors == 0 {
		t.Errorf("no Redis error counted: %+v", s)
	}

	r.Start()
	waitListening(t, a)
	waitListening(t, b)
	if s := b.Stats(); s.Resubscribed == 0 {
		t.Errorf("the resubscription is not counted: %+v", s)
	}
	if err := a.Tasks().Create(t.Context(), working("after", time.Hour)); err != nil {
		t.Fatalf("Create once Redis is back: %v", err)
	}
	select {
	case tk := <-heard:
		if tk.ID != "after" {
			t.Errorf("heard %s", tk.ID)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no event once Redis is back")
	}
	if got := mustGet(t, b.Tasks(), "after"); got.Status != tasks.Working {
		t.Errorf("after the restart: %+v", got)
	}
	got := make(chan string, 4)
	bstop, _ := b.Bus().Subscribe(t.Context(), func(m []byte) { got <- string(m) })
	defer bstop()
	if err := a.Bus().Publish(t.Context(), []byte("back")); err != nil {
		t.Fatalf("Bus.Publish once Redis is back: %v", err)
	}
	select {
	case m := <-got:
		if m != "back" {
			t.Errorf("the bus carried %q", m)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the bus carries nothing once Redis is back")
	}
}

// A Redis that is down when the State is made: New does not wait for
// it, methods fail, and once it answers the State listens and works.
func TestAStateMadeWhileRedisIsDownStartsWorkingWhenItAnswers(t *testing.T) {
	t.Parallel()
	r := startRedis(t)
	r.Stop()
	start := time.Now()
	st := newState(t, r, Options{OpTimeout: 300 * time.Millisecond})
	if took := time.Since(start); took > 100*time.Millisecond {
		t.Errorf("New took %v with Redis down", took)
	}
	if err := st.Tasks().Create(t.Context(), working("early", time.Hour)); err == nil {
		t.Error("Create succeeded with Redis down")
	}
	r.Start()
	waitListening(t, st)
	if err := st.Tasks().Create(t.Context(), working("t", time.Hour)); err != nil {
		t.Fatal(err)
	}
	mustGet(t, st.Tasks(), "t")
}

// A hung Redis (it takes connections and answers nothing) costs each
// method at most about OpTimeout, with a client made with
// ContextTimeoutEnabled; once it answers again, so does the store.
func TestAHungRedisIsBoundedByOpTimeout(t *testing.T) {
	t.Parallel()
	r := startRedis(t)
	const opTimeout = 300 * time.Millisecond
	a := newState(t, r, Options{OpTimeout: opTimeout})
	waitListening(t, a)
	if err := a.Tasks().Create(t.Context(), working("t", time.Hour)); err != nil {
		t.Fatal(err)
	}
	r.Pause()
	resumed := false
	defer func() {
		if !resumed {
			r.Resume()
		}
	}()
	for name, f := range map[string]func() error{
		"Get":    func() error { _, err := a.Tasks().Get(t.Context(), "t"); return err },
		"Create": func() error { return a.Tasks().Create(t.Context(), working("u", time.Hour)) },
		"Update": func() error {
			_, err := a.Tasks().Update(t.Context(), "t", func(*tasks.Task) error { return nil })
			return err
		},
		"Bus.Publish": func() error { return a.Bus().Publish(t.Context(), []byte("x")) },
	} {
		start := time.Now()
		err := f()
		if took := time.Since(start); err == nil || took > opTimeout+time.Second {
			t.Errorf("%s with Redis hung: %v after %v (OpTimeout %v)", name, err, took, opTimeout)
		}
	}
	r.Resume()
	resumed = true
	eventually(t, 5*time.Second, "the store answers again", func() bool {
		_, err := a.Tasks().Get(t.Context(), "t")
		return err == nil
	})
}

// A Redis out of memory (maxmemory, noeviction) refuses writes: the
// store says tasks.ErrFull, as tasks.Memory does when full, and the
// server refuses or runs in its request accordingly.
func TestARedisOutOfMemoryIsErrFull(t *testing.T) {
	t.Parallel()
	r := startRedis(t)
	st := newState(t, r, Options{})
	if err := st.Tasks().Create(t.Context(), working("first", time.Hour)); err != nil {
		t.Fatal(err)
	}
	c := r.client(t)
	if err := c.ConfigSet(t.Context(), "maxmemory-policy", "noeviction").Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.ConfigSet(t.Context(), "maxmemory", "1").Err(); err != nil { // below what is used: every write refused
		t.Fatal(err)
	}
	if err := st.Tasks().Create(t.Context(), working("second", time.Hour)); !errors.Is(err, tasks.ErrFull) {
		t.Errorf("Create with Redis out of memory: %v, want ErrFull", err)
	}
	if _, err := st.Tasks().Update(t.Context(), "first", func(tk *tasks.Task) error { tk.Keys++; return nil }); !errors.Is(err, tasks.ErrFull) {
		t.Errorf("Update with Redis out of memory: %v, want ErrFull", err)
	}
	if _, err := st.Tasks().Get(t.Context(), "first"); err != nil {
		t.Errorf("Get with Redis out of memory: %v (reads still work)", err)
	}
}

// The bus fans out: what one instance publishes reaches every
// subscriber of every instance (its own included), each message once.
func TestTheBusFansOutBetweenStates(t *testing.T) {
	t.Parallel()
	r := startRedis(t)
	a, b := newState(t, r, Options{}), newState(t, r, Options{})
	waitListening(t, a)
	waitListening(t, b)
	var ra, rb1, rb2 recorder
	for _, sub := range []struct {
		s   *State
		rec *recorder
	}{{a, &ra}, {b, &rb1}, {b, &rb2}} {
		stop, err := sub.s.Bus().Subscribe(t.Context(), func(m []byte) { sub.rec.add(string(m)) })
		if err != nil {
			t.Fatal(err)
		}
		defer stop()
	}
	for i := range 5 {
		if err := a.Bus().Publish(t.Context(), fmt.Appendf(nil, "a%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Bus().Publish(t.Context(), []byte("b0")); err != nil {
		t.Fatal(err)
	}
	want := "[a0 a1 a2 a3 a4 b0]"
	for _, rec := range []*recorder{&ra, &rb1, &rb2} {
		eventually(t, 5*time.Second, "every subscriber hears all six", func() bool { return rec.len() >= 6 })
		if got := fmt.Sprint(rec.get()); got != want {
			t.Errorf("a subscriber heard %s, want %s", got, want)
		}
	}
	if s := a.Stats(); s.BusPublished != 5 || s.BusReceived != 6 {
		t.Errorf("a's stats %+v", s)
	}
	// Bus messages are not task events, and task events not bus messages.
	if s := b.Stats(); s.EventsReceived != 0 {
		t.Errorf("b's stats %+v", s)
	}
}

// The key ring: every instance reads the same keys (the first made once,
// whoever asks first); a rotation on one is seen by the other within its
// Refresh; the new key seals only after that, and a state sealed under
// the old key verifies with the previous key afterwards; with Redis
// down, the cache serves.
func TestTheKeyRingIsSharedAndRotates(t *testing.T) {
	t.Parallel()
	r := startRedis(t)
	const refresh = 200 * time.Millisecond
	a, b := newState(t, r, Options{}), newState(t, r, Options{})
	ra, rb := a.Keys(&KeyOptions{Refresh: refresh}), b.Keys(&KeyOptions{Refresh: refresh})
	// Racing for the first key: one wins, everyone reads it.
	var wg sync.WaitGroup
	firsts := make([][]byte, 8)
	for i := range firsts {
		ring := []any{ra, rb}[i%2].(interface {
			StateKeys(context.Context) ([]byte, [][]byte, error)
		})
		wg.Go(func() {
			cur, _, err := ring.StateKeys(context.Background())
			if err != nil {
				t.Error(err)
			}
			firsts[i] = cur
		})
	}
	wg.Wait()
	k1 := firsts[0]
	for _, k := range firsts {
		if !bytes.Equal(k, k1) || len(k) != 32 {
			t.Fatalf("the instances read different first keys: %x", firsts)
		}
	}
	if err := a.RotateKeys(t.Context()); err != nil {
		t.Fatal(err)
	}
	// Right after: the old key still seals (B may not have seen the new
	// one yet), the new one already verifies on A.
	cur, prev, err := ra.StateKeys(t.Context())
	if err != nil || !bytes.Equal(cur, k1) || len(prev) != 1 || bytes.Equal(prev[0], k1) {
		t.Fatalf("A right after the rotation: %x %x %v", cur, prev, err)
	}
	k2 := prev[0]
	eventually(t, refresh+time.Second, "B sees the new key", func() bool {
		_, prev, _ := rb.StateKeys(t.Context())
		return len(prev) == 1 && bytes.Equal(prev[0], k2)
	})
	// After the grace: the new key seals, the old one verifies.
	eventually(t, 2*refresh+2*time.Second, "the new key seals", func() bool {
		ca, pa, _ := ra.StateKeys(t.Context())
		cb, pb, _ := rb.StateKeys(t.Context())
		return bytes.Equal(ca, k2) && bytes.Equal(cb, k2) && len(pa) == 1 && bytes.Equal(pa[0], k1) && len(pb) == 1 && bytes.Equal(pb[0], k1)
	})
	// Redis down: the cache serves, stale or not (a failed refresh keeps it).
	r.Stop()
	eventually(t, 2*refresh+time.Second, "a refresh is tried and fails", func() bool {
		cur, _, err := rb.StateKeys(t.Context())
		if err != nil || !bytes.Equal(cur, k2) {
			t.Fatalf("with Redis down: %x %v", cur, err)
		}
		return b.Stats().RedisErrors > 0
	})
	if cur, _, err := rb.StateKeys(t.Context()); err != nil || !bytes.Equal(cur, k2) {
		t.Fatalf("a stale cache with Redis down: %x %v", cur, err)
	}
}

// RotateEvery: N instances rotating on a schedule rotate once per
// period, not N times.
func TestScheduledRotationHappensOncePerPeriodAcrossInstances(t *testing.T) {
	t.Parallel()
	r := startRedis(t)
	const every = 400 * time.Millisecond
	var states []*State
	for range 3 {
		s := newState(t, r, Options{})
		s.Keys(&KeyOptions{Refresh: 50 * time.Millisecond, RotateEvery: every})
		states = append(states, s)
	}
	if _, _, err := states[0].Keys(nil).StateKeys(t.Context()); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	rotations := func() (n int64) {
		for _, s := range states {
			n += s.Stats().Rotations
		}
		return n
	}
	eventually(t, 10*every, "two rotations", func() bool { return rotations() >= 2 })
	// Never one per instance per period: at most one per period.
	if n, most := rotations(), int64(time.Since(start)/every)+1; n > most {
		t.Errorf("%d rotations in %v at RotateEvery %v across 3 instances, want at most %d", n, time.Since(start), every, most)
	}
}

// 10,000 tasks created and ended through one State leave no goroutine
// behind and Redis holding what their TTL allows: once they expire, the
// records and their index entries are gone.
//
// Not parallel: it counts the process's goroutines, which other tests'
// States would move (the parallel tests wait while it runs).
func TestTenThousandEndedTasksLeaveNoGoroutinesAndRedisBoundedByTTL(t *testing.T) {
	r := startRedis(t)
	const n, ttl = 10_000, 2 * time.Second
	st := newState(t, r, Options{Lease: 600 * time.Millisecond})
	waitListening(t, st)
	before := runtime.NumGoroutine()
	var wg sync.WaitGroup
	const workers = 16
	for w := range workers {
		wg.Go(func() {
			for i := w; i < n; i += workers {
				id := fmt.Sprintf("task-%05d", i)
				tk := working(id, ttl)
				tk.Owner = "owner"
				if err := st.Tasks().Create(context.Background(), tk); err != nil {
					t.Errorf("task %d: %v", i, err)
					return
				}
				if _, err := st.Tasks().Update(context.Background(), id, func(tk *tasks.Task) error {
					tk.Status, tk.Result = tasks.Completed, result(256)
					return nil
				}); err != nil {
					t.Errorf("task %d: %v", i, err)
					return
				}
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	s := st.Stats()
	if s.Created != n || s.Updated != n {
		t.Errorf("stats %+v", s)
	}
	// The newest are still kept (their TTL runs from their end).
	mustGet(t, st.Tasks(), fmt.Sprintf("task-%05d", n-1))
	if size := dbsize(t, r); size > n+5 {
		t.Errorf("DBSIZE %d for %d tasks", size, n)
	}
	st.mu.Lock()
	local := len(st.local)
	st.mu.Unlock()
	if local != 0 {
		t.Errorf("%d ended tasks still renewed", local)
	}
	// The workers' goroutines end a moment after Wait returns: the count
	// is read until it settles.
	eventually(t, 5*time.Second, "the goroutines settle back", func() bool { return runtime.NumGoroutine() <= before+workers/2 })
	// Expired: the records go (Redis), the index and ended entries go
	// (the sweeper); what stays is the sequence counter.
	eventually(t, ttl+5*time.Second, "Redis forgets the expired tasks", func() bool { return dbsize(t, r) <= 2 })
	if n, _ := st.client.ZCard(t.Context(), st.k.index("owner", "")).Result(); n != 0 {
		t.Errorf("%d ids left in the owner index", n)
	}
	ts, next, err := st.Tasks().List(t.Context(), "owner", "", "", 100)
	if err != nil || len(ts) != 0 || next != "" {
		t.Errorf("listing after expiry: %d tasks, next %q, %v", len(ts), next, err)
	}
}
