package redisstate

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentwire/agentwire/mcp"
	"github.com/agentwire/agentwire/mcp/server"
	"github.com/agentwire/agentwire/mcp/streamable"
	"github.com/agentwire/agentwire/mcp/tasks"
	"github.com/redis/go-redis/v9"
)

// Regression tests, each named for the bug it pins and saying what the
// bug was.

// ----- helpers -----

// cutProxy forwards TCP to Redis and counts the bytes each way. Cut drops
// every connection and refuses new ones until Heal (a partition, or a
// failover: Redis keeps its data).
type cutProxy struct {
	t      *testing.T
	target string
	addr   string
	down   atomic.Int64 // bytes from Redis to the clients
	up     atomic.Int64 // bytes from the clients to Redis

	mu    sync.Mutex
	ln    net.Listener
	conns map[net.Conn]struct{}
	wg    sync.WaitGroup
}

func newCutProxy(t *testing.T, target string) *cutProxy {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cutProxy{t: t, target: target, addr: l.Addr().String(), conns: map[net.Conn]struct{}{}}
	p.serve(l)
	t.Cleanup(func() { p.Cut(); p.wg.Wait() })
	return p
}

func (p *cutProxy) Addr() string { return p.addr }

// Heal listens again on the same address.
func (p *cutProxy) Heal() {
	p.t.Helper()
	l, err := net.Listen("tcp", p.addr)
	if err != nil {
		p.t.Fatal(err)
	}
	p.serve(l)
}

func (p *cutProxy) serve(l net.Listener) {
	p.mu.Lock()
	p.ln = l
	p.mu.Unlock()
	p.wg.Go(func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			u, err := net.Dial("tcp", p.target)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			if p.ln != l { // cut meanwhile
				p.mu.Unlock()
				c.Close()
				u.Close()
				continue
			}
			p.conns[c], p.conns[u] = struct{}{}, struct{}{}
			p.mu.Unlock()
			p.wg.Go(func() { io.Copy(countingWriter{u, &p.up}, c); u.Close(); c.Close() })
			p.wg.Go(func() { io.Copy(countingWriter{c, &p.down}, u); u.Close(); c.Close() })
		}
	})
}

// Cut closes every connection and stops listening.
func (p *cutProxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		p.ln.Close()
		p.ln = nil
	}
	for c := range p.conns {
		c.Close()
	}
	p.conns = map[net.Conn]struct{}{}
}

type countingWriter struct {
	w io.Writer
	n *atomic.Int64
}

func (c countingWriter) Write(b []byte) (int, error) {
	n, err := c.w.Write(b)
	c.n.Add(int64(n))
	return n, err
}

// stateThrough is newState over a client that dials addr (a proxy).
func stateThrough(t *testing.T, addr string, o Options) *State {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true,
		DialTimeout: time.Second, ReadTimeout: time.Second, WriteTimeout: time.Second, MaxRetries: 1, DialerRetries: 1})
	t.Cleanup(func() { c.Close() })
	o.Logger = quiet
	if o.Prefix == "" {
		o.Prefix = "test:"
	}
	if o.OpTimeout == 0 {
		o.OpTimeout = 200 * time.Millisecond
	}
	s := New(c, &o)
	t.Cleanup(func() { s.Close() })
	return s
}

// redisNowMs is the Redis server's clock.
func redisNowMs(t *testing.T, c *redis.Client) int64 {
	t.Helper()
	tm, err := c.Time(context.Background()).Result()
	if err != nil {
		t.Fatal(err)
	}
	return tm.UnixMilli()
}

// ----- an outage longer than Lease -----

// The bug: Redis unreachable (a partition, a Sentinel failover) for
// longer than Lease, every instance alive: no one could renew, and once
// Redis was back the sweepers failed the other instances' running tasks
// ("the server instance running the task was lost") before those
// renewed. Now a sweeper takes lapsed leases only once Redis has
// answered it for a whole Lease, and an instance whose renewal failed
// tries again within renewRetry: the live instances' tasks survive. The
// tasks of an instance that really died during the outage are still
// failed after it.
func TestAnOutageLongerThanTheLeaseFailsTheTasksOfLiveInstances(t *testing.T) {
	r := startRedis(t)
	p := newCutProxy(t, r.Addr())
	// Above the second go-redis may take to dial again after an outage
	// (its pool fails fast until a probe, once a second, gets through).
	const lease = 1500 * time.Millisecond
	var live []*State
	for i := range 3 {
		st := stateThrough(t, p.Addr(), Options{Lease: lease})
		live = append(live, st)
		waitListening(t, st)
		for j := range 5 {
			if err := st.Tasks().Create(t.Context(), working(fmt.Sprintf("i%d-t%d", i, j), time.Hour)); err != nil {
				t.Fatal(err)
			}
		}
	}
	dead := stateThrough(t, p.Addr(), Options{Lease: lease})
	for j := range 2 {
		if err := dead.Tasks().Create(t.Context(), working(fmt.Sprintf("dead-t%d", j), time.Hour)); err != nil {
			t.Fatal(err)
		}
	}
	direct := r.client(t)
	p.Cut()
	dead.Close() // dies during the outage
	// Out until every lease has lapsed by Redis's clock, and every live
	// State has met the outage.
	eventually(t, 10*time.Second, "every lease lapses during the outage", func() bool {
		n, err := direct.ZCount(t.Context(), "test:live", "-inf", strconv.FormatInt(redisNowMs(t, direct), 10)).Result()
		return err == nil && n == 17
	})
	for _, st := range live {
		eventually(t, 5*time.Second, "the outage is met", func() bool { return st.Stats().RedisErrors > 0 && !st.healthy() })
	}
	p.Heal()
	get := func(id string) *tasks.Task {
		t.Helper()
		b, err := direct.Get(t.Context(), "test:task:"+id).Bytes()
		if err != nil {
			t.Fatalf("Get %s: %v", id, err)
		}
		tk, err := decodeTask(id, b)
		if err != nil {
			t.Fatal(err)
		}
		return tk
	}
	for j := range 2 {
		id := fmt.Sprintf("dead-t%d", j)
		eventually(t, 10*time.Second, "the dead instance's task is failed after the outage", func() bool {
			return get(id).Status == tasks.Failed
		})
	}
	for i, st := range live {
		for j := range 5 {
			if tk := get(fmt.Sprintf("i%d-t%d", i, j)); tk.Status != tasks.Working {
				t.Errorf("a task of a live instance after a %v outage: %s %q", lease, tk.Status, tk.StatusMessage)
			}
		}
		if s := st.Stats(); s.SweepsHeld == 0 {
			t.Errorf("no sweep held during the outage: %+v", s)
		}
	}
	// A sweeper counts a task once it has been failed: the count may trail
	// the task's status by a moment (this read right after the status was
	// a flake in a loaded CI run).
	var swept int64
	eventually(t, 5*time.Second, "the live instances count the dead instance's 2 tasks swept", func() bool {
		swept = 0
		for _, st := range live {
			swept += st.Stats().Swept
		}
		return swept >= 2
	})
	if swept != 2 {
		t.Errorf("swept %d tasks, want the dead instance's 2", swept)
	}
}

// ----- a handler whose task a sweeper failed -----

// The bug: a task failed by a sweeper (its lease lapsed, as after a
// partition) while its handler lived on: the handler was never stopped
// and its outcome was dropped without a word. The core now stops it
// (server.ErrTaskEnded) on the store's event; this pins it through
// redisstate.
func TestTheHandlerOfATaskASweeperFailedIsStopped(t *testing.T) {
	r := startRedis(t)
	const lease = 600 * time.Millisecond
	stA, stB := newState(t, r, Options{Lease: lease}), newState(t, r, Options{Lease: lease})
	waitListening(t, stA)
	waitListening(t, stB)
	stopped := make(chan error, 1)
	s := server.New(mcp.Implementation{Name: "a", Version: "1"}, &server.Options{Logger: quiet,
		Tasks: &server.TaskOptions{Store: stA.Tasks()}})
	s.AddTool(mcp.Tool{Name: "slow", Execution: &mcp.ToolExecution{TaskSupport: mcp.TaskRequired}}, func(ctx context.Context, r *server.ToolRequest) (*mcp.ToolResult, error) {
		<-ctx.Done()
		stopped <- context.Cause(ctx)
		return nil, ctx.Err()
	})
	h := streamable.NewHandler(s, &streamable.Options{Logger: quiet})
	web := httptest.NewServer(h)
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		h.Shutdown(ctx)
		web.Close()
		s.Shutdown(ctx)
	}()
	id := view(t, post(t, web.URL+"/mcp", 1, "tools/call", `"name":"slow","arguments":{}`, "slow")).Result.TaskID
	if id == "" {
		t.Fatal("no task")
	}
	// The lease lapses (as after a partition longer than Lease) and B
	// sweeps (again if A's renewal got in between).
	for got := lostRenewed; got != lostSwept; {
		stA.client.ZAddArgs(t.Context(), stA.k.live, redis.ZAddArgs{XX: true, Members: []redis.Z{{Score: 0, Member: id}}})
		if got = stB.failLost(id); got != lostSwept && got != lostRenewed {
			t.Fatalf("failLost: %v", got)
		}
	}
	select {
	case cause := <-stopped:
		if !errors.Is(cause, server.ErrTaskEnded) {
			t.Errorf("the handler was stopped with %v, want server.ErrTaskEnded", cause)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the handler of a task failed by the sweeper runs on")
	}
}

// ----- events out of order through the by-id path -----

// The bug: an event of a task larger than 64 KiB carries only its id and
// was resolved by a GET at dispatch, which may return a later version;
// the older inline events that followed were delivered after it, so a
// subscriber saw the task go back in time. Now records and events carry
// a revision, and events older than a version already delivered are
// dropped (Stats.EventsSuperseded). This drives the dispatcher with the
// exact interleaving.
func TestAnEventReadByIDIsNotFollowedByOlderEvents(t *testing.T) {
	r := startRedis(t)
	st := newState(t, r, Options{})
	var rec recorder
	stop, _ := st.Tasks().Subscribe(t.Context(), func(ev tasks.Event) { rec.add(ev.Task.StatusMessage) })
	defer stop()
	// The record is at revision 4 (v3); the events of revisions 2 (by
	// id), 3 and 4 are still to be dispatched.
	version := func(v string, rev uint64) []byte {
		tk := working("t", time.Hour)
		tk.StatusMessage = v
		b, err := encodeStored(tk, rev)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	if err := st.client.Set(t.Context(), st.k.task("t"), version("v3", 4), 0).Err(); err != nil {
		t.Fatal(err)
	}
	st.inbox.push(inItem{kind: itemEvent, payload: "I2:t"})
	st.inbox.push(inItem{kind: itemEvent, payload: eventMessage("t", 3, version("v2", 3))})
	st.inbox.push(inItem{kind: itemEvent, payload: eventMessage("t", 4, version("v3", 4))})
	st.inbox.push(inItem{kind: itemEvent, payload: eventMessage("t", 5, version("v4", 5))})
	eventually(t, 5*time.Second, "the events are dispatched", func() bool { return st.Stats().EventsReceived == 4 })
	eventually(t, 5*time.Second, "the subscriber has them", func() bool { return rec.len() == 2 })
	if got := fmt.Sprint(rec.get()); got != "[v3 v4]" {
		t.Errorf("delivered %s, want [v3 v4]: the version read by id, then only later ones", got)
	}
	if s := st.Stats(); s.EventsSuperseded != 2 {
		t.Errorf("EventsSuperseded %d, want 2", s.EventsSuperseded)
	}
}

// The same bug through Redis, as it was met: 100 tasks each
// written four times, the second write large (an event by id); every
// subscriber sees each task's versions in order.
func TestEventsOfALargeTaskArriveInOrder(t *testing.T) {
	r := startRedis(t)
	w, s := newState(t, r, Options{}), newState(t, r, Options{})
	waitListening(t, w)
	waitListening(t, s)
	var mu sync.Mutex
	seen := map[string][]string{}
	stop, _ := s.Tasks().Subscribe(t.Context(), func(ev tasks.Event) {
		mu.Lock()
		seen[ev.Task.ID] = append(seen[ev.Task.ID], ev.Task.StatusMessage)
		mu.Unlock()
	})
	defer stop()
	big := json.RawMessage(`{"x":"` + strings.Repeat("a", 70<<10) + `"}`)
	const n = 100
	for i := range n {
		id := fmt.Sprint("t", i)
		if err := w.Tasks().Create(t.Context(), working(id, time.Hour)); err != nil {
			t.Fatal(err)
		}
		for v := 1; v <= 3; v++ {
			if _, err := w.Tasks().Update(t.Context(), id, func(tk *tasks.Task) error {
				tk.StatusMessage = fmt.Sprint("v", v)
				tk.InputRequests = nil
				if v == 1 {
					tk.InputRequests = map[string]json.RawMessage{"k": big} // an event by id
				}
				return nil
			}); err != nil {
				t.Fatal(err)
			}
		}
	}
	eventually(t, 10*time.Second, "every task's last version is delivered", func() bool {
		mu.Lock()
		defer mu.Unlock()
		for i := range n {
			vs := seen[fmt.Sprint("t", i)]
			if len(vs) == 0 || vs[len(vs)-1] != "v3" {
				return false
			}
		}
		return true
	})
	mu.Lock()
	defer mu.Unlock()
	for id, vs := range seen {
		for i := 1; i < len(vs); i++ {
			if vs[i] <= vs[i-1] {
				t.Fatalf("%s's events arrived out of order: %s", id, strings.Join(vs, ","))
			}
		}
	}
}

// The marks that keep that order are bounded: past maxOrderMarks the
// oldest are forgotten (counted), and a mark goes once it has been held
// markHold and the events queued before it were dispatched.
func TestTheOrderMarksAreBounded(t *testing.T) {
	o := marks{m: map[string]mark{}}
	now := time.Now()
	forgotten := 0
	for i := range maxOrderMarks + 10 {
		forgotten += o.set(fmt.Sprint(i), 1, now, 5)
	}
	if len(o.m) != maxOrderMarks || forgotten != 10 {
		t.Errorf("%d marks, %d forgotten; want %d and 10", len(o.m), forgotten, maxOrderMarks)
	}
	if o.prune(now.Add(markHold), 4); len(o.m) != maxOrderMarks {
		t.Errorf("marks went before the items queued ahead of them were dispatched: %d left", len(o.m))
	}
	if o.prune(now.Add(markHold), 5); len(o.m) != 0 || len(o.q) != 0 {
		t.Errorf("served marks stay: %d marks, %d refs", len(o.m), len(o.q))
	}
}

// ----- key ring cold start with a hung Redis -----

// The bug: a ring with no keys yet and Redis hung: concurrent StateKeys
// callers queued on a mutex ignoring their contexts, and each then read
// Redis in turn, so the last waited N × OpTimeout. Now one read is
// shared and every caller waits on it or on its context.
func TestAKeyRingColdStartWithAHungRedisIsBoundedByOpTimeout(t *testing.T) {
	r := startRedis(t)
	const op = 300 * time.Millisecond
	st := newState(t, r, Options{OpTimeout: op})
	ring := st.Keys(nil)
	r.Pause()
	defer r.Resume()
	var wg sync.WaitGroup
	var mu sync.Mutex
	var worst time.Duration
	for range 8 {
		wg.Go(func() {
			start := time.Now()
			if _, _, err := ring.StateKeys(context.Background()); err == nil {
				t.Error("keys from a hung Redis")
			}
			mu.Lock()
			worst = max(worst, time.Since(start))
			mu.Unlock()
		})
	}
	// A caller whose context ends is not held by the read.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	start := time.Now()
	if _, _, err := ring.StateKeys(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("a caller's context ended: %v", err)
	}
	if took := time.Since(start); took > op/2 {
		t.Errorf("a caller whose context ended after 20ms waited %v", took)
	}
	wg.Wait()
	if worst > op+500*time.Millisecond {
		t.Errorf("a StateKeys call took %v (OpTimeout %v)", worst, op)
	}
}

// ----- key ring grace across clocks, and a stale cache -----

// The bug: a new key started signing once now - rotated_at passed the
// grace, rotated_at written by the rotating instance's clock and
// compared with another's: with the rotating instance's clock behind,
// the others signed with the new key at once, before every instance had
// it. Now a key signs on an instance only once that instance has known
// it for the grace, by its own monotonic clock (and rotated_at is
// Redis's).
func TestANewKeySignsOnlyOnceThisInstanceHasKnownItForTheGrace(t *testing.T) {
	r := startRedis(t)
	const refresh = 100 * time.Millisecond
	behind := func() time.Time { return time.Now().Add(-time.Hour) }
	a := newState(t, r, Options{Now: behind, OpTimeout: 300 * time.Millisecond})
	b := newState(t, r, Options{OpTimeout: 300 * time.Millisecond})
	rb := b.Keys(&KeyOptions{Refresh: refresh})
	k1, _, err := rb.StateKeys(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if err := a.RotateKeys(t.Context()); err != nil {
		t.Fatal(err)
	}
	var k2 []byte
	var seen time.Time
	eventually(t, 5*time.Second, "B reads the new key", func() bool {
		cur, prev, err := rb.StateKeys(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(cur, k1) {
			t.Fatalf("B signs with a key it has just read (%x), not the one before", cur)
		}
		if len(prev) == 1 && !bytes.Equal(prev[0], k1) {
			k2, seen = prev[0], time.Now()
		}
		return k2 != nil
	})
	grace := refresh + 300*time.Millisecond
	eventually(t, 5*time.Second, "the new key signs on B after the grace", func() bool {
		cur, prev, _ := rb.StateKeys(t.Context())
		if bytes.Equal(cur, k2) {
			if took := time.Since(seen); took < grace-refresh {
				t.Errorf("the new key signs %v after B read it (grace %v)", took, grace)
			}
			if len(prev) != 1 || !bytes.Equal(prev[0], k1) {
				t.Errorf("after the grace B verifies %x, want the old key", prev)
			}
			return true
		}
		return false
	})
}

// The bug: on the stale path, one caller read Redis again and the others
// went on with the cache from before a rotation, so a state another
// instance had sealed with the new key failed to verify on them. Now a
// cache older than the grace (it may lack a key another instance signs
// with) is read again, once, for every caller, before it is used.
func TestEveryCallerOfAStaleRingSeesAKeyAnotherInstanceSignsWith(t *testing.T) {
	r := startRedis(t)
	const refresh, op = 100 * time.Millisecond, 200 * time.Millisecond
	a, c := newState(t, r, Options{OpTimeout: op}), newState(t, r, Options{OpTimeout: op})
	ra, rc := a.Keys(&KeyOptions{Refresh: refresh}), c.Keys(&KeyOptions{Refresh: refresh})
	k1, _, err := rc.StateKeys(t.Context()) // C's cache: before the rotation
	if err != nil {
		t.Fatal(err)
	}
	if err := a.RotateKeys(t.Context()); err != nil {
		t.Fatal(err)
	}
	var k2 []byte
	eventually(t, 5*time.Second, "A signs with the new key", func() bool {
		cur, _, err := ra.StateKeys(t.Context())
		if err == nil && !bytes.Equal(cur, k1) {
			k2 = cur
		}
		return k2 != nil
	})
	// C has not looked since before the rotation: all its callers at once.
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			cur, prev, err := rc.StateKeys(t.Context())
			if err != nil {
				t.Error(err)
				return
			}
			if !bytes.Equal(cur, k2) && !slicesContain(prev, k2) {
				t.Errorf("a caller of C's ring cannot verify the key A signs with (%x, %x)", cur, prev)
			}
		})
	}
	wg.Wait()
}

func slicesContain(ks [][]byte, k []byte) bool {
	for _, x := range ks {
		if bytes.Equal(x, k) {
			return true
		}
	}
	return false
}

// ----- the cleanup's fixed rate -----

// The bug: a sweep took out of the owner indexes at most one batch (500)
// of expired tasks, so a burst of expirations took many sweeps. Now a
// sweep goes on batch after batch until one comes back short (within its
// time budget).
func TestOneSweepCleansMoreThanABatchOfExpiredTasks(t *testing.T) {
	r := startRedis(t)
	st := newState(t, r, Options{Lease: time.Minute}) // its own sweeps far apart: the test sweeps
	const n = 2*sweepBatch + 100
	for i := range n {
		tk := working(fmt.Sprintf("e%04d", i), time.Millisecond)
		tk.Owner = "owner"
		tk.Status = tasks.Completed
		if err := st.Tasks().Create(t.Context(), tk); err != nil {
			t.Fatal(err)
		}
	}
	c := r.client(t)
	eventually(t, 5*time.Second, "the tasks expire", func() bool {
		due, _ := c.ZCount(t.Context(), st.k.ended, "-inf", strconv.FormatInt(redisNowMs(t, c), 10)).Result()
		left, _ := c.Exists(t.Context(), st.k.task("e0000"), st.k.task(fmt.Sprintf("e%04d", n-1))).Result()
		return due == n && left == 0
	})
	st.sweep()
	if got, _ := c.ZCard(t.Context(), st.k.index("owner", "")).Result(); got != 0 {
		t.Errorf("%d of %d expired tasks left in the owner index after one sweep", got, n)
	}
	if got, _ := c.ZCard(t.Context(), st.k.ended).Result(); got != 0 {
		t.Errorf("%d entries left in the ended set", got)
	}
	if s := st.Stats(); s.Expired != n || s.SweepsCut != 0 {
		t.Errorf("Expired %d (want %d), SweepsCut %d", s.Expired, n, s.SweepsCut)
	}
}

// The cleanup compared expiries with the sweeper's own clock: a sweeper
// whose clock was ahead took tasks whose records still lived out of the
// owner indexes (no longer listed). Now it goes by Redis's clock, and an
// entry found due whose record lives (the clocks of the State that
// ended the task and of Redis differ) is put back at the record's own
// expiry.
func TestTheCleanupKeepsATaskWhoseRecordLives(t *testing.T) {
	r := startRedis(t)
	ahead := func() time.Time { return time.Now().Add(time.Hour) }
	st := newState(t, r, Options{Lease: time.Minute})
	skewed := newState(t, r, Options{Lease: time.Minute, Now: ahead})
	tk := working("kept", time.Hour)
	tk.Owner = "owner"
	if err := skewed.Tasks().Create(t.Context(), tk); err != nil {
		t.Fatal(err)
	}
	complete(t, skewed.Tasks(), "kept", 10)
	// Its ended entry is scored by the clock ahead; by Redis's it is
	// two hours early. Make it due now, as a clock two hours ahead would.
	c := r.client(t)
	c.ZAdd(t.Context(), st.k.ended, redis.Z{Score: 0, Member: endedMember("kept", st.k.index("owner", ""))})
	st.sweep()
	ts, _, err := st.Tasks().List(t.Context(), "owner", "", "", 10)
	if err != nil || len(ts) != 1 {
		t.Fatalf("a task whose record lives is no longer listed: %v %v", ts, err)
	}
	score, _ := c.ZScore(t.Context(), st.k.ended, endedMember("kept", st.k.index("owner", ""))).Result()
	if now := redisNowMs(t, c); int64(score) < now+59*60*1000 {
		t.Errorf("the entry is put back at %v, %v from now; want the record's expiry (about 1 h)", score, time.Duration(int64(score)-now)*time.Millisecond)
	}
}

// ----- resources and bandwidth -----

// The bug: every renewal (every Lease/3) read the whole record of every
// task running here (MGET): 8 MiB tasks cost 8 MiB a renewal each. Now a
// script reads only the head of each record.
func TestARenewalDoesNotReadTheRecords(t *testing.T) {
	r := startRedis(t)
	p := newCutProxy(t, r.Addr())
	// Writing 1 MiB records through the proxy on a loaded machine can take
	// longer than the tests' usual 200 ms per operation (a flake seen under
	// load); this test is about what a renewal reads, not about timeouts.
	st := stateThrough(t, p.Addr(), Options{Lease: 300 * time.Millisecond, OpTimeout: 5 * time.Second})
	big := json.RawMessage(`{"x":"` + strings.Repeat("a", 1<<20) + `"}`)
	for i := range 4 {
		id := fmt.Sprint("big", i)
		if err := st.Tasks().Create(t.Context(), working(id, time.Hour)); err != nil {
			t.Fatal(err)
		}
		if _, err := st.Tasks().Update(t.Context(), id, func(tk *tasks.Task) error {
			tk.InputRequests = map[string]json.RawMessage{"k": big}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	before, renewed := p.down.Load(), st.Stats().LeasesRenewed
	eventually(t, 5*time.Second, "a few renewals", func() bool { return st.Stats().LeasesRenewed >= renewed+12 })
	if got := p.down.Load() - before; got > 64<<10 {
		t.Errorf("three renewals of 4 tasks of 1 MiB read %d bytes from Redis", got)
	}
}

// The bug: a renewal batch that failed returned at once, so the batches
// after it were not renewed that round. Now each batch is tried.
func TestARenewalBatchThatFailsDoesNotStopTheOthers(t *testing.T) {
	r := startRedis(t)
	st := newState(t, r, Options{Lease: time.Minute}) // renewals far apart: the test renews
	const n = 2*leaseBatch + 1
	for i := range n {
		if err := st.Tasks().Create(t.Context(), working(fmt.Sprintf("r%04d", i), time.Hour)); err != nil {
			t.Fatal(err)
		}
	}
	// One record of the wrong type: its batch's script fails.
	c := r.client(t)
	c.Del(t.Context(), st.k.task("r0000"))
	c.HSet(t.Context(), st.k.task("r0000"), "not", "a task")
	before := st.Stats().LeasesRenewed
	if err := st.renew(); err == nil {
		t.Error("a renewal with a failing batch reports no error")
	}
	got := st.Stats().LeasesRenewed - before
	if got < n-leaseBatch {
		t.Errorf("%d of %d leases renewed: the batches after the failing one were skipped", got, n)
	}
}

// The bug: every instance decoded every task event, and read the task of
// every large event (a GET on the one dispatcher goroutine), even with
// no task subscriber. Now an instance without one only counts them.
func TestAnInstanceWithNoTaskSubscriberDoesNotReadLargeEvents(t *testing.T) {
	r := startRedis(t)
	p := newCutProxy(t, r.Addr())
	w := newState(t, r, Options{})
	idle := stateThrough(t, p.Addr(), Options{})
	waitListening(t, idle)
	if err := w.Tasks().Create(t.Context(), working("big", time.Hour)); err != nil {
		t.Fatal(err)
	}
	before := p.down.Load()
	for i := range 20 {
		if _, err := w.Tasks().Update(t.Context(), "big", func(tk *tasks.Task) error {
			tk.Result = result(100<<10 + i)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, 5*time.Second, "the events are received", func() bool { return idle.Stats().EventsReceived == 21 })
	if got := p.down.Load() - before; got > 32<<10 {
		t.Errorf("an instance with no task subscriber read %d bytes for 20 events of a 100 KiB task", got)
	}
}

// The same bug for a server, which always has a subscriber while it runs
// a task: every instance decoded every change of every task of the
// fleet, and read every large one. The store is a tasks.Selective: a
// subscriber is asked by id, before anything is decoded or read, and
// gets only the tasks it keeps.
func TestASelectiveSubscriberCostsNothingForTheTasksItDoesNotKeep(t *testing.T) {
	r := startRedis(t)
	p := newCutProxy(t, r.Addr())
	w := newState(t, r, Options{})
	sel := stateThrough(t, p.Addr(), Options{})
	waitListening(t, sel)
	var asked sync.Map
	var rec recorder
	stop, err := sel.Tasks().(tasks.Selective).SubscribeSelected(t.Context(), func(id string) bool {
		asked.Store(id, true)
		return id == "mine"
	}, func(ev tasks.Event) { rec.add(ev.Task.ID + ":" + ev.Task.StatusMessage) })
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	for _, id := range []string{"mine", "other"} {
		if err := w.Tasks().Create(t.Context(), working(id, time.Hour)); err != nil {
			t.Fatal(err)
		}
	}
	before := p.down.Load()
	for i := range 20 {
		if _, err := w.Tasks().Update(t.Context(), "other", func(tk *tasks.Task) error {
			tk.Result = result(100<<10 + i) // events by id
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := w.Tasks().Update(t.Context(), "mine", func(tk *tasks.Task) error { tk.StatusMessage = "changed"; return nil }); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "the kept task's change is delivered", func() bool { return rec.len() == 2 })
	if got := fmt.Sprint(rec.get()); got != "[mine: mine:changed]" {
		t.Errorf("delivered %s, want only the kept task's", got)
	}
	if _, ok := asked.Load("other"); !ok {
		t.Error("keep was not asked about the other task")
	}
	if got := p.down.Load() - before; got > 32<<10 {
		t.Errorf("%d bytes read for 20 large events of a task no subscriber keeps", got)
	}
}

// The bug: the queues were bounded in items only: 4096 events of 8 MiB
// tasks per subscriber. Now EventBufferBytes bounds them too (the oldest
// dropped, counted in EventsDropped).
func TestASlowSubscriberLosesTheOldestEventsPastEventBufferBytes(t *testing.T) {
	st := newState(t, startRedis(t), Options{EventBufferBytes: 200 << 10})
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
	defer close(release)
	if err := m.Create(t.Context(), working("a", time.Hour)); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "the subscriber holds the create event", func() bool { return rec.len() == 1 })
	for i := 1; i <= 10; i++ {
		if _, err := m.Update(t.Context(), "a", func(tk *tasks.Task) error {
			tk.StatusMessage, tk.Result = fmt.Sprint(i), result(50<<10) // inline events of about 50 KiB: 3 fit in 200 KiB
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, 5*time.Second, "every event is received", func() bool { return st.Stats().EventsReceived == 11 })
	if s := st.Stats(); s.EventsDropped != 7 {
		t.Errorf("EventsDropped %d, want 7 (10 events of 50 KiB behind a 200 KiB buffer)", s.EventsDropped)
	}
}

// ----- smaller items -----

// The bug: List with a cursor it did not make answered a plain error,
// not tasks.ErrInvalidCursor (the server then answered -32603, not
// -32602).
func TestListWithABadCursorIsErrInvalidCursor(t *testing.T) {
	st := newState(t, startRedis(t), Options{})
	for _, c := range []string{"!!not-a-cursor", "bm90LWEtbnVtYmVy" /* not-a-number */} {
		if _, _, err := st.Tasks().List(t.Context(), "alice", "", c, 10); !errors.Is(err, tasks.ErrInvalidCursor) {
			t.Errorf("List with cursor %q: %v, want tasks.ErrInvalidCursor", c, err)
		}
	}
}

// The bug: the sweeper checked the lease (ZSCORE) without watching the
// live set, so a renewal between the check and EXEC was overridden: a
// renewed task was failed. Now the check and the write are one script,
// comparing the lease on Redis's clock and the record's revision.
func TestASweeperDoesNotFailATaskRenewedUnderIt(t *testing.T) {
	r := startRedis(t)
	const lease = time.Minute
	owner, sweeper := newState(t, r, Options{Lease: lease}), newState(t, r, Options{Lease: lease})
	if err := owner.Tasks().Create(t.Context(), working("t", time.Hour)); err != nil {
		t.Fatal(err)
	}
	c := r.client(t)
	lapse := func() { c.ZAdd(t.Context(), owner.k.live, redis.Z{Score: 0, Member: "t"}) }
	// Renewed after the sweeper listed it: not failed.
	lapse()
	if err := owner.renew(); err != nil {
		t.Fatal(err)
	}
	if got := sweeper.failLost("t"); got != lostRenewed {
		t.Errorf("failLost of a renewed lease: %v", got)
	}
	// Changed after the sweeper read it: the script refuses the stale
	// revision (the sweeper reads again).
	lapse()
	_, rev, err := sweeper.store.get(t.Context(), "t")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := owner.Tasks().Update(t.Context(), "t", func(tk *tasks.Task) error { tk.StatusMessage = "moved on"; return nil }); err != nil {
		t.Fatal(err)
	}
	failed, _ := encodeStored(&tasks.Task{ID: "t", Status: tasks.Failed}, rev+1)
	n, err := failScript.Run(t.Context(), c, []string{owner.k.task("t"), owner.k.live, owner.k.ended},
		revHead(rev), failed, "t", 1000, 0, endedMember("t", owner.k.index("", "")), owner.k.events, "x").Int64()
	if err != nil || n != 3 {
		t.Errorf("the fail script over a changed record: %d %v, want 3", n, err)
	}
	// Racing renewals and sweeps: every outcome is consistent.
	for range 50 {
		lapse()
		var wg sync.WaitGroup
		var outcome lostOutcome
		wg.Go(func() { owner.renew() })
		wg.Go(func() { outcome = sweeper.failLost("t") })
		wg.Wait()
		tk := mustGet(t, owner.Tasks(), "t")
		_, err := c.ZScore(t.Context(), owner.k.live, "t").Result()
		if outcome == lostSwept {
			if tk.Status != tasks.Failed || !errors.Is(err, redis.Nil) {
				t.Fatalf("swept: the task is %s, its lease %v", tk.Status, err)
			}
			return
		}
		if tk.Status != tasks.Working || err != nil {
			t.Fatalf("not swept (%v): the task is %s, its lease %v", outcome, tk.Status, err)
		}
	}
}

// The bug: an empty Redis after a restart starts the creation sequence
// at 1 again, so a List cursor handed out before skipped the new tasks.
// Now a cursor names the sequence's epoch, and one of another epoch
// lists from the start.
func TestAListCursorFromBeforeARedisRestartDoesNotSkipNewTasks(t *testing.T) {
	r := startRedis(t)
	st := newState(t, r, Options{})
	mk := func(id string) {
		t.Helper()
		tk := working(id, time.Hour)
		tk.Owner = "alice"
		if err := st.Tasks().Create(t.Context(), tk); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 5 {
		mk(fmt.Sprint("old", i))
	}
	_, cursor, err := st.Tasks().List(t.Context(), "alice", "", "", 3)
	if err != nil || cursor == "" {
		t.Fatalf("first page: %q %v", cursor, err)
	}
	r.Restart() // empty
	eventually(t, 5*time.Second, "the store answers again", func() bool {
		_, _, err := st.Tasks().List(t.Context(), "alice", "", "", 1)
		return err == nil
	})
	for i := range 3 {
		mk(fmt.Sprint("new", i))
	}
	var got []string
	for page := 0; page < 5; page++ {
		ts, next, err := st.Tasks().List(t.Context(), "alice", "", cursor, 2)
		if err != nil {
			t.Fatal(err)
		}
		for _, tk := range ts {
			got = append(got, tk.ID)
		}
		if cursor = next; cursor == "" {
			break
		}
	}
	if fmt.Sprint(got) != "[new0 new1 new2]" {
		t.Errorf("listing on with a cursor from before the restart: %v", got)
	}
}

// The bug: after Redis lost the key ring (an empty Redis), the instance
// that made the new key signed with it at once and the others went on
// with their old cache, so every requestState in flight failed. Now an
// instance that held a key goes on signing with it for the grace and
// verifies it after, while the new key verifies at once.
func TestAKeyRingRemadeByAnEmptyRedisKeepsTheOldKeyVerifying(t *testing.T) {
	r := startRedis(t)
	const refresh = 100 * time.Millisecond
	st := newState(t, r, Options{OpTimeout: 200 * time.Millisecond})
	ring := st.Keys(&KeyOptions{Refresh: refresh})
	k1, _, err := ring.StateKeys(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	r.Restart()
	var k2 []byte
	eventually(t, 5*time.Second, "the ring reads the new key", func() bool {
		cur, prev, err := ring.StateKeys(t.Context())
		if err != nil {
			return false
		}
		if !bytes.Equal(cur, k1) {
			t.Fatalf("the ring signs with a key it has just read")
		}
		if len(prev) == 0 {
			return false
		}
		k2 = prev[0]
		return true
	})
	eventually(t, 5*time.Second, "the new key signs after the grace", func() bool {
		cur, prev, _ := ring.StateKeys(t.Context())
		if !bytes.Equal(cur, k2) {
			return false
		}
		if !slicesContain(prev, k1) {
			t.Errorf("the key that signed before no longer verifies: %x", prev)
		}
		return true
	})
}

// The bug: a renewal was ZADD XX, which never puts back a lease Redis
// lost (evicted under an allkeys-* policy): that task was then never
// swept once its instance died, and stayed working forever. Now a
// renewal puts back the lease of a task that is live in its record
// (Stats.LeasesRestored), and the task is swept as any other.
func TestARenewalPutsBackALeaseRedisLost(t *testing.T) {
	r := startRedis(t)
	const lease = 600 * time.Millisecond
	owner, other := newState(t, r, Options{Lease: lease}), newState(t, r, Options{Lease: lease})
	if err := owner.Tasks().Create(t.Context(), working("t", time.Hour)); err != nil {
		t.Fatal(err)
	}
	c := r.client(t)
	c.ZRem(t.Context(), owner.k.live, "t") // evicted
	eventually(t, 5*time.Second, "the lease is put back", func() bool { return owner.Stats().LeasesRestored == 1 })
	if _, err := c.ZScore(t.Context(), owner.k.live, "t").Result(); err != nil {
		t.Fatalf("the lease is not in Redis: %v", err)
	}
	owner.Close() // its instance dies
	eventually(t, 10*time.Second, "the task is swept", func() bool { return mustGet(t, other.Tasks(), "t").Status == tasks.Failed })
}

// The bug: when the ping of a quiet Pub/Sub connection failed, go-redis
// reconnected and resubscribed, but the State did not take the
// connection for lost: events published meanwhile were lost without a
// recheck of the tasks running here and without Stats.Resubscribed.
func TestAFailedPubSubPingCountsAsALostConnection(t *testing.T) {
	r := startRedis(t)
	var armed atomic.Bool
	c := redis.NewClient(&redis.Options{Addr: r.Addr(), ContextTimeoutEnabled: true,
		DialTimeout: time.Second, ReadTimeout: time.Second, WriteTimeout: time.Second, MaxRetries: 1, DialerRetries: 1,
		Dialer: func(ctx context.Context, network, addr string) (net.Conn, error) {
			var d net.Dialer
			cn, err := d.DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			return &pingBreaker{Conn: cn, armed: &armed}, nil
		}})
	t.Cleanup(func() { c.Close() })
	st := New(c, &Options{Logger: quiet, Prefix: "test:", Lease: 300 * time.Millisecond, OpTimeout: 300 * time.Millisecond})
	t.Cleanup(func() { st.Close() })
	waitListening(t, st)
	armed.Store(true) // the next ping on the Pub/Sub connection fails
	eventually(t, 5*time.Second, "the failed ping is taken for a lost connection", func() bool { return st.Stats().Resubscribed == 1 })
	if armed.Load() {
		t.Error("no ping was sent")
	}
	if !st.Stats().Listening {
		waitListening(t, st)
	}
}

// pingBreaker is a connection whose first PING after it subscribed fails
// (and closes it) once armed.
type pingBreaker struct {
	net.Conn
	armed      *atomic.Bool
	subscribed atomic.Bool
}

func (c *pingBreaker) Write(b []byte) (int, error) {
	lb := bytes.ToLower(b)
	if bytes.Contains(lb, []byte("subscribe")) {
		c.subscribed.Store(true)
	}
	if c.subscribed.Load() && bytes.Contains(lb, []byte("ping")) && c.armed.CompareAndSwap(true, false) {
		c.Conn.Close()
		return 0, errors.New("test: the ping is cut")
	}
	return c.Conn.Write(b)
}
