package redisstate

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentwire/agentwire/mcp/streamable"
	"github.com/agentwire/agentwire/mcp/streamable/eventstoretest"
)

// The event store is tested against a real redis-server: two States over
// two clients of one server are two instances of a fleet.

// syncBuffer is a log destination the tests read while States write.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// keysMatching is KEYS pattern.
func keysMatching(t *testing.T, r *redisServer, pattern string) []string {
	t.Helper()
	ks, err := r.client(t).Keys(t.Context(), pattern).Result()
	if err != nil {
		t.Fatal(err)
	}
	return ks
}

func logTo(b *syncBuffer) *slog.Logger { return slog.New(slog.NewTextHandler(b, nil)) }

// storeState is newState with OpTimeout 2 s unless o says: the stores'
// tests check what is stored, not how fast, and share the machine with
// others under -race.
func storeState(t *testing.T, r *redisServer, o Options) *State {
	t.Helper()
	if o.OpTimeout == 0 {
		o.OpTimeout = 2 * time.Second
	}
	return newState(t, r, o)
}

// eventsOf is st's event store with o, and its counters.
func eventsOf(st *State, o *EventOptions) (*events, *sessionCounters) {
	e := st.Events(o).(*events)
	return e, e.cnt
}

type sent struct {
	id   string
	data string
}

// collect returns a send that records what it is given.
func collect(out *[]sent) func(string, []byte) error {
	return func(id string, data []byte) error {
		*out = append(*out, sent{id, string(data)})
		return nil
	}
}

func mustAppend(t *testing.T, e streamable.EventStore, session, stream, data string) string {
	t.Helper()
	var b []byte
	if data != "" {
		b = []byte(data)
	}
	id, err := e.Append(t.Context(), session, stream, b)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

const (
	note1 = `{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":1,"progress":1}}`
	note2 = `{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":1,"progress":2}}`
	resp  = `{"jsonrpc":"2.0","id":7,"result":{"content":[]}}`
)

// The contract every event store keeps, against one Redis: each store an
// empty prefix of its own, its defaults (a follow that waits 1 s).
func TestTheRedisEventStoreKeepsTheEventStoreContract(t *testing.T) {
	r := startRedis(t)
	n := 0
	eventstoretest.Run(t, func(t *testing.T) streamable.EventStore {
		n++
		return storeState(t, r, Options{Prefix: fmt.Sprintf("c%d:", n)}).Events(nil)
	})
}

// The same contract with every call of a test through another instance
// than the one before: what one appends, the other replays and follows.
func TestTheEventStoreContractHoldsAcrossTwoInstances(t *testing.T) {
	r := startRedis(t)
	n := 0
	eventstoretest.Run(t, func(t *testing.T) streamable.EventStore {
		n++
		o := Options{Prefix: fmt.Sprintf("x%d:", n)}
		return &alternating{a: newState(t, r, o).Events(nil), b: newState(t, r, o).Events(nil)}
	})
}

// alternating is two instances' stores, used in turn.
type alternating struct {
	a, b streamable.EventFollower
	mu   sync.Mutex
	turn bool
}

func (x *alternating) next() streamable.EventFollower {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.turn = !x.turn
	if x.turn {
		return x.a
	}
	return x.b
}

func (x *alternating) Append(ctx context.Context, session, stream string, data []byte) (string, error) {
	return x.next().Append(ctx, session, stream, data)
}

func (x *alternating) Replay(ctx context.Context, session, lastID string, send func(string, []byte) error) (string, error) {
	return x.next().Replay(ctx, session, lastID, send)
}

func (x *alternating) EndStream(ctx context.Context, session, stream string) error {
	return x.next().EndStream(ctx, session, stream)
}

func (x *alternating) EndSession(ctx context.Context, session string) error {
	return x.next().EndSession(ctx, session)
}

func (x *alternating) Follow(ctx context.Context, session, stream, afterID string, send func(string, []byte) error) error {
	return x.next().Follow(ctx, session, stream, afterID, send)
}

func TestAStreamAppendedThroughOneInstanceIsReplayedThroughAnother(t *testing.T) {
	r := startRedis(t)
	a, cnt := eventsOf(storeState(t, r, Options{}), nil)
	b := storeState(t, r, Options{}).Events(nil)
	// A POST stream's id is base64url: it may hold '_' (and '-').
	const stream = "q_x-_9Zk"
	prime := mustAppend(t, a, "sess1", stream, "")
	id1 := mustAppend(t, a, "sess1", stream, note1)
	id2 := mustAppend(t, a, "sess1", stream, resp)
	if n := cnt.appended.Load(); n != 3 {
		t.Fatalf("appended counted: %d, want 3", n)
	}
	for _, id := range []string{prime, id1, id2} {
		if !strings.HasPrefix(id, stream+"_") {
			t.Fatalf("event id %q does not name its stream %q", id, stream)
		}
		if st, _, ok := parseEventID(id); !ok || st != stream {
			t.Fatalf("event id %q parses to stream %q (%v)", id, st, ok)
		}
	}
	if prime == id1 || id1 == id2 {
		t.Fatalf("event ids repeat: %q %q %q", prime, id1, id2)
	}

	var got []sent
	st, err := b.Replay(t.Context(), "sess1", prime, collect(&got))
	if err != nil || st != stream {
		t.Fatalf("Replay from the priming event: stream %q, %v", st, err)
	}
	want := []sent{{id1, note1}, {id2, resp}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("replayed %v, want %v (the priming event is never replayed)", got, want)
	}

	got = nil
	if _, err := b.Replay(t.Context(), "sess1", id1, collect(&got)); err != nil || fmt.Sprint(got) != fmt.Sprint(want[1:]) {
		t.Fatalf("Replay after the first message: %v %v", got, err)
	}
	got = nil
	if _, err := b.Replay(t.Context(), "sess1", id2, collect(&got)); err != nil || len(got) != 0 {
		t.Fatalf("Replay after the last event: %v %v, want nothing and no error", got, err)
	}
}

func TestAReplayLongerThanABatchSendsEveryEventInOrder(t *testing.T) {
	r := startRedis(t)
	e := storeState(t, r, Options{}).Events(nil)
	first := mustAppend(t, e, "s", "g", "")
	var want []sent
	for i := range 3*replayBatch + 5 {
		d := `{"jsonrpc":"2.0","method":"n","params":{"i":` + strconv.Itoa(i) + `}}`
		want = append(want, sent{mustAppend(t, e, "s", "g", d), d})
	}
	var got []sent
	if _, err := e.Replay(t.Context(), "s", first, collect(&got)); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("replayed %d events, want %d in order", len(got), len(want))
	}
}

func TestAReplayFromATrimmedEventIsAGap(t *testing.T) {
	r := startRedis(t)
	st := storeState(t, r, Options{})
	e, cnt := eventsOf(st, &EventOptions{MaxEventsPerStream: 10})
	first := mustAppend(t, e, "s", "g", note1)
	var last string
	// MAXLEN ~ trims whole nodes of 100 entries: 300 events trim the first.
	for range 300 {
		last = mustAppend(t, e, "s", "g", note2)
	}
	n, err := r.Int("XLEN", "test:ev:s:g")
	if err != nil || n >= 300 || n < 10 {
		t.Fatalf("XLEN after 300 events with MaxEventsPerStream 10: %d %v", n, err)
	}
	var got []sent
	st2, err := e.Replay(t.Context(), "s", first, collect(&got))
	if !errors.Is(err, streamable.ErrUnknownEvent) || len(got) != 0 {
		t.Fatalf("Replay from a trimmed event: stream %q, %d sent, %v; want ErrUnknownEvent and nothing sent", st2, len(got), err)
	}
	if cnt.gaps.Load() != 1 {
		t.Fatalf("gaps counted: %d, want 1", cnt.gaps.Load())
	}
	if _, err := e.Replay(t.Context(), "s", last, collect(&got)); err != nil || len(got) != 0 {
		t.Fatalf("Replay from the last event: %v %v", got, err)
	}
}

func TestAReplayOfAStreamThatExpiredIsAGap(t *testing.T) {
	r := startRedis(t)
	e := storeState(t, r, Options{}).Events(nil)
	id := mustAppend(t, e, "s", "g", note1)
	mustAppend(t, e, "s", "g", note2)
	// An expiry in the past is Redis expiring the key now.
	if _, err := r.Do("PEXPIREAT", "test:ev:s:g", "1"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Replay(t.Context(), "s", id, collect(new([]sent))); !errors.Is(err, streamable.ErrUnknownEvent) {
		t.Fatalf("Replay of an expired stream: %v, want ErrUnknownEvent", err)
	}
}

func TestAppendKeepsTheStreamAndTheSessionIndexForRetain(t *testing.T) {
	r := startRedis(t)
	e := storeState(t, r, Options{}).Events(&EventOptions{Retain: 90 * time.Second})
	mustAppend(t, e, "s", "g", note1)
	for _, k := range []string{"test:ev:s:g", "test:evs:s"} {
		if ms, err := r.Int("PTTL", k); err != nil || ms <= 80_000 || ms > 90_000 {
			t.Fatalf("PTTL %s after an append with Retain 90 s: %d %v", k, ms, err)
		}
	}
	// Each append counts Retain again, from itself.
	for _, k := range []string{"test:ev:s:g", "test:evs:s"} {
		if _, err := r.Do("PEXPIRE", k, "5000"); err != nil {
			t.Fatal(err)
		}
	}
	mustAppend(t, e, "s", "g", note2)
	for _, k := range []string{"test:ev:s:g", "test:evs:s"} {
		if ms, err := r.Int("PTTL", k); err != nil || ms <= 80_000 {
			t.Fatalf("PTTL %s after a second append: %d %v, want Retain again", k, ms, err)
		}
	}
	// The default is 5 min.
	d := storeState(t, r, Options{Prefix: "dflt:"}).Events(nil)
	mustAppend(t, d, "s", "g", note1)
	if ms, err := r.Int("PTTL", "dflt:ev:s:g"); err != nil || ms <= 290_000 || ms > 300_000 {
		t.Fatalf("PTTL with the default Retain: %d %v", ms, err)
	}
}

// A session's index names the streams still in Redis, not every stream
// it ever had: an append drops the members whose last append is older
// than Retain (regression: the index kept a member per POST stream for as
// long as the session was active, growing without bound).
func TestASessionsIndexForgetsStreamsOlderThanRetain(t *testing.T) {
	r := startRedis(t)
	e := storeState(t, r, Options{}).Events(&EventOptions{Retain: 90 * time.Second})
	mustAppend(t, e, "s", "old", note1)
	// As if "old" had last been appended to an hour ago (its key expired
	// long since).
	if _, err := r.Do("ZADD", "test:evs:s", "1", "old"); err != nil {
		t.Fatal(err)
	}
	mustAppend(t, e, "s", "new", note1)
	if n, err := r.Int("ZCARD", "test:evs:s"); err != nil || n != 1 {
		t.Fatalf("the index holds %d members (%v), want only the live stream", n, err)
	}
	if _, err := r.Int("ZSCORE", "test:evs:s", "new"); err != nil {
		t.Fatalf("the live stream is not in the index: %v", err)
	}
}

func TestAnEventIDThatNamesNothingOfTheSessionIsUnknown(t *testing.T) {
	r := startRedis(t)
	st := storeState(t, r, Options{})
	e, cnt := eventsOf(st, nil)
	id := mustAppend(t, e, "s", "g", note1)
	mustAppend(t, e, "s", "g", note2)
	_, xid, _ := parseEventID(id)
	for _, bad := range []string{
		"", "g", "g_", "_" + xid, "g_" + xid + "x", "g_0" + xid, "g_-1-0", "g_1", "g_1-", "g_+", "g_(" + xid,
		"other_" + xid, // a stream the session does not have
		"g_1-0",        // an entry the stream does not have
		"g\n_" + xid,   // not a stream id
		strings.Repeat("g", 300) + "_" + xid,
	} {
		if _, err := e.Replay(t.Context(), "s", bad, collect(new([]sent))); !errors.Is(err, streamable.ErrUnknownEvent) {
			t.Errorf("Replay(%q): %v, want ErrUnknownEvent", bad, err)
		}
	}
	// The id is the session's: the same stream of another session, or a
	// session id that cannot be, is unknown.
	for _, session := range []string{"t", "", "s:g", "s t"} {
		if _, err := e.Replay(t.Context(), session, id, collect(new([]sent))); !errors.Is(err, streamable.ErrUnknownEvent) {
			t.Errorf("Replay in session %q: %v, want ErrUnknownEvent", session, err)
		}
	}
	if st.Stats().RedisErrors != 0 {
		t.Fatalf("bad ids cost Redis errors: %d", st.Stats().RedisErrors)
	}
	if cnt.gaps.Load() == 0 {
		t.Fatal("no gap counted")
	}
}

func TestAnErrorFromSendEndsTheReplay(t *testing.T) {
	r := startRedis(t)
	e := storeState(t, r, Options{}).Events(nil)
	id := mustAppend(t, e, "s", "g", "")
	mustAppend(t, e, "s", "g", note1)
	mustAppend(t, e, "s", "g", note2)
	boom := errors.New("boom")
	calls := 0
	_, err := e.Replay(t.Context(), "s", id, func(string, []byte) error { calls++; return boom })
	if !errors.Is(err, boom) || calls != 1 {
		t.Fatalf("Replay with a failing send: %v after %d calls, want boom after 1", err, calls)
	}
}

func TestEndStreamForgetsOneStreamAndEndSessionEveryStreamOfTheSession(t *testing.T) {
	r := startRedis(t)
	e := storeState(t, r, Options{}).Events(nil)
	g := mustAppend(t, e, "s", "g", note1)
	mustAppend(t, e, "s", "g", note2)
	p := mustAppend(t, e, "s", "p1", note1)
	mustAppend(t, e, "s", "p1", resp)
	q := mustAppend(t, e, "s", "p2", note1)
	mustAppend(t, e, "s", "p2", resp)
	other := mustAppend(t, e, "t", "g", note1)
	mustAppend(t, e, "t", "g", note2)

	if err := e.EndStream(t.Context(), "s", "p1"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Replay(t.Context(), "s", p, collect(new([]sent))); !errors.Is(err, streamable.ErrUnknownEvent) {
		t.Fatalf("Replay of an ended stream: %v", err)
	}
	// What is left is an empty stream, briefly, and still in the index for
	// EndSession.
	if n, err := r.Int("XLEN", "test:ev:s:p1"); err != nil || n != 0 {
		t.Fatalf("XLEN of an ended stream: %d %v", n, err)
	}
	if ms, err := r.Int("PTTL", "test:ev:s:p1"); err != nil || ms <= 0 || ms > tombstone.Milliseconds() {
		t.Fatalf("PTTL of an ended stream: %d %v, want at most %v", ms, err, tombstone)
	}
	if _, err := r.Int("ZSCORE", "test:evs:s", "p1"); err != nil {
		t.Fatalf("the ended stream is not in the session's index: %v", err)
	}
	var got []sent
	if _, err := e.Replay(t.Context(), "s", q, collect(&got)); err != nil || len(got) != 1 {
		t.Fatalf("another stream after EndStream: %v %v", got, err)
	}

	if err := e.EndSession(t.Context(), "s"); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{g, q} {
		if _, err := e.Replay(t.Context(), "s", id, collect(new([]sent))); !errors.Is(err, streamable.ErrUnknownEvent) {
			t.Fatalf("Replay(%q) after EndSession: %v", id, err)
		}
	}
	if keys := keysMatching(t, r, "test:ev*:s*"); len(keys) != 0 {
		t.Fatalf("keys of the ended session left: %q", keys)
	}
	got = nil
	if _, err := e.Replay(t.Context(), "t", other, collect(&got)); err != nil || len(got) != 1 {
		t.Fatalf("another session after EndSession: %v %v", got, err)
	}
	// Ending what is not there is no error.
	if err := e.EndSession(t.Context(), "s"); err != nil {
		t.Fatal(err)
	}
	if err := e.EndStream(t.Context(), "nobody", "g"); err != nil {
		t.Fatal(err)
	}
}

func TestEndSessionDeletesMoreStreamsThanOneDel(t *testing.T) {
	r := startRedis(t)
	e := storeState(t, r, Options{}).Events(nil)
	for i := range delBatch + 3 {
		mustAppend(t, e, "s", "p"+strconv.Itoa(i), note1)
	}
	if err := e.EndSession(t.Context(), "s"); err != nil {
		t.Fatal(err)
	}
	if n := dbsize(t, r); n != 0 {
		t.Fatalf("%d keys left after EndSession", n)
	}
}

func TestAnEventLargerThanMaxEventBytesIsRefusedCountedAndLogged(t *testing.T) {
	r := startRedis(t)
	var logs syncBuffer
	st := storeState(t, r, Options{Logger: logTo(&logs)})
	e, cnt := eventsOf(st, &EventOptions{MaxEventBytes: 64})
	if _, err := e.Append(t.Context(), "s", "g", bytes.Repeat([]byte("x"), 64)); err != nil {
		t.Fatalf("an event of MaxEventBytes: %v", err)
	}
	_, err := e.Append(t.Context(), "s", "g", bytes.Repeat([]byte("x"), 65))
	if err == nil || !strings.Contains(err.Error(), "MaxEventBytes") {
		t.Fatalf("an event past MaxEventBytes: %v", err)
	}
	if cnt.tooLarge.Load() != 1 || !strings.Contains(logs.String(), "max_event_bytes=64") {
		t.Fatalf("too large: counted %d, logged %q", cnt.tooLarge.Load(), logs.String())
	}
	if n, _ := r.Int("XLEN", "test:ev:s:g"); n != 1 {
		t.Fatalf("XLEN %d: the refused event was stored", n)
	}
}

func TestAppendRefusesIDsTheHandlerCannotHaveMade(t *testing.T) {
	r := startRedis(t)
	e := storeState(t, r, Options{}).Events(nil)
	for _, c := range [][2]string{{"", "g"}, {"s", ""}, {"a:b", "g"}, {"s", "g h"}, {"s", "g\x00"}, {strings.Repeat("s", 257), "g"}} {
		if _, err := e.Append(t.Context(), c[0], c[1], []byte(note1)); err == nil {
			t.Errorf("Append(%q, %q) accepted", c[0], c[1])
		}
	}
	if n := dbsize(t, r); n != 0 {
		t.Fatalf("%d keys written for refused ids", n)
	}
}

// following waits until e has n Follow calls running.
func following(t *testing.T, cnt *sessionCounters, n int64) {
	t.Helper()
	eventually(t, 5*time.Second, fmt.Sprintf("%d follows running", n), func() bool { return cnt.following.Load() == n })
}

type followResult struct {
	got []sent
	err error
}

func follow(ctx context.Context, e streamable.EventFollower, session, stream, after string) chan followResult {
	done := make(chan followResult, 1)
	go func() {
		var got []sent
		err := e.Follow(ctx, session, stream, after, collect(&got))
		done <- followResult{got, err}
	}()
	return done
}

func wait(t *testing.T, done chan followResult) followResult {
	t.Helper()
	select {
	case res := <-done:
		return res
	case <-time.After(10 * time.Second):
		t.Fatal("Follow did not return")
		return followResult{}
	}
}

func TestFollowSendsWhatAnotherInstanceAppendsAndStopsAtTheResponse(t *testing.T) {
	r := startRedis(t)
	producer := storeState(t, r, Options{}).Events(nil)
	e, cnt := eventsOf(storeState(t, r, Options{}), &EventOptions{FollowWait: 50 * time.Millisecond})
	prime := mustAppend(t, producer, "s", "p1", "")
	done := follow(t.Context(), e, "s", "p1", prime)
	following(t, cnt, 1)
	id1 := mustAppend(t, producer, "s", "p1", note1)
	id2 := mustAppend(t, producer, "s", "p1", note2)
	id3 := mustAppend(t, producer, "s", "p1", resp)
	mustAppend(t, producer, "s", "p1", note1) // after the response: not the follower's
	res := wait(t, done)
	want := []sent{{id1, note1}, {id2, note2}, {id3, resp}}
	if res.err != nil || fmt.Sprint(res.got) != fmt.Sprint(want) {
		t.Fatalf("Follow: %v %v, want %v and nil", res.got, res.err, want)
	}
	following(t, cnt, 0) // the read that woke it ends just after it hands over
}

func TestFollowStopsAtAnErrorResponseAndSendsWhatWasThereFirst(t *testing.T) {
	r := startRedis(t)
	e := storeState(t, r, Options{}).Events(&EventOptions{FollowWait: 50 * time.Millisecond})
	prime := mustAppend(t, e, "s", "p1", "")
	id1 := mustAppend(t, e, "s", "p1", note1)
	const errResp = `{"jsonrpc":"2.0","id":"x","error":{"code":-32603,"message":"no"}}`
	id2 := mustAppend(t, e, "s", "p1", errResp)
	res := wait(t, follow(t.Context(), e, "s", "p1", prime))
	if want := []sent{{id1, note1}, {id2, errResp}}; res.err != nil || fmt.Sprint(res.got) != fmt.Sprint(want) {
		t.Fatalf("Follow: %v %v, want %v", res.got, res.err, want)
	}
	// A server request (id and method) is no response: Follow goes on.
	e2 := storeState(t, r, Options{Prefix: "req:"}).Events(&EventOptions{FollowWait: 50 * time.Millisecond})
	ctx, cancel := context.WithCancel(t.Context())
	got := make(chan string, 4)
	done := make(chan error, 1)
	go func() {
		done <- e2.Follow(ctx, "s", "p1", "", func(_ string, data []byte) error { got <- string(data); return nil })
	}()
	const req = `{"jsonrpc":"2.0","id":1,"method":"elicitation/create","params":{}}`
	mustAppend(t, e2, "s", "p1", req)
	if d := <-got; d != req {
		t.Fatalf("followed %q", d)
	}
	mustAppend(t, e2, "s", "p1", note1)
	if d := <-got; d != note1 {
		t.Fatalf("followed %q after the server request, want the next event", d)
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Follow past a server request: %v", err)
	}
}

func TestFollowReturnsOnceItsContextEnds(t *testing.T) {
	r := startRedis(t)
	e, cnt := eventsOf(storeState(t, r, Options{}), &EventOptions{FollowWait: 50 * time.Millisecond})
	prime := mustAppend(t, e, "s", "g", "")
	ctx, cancel := context.WithCancel(t.Context())
	done := follow(ctx, e, "s", "g", prime)
	following(t, cnt, 1)
	cancel()
	if res := wait(t, done); !errors.Is(res.err, context.Canceled) {
		t.Fatalf("Follow after its context ended: %v", res.err)
	}
	following(t, cnt, 0)
}

// A blocked XREAD does not end with its context: Follow does not wait
// for it, and the read keeps the follow's slot until it ends.
func TestFollowReturnsBeforeItsBlockedReadEnds(t *testing.T) {
	r := startRedis(t)
	e, cnt := eventsOf(storeState(t, r, Options{}), &EventOptions{FollowWait: 3 * time.Second})
	prime := mustAppend(t, e, "s", "g", "")
	ctx, cancel := context.WithCancel(t.Context())
	done := follow(ctx, e, "s", "g", prime)
	eventually(t, 5*time.Second, "Follow blocks in XREAD", func() bool { return blockedClients(t, r) == 1 })
	cancel()
	if res := wait(t, done); !errors.Is(res.err, context.Canceled) {
		t.Fatalf("Follow after its context ended: %v", res.err)
	}
	if blockedClients(t, r) != 1 || cnt.following.Load() != 1 {
		t.Fatalf("Follow waited for its read to end (blocked clients %d, follows counted %d)", blockedClients(t, r), cnt.following.Load())
	}
	following(t, cnt, 0)
}

func TestAFollowEndsWhenItsStateCloses(t *testing.T) {
	r := startRedis(t)
	st := storeState(t, r, Options{})
	e, _ := eventsOf(st, &EventOptions{FollowWait: 200 * time.Millisecond})
	prime := mustAppend(t, e, "s", "g", "")
	done := follow(t.Context(), e, "s", "g", prime)
	eventually(t, 5*time.Second, "Follow blocks in XREAD", func() bool { return blockedClients(t, r) == 1 })
	st.Close()
	if res := wait(t, done); !errors.Is(res.err, errClosed) {
		t.Fatalf("Follow after Close: %v", res.err)
	}
	if n := blockedClients(t, r); n != 0 {
		t.Fatalf("%d reads still blocked after Close", n)
	}
}

// blockedClients is INFO clients' blocked_clients.
func blockedClients(t *testing.T, r *redisServer) int {
	t.Helper()
	info, err := r.Do("INFO", "clients")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(info, "\r\n") {
		if v, ok := strings.CutPrefix(line, "blocked_clients:"); ok {
			n, err := strconv.Atoi(v)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatalf("no blocked_clients in %q", info)
	return 0
}

func TestFollowFromATrimmedOrUnknownEventIsAGap(t *testing.T) {
	r := startRedis(t)
	e := storeState(t, r, Options{}).Events(&EventOptions{MaxEventsPerStream: 10, FollowWait: 50 * time.Millisecond})
	first := mustAppend(t, e, "s", "g", note1)
	for range 300 {
		mustAppend(t, e, "s", "g", note2)
	}
	for _, after := range []string{first, "other_1-0", "g_x", "g_1-0"} {
		if res := wait(t, follow(t.Context(), e, "s", "g", after)); !errors.Is(res.err, streamable.ErrUnknownEvent) || len(res.got) != 0 {
			t.Errorf("Follow after %q: %d sent, %v; want ErrUnknownEvent", after, len(res.got), res.err)
		}
	}
}

func TestAFollowedStreamThatExpiresIsAGap(t *testing.T) {
	r := startRedis(t)
	e, cnt := eventsOf(storeState(t, r, Options{}), &EventOptions{FollowWait: 50 * time.Millisecond})
	prime := mustAppend(t, e, "s", "g", "")
	done := follow(t.Context(), e, "s", "g", prime)
	following(t, cnt, 1)
	if _, err := r.Do("PEXPIREAT", "test:ev:s:g", "1"); err != nil {
		t.Fatal(err)
	}
	if res := wait(t, done); !errors.Is(res.err, streamable.ErrUnknownEvent) {
		t.Fatalf("Follow of a stream that expired: %v", res.err)
	}
}

func TestFollowsPastMaxFollowsAreRefusedCountedAndLogged(t *testing.T) {
	r := startRedis(t)
	var logs syncBuffer
	e, cnt := eventsOf(storeState(t, r, Options{Logger: logTo(&logs)}), &EventOptions{MaxFollows: 1, FollowWait: 50 * time.Millisecond})
	prime := mustAppend(t, e, "s", "g", "")
	ctx, cancel := context.WithCancel(t.Context())
	done := follow(ctx, e, "s", "g", prime)
	following(t, cnt, 1)
	err := e.Follow(t.Context(), "s", "g", prime, collect(new([]sent)))
	if !errors.Is(err, ErrTooManyFollows) {
		t.Fatalf("a Follow past MaxFollows: %v", err)
	}
	if cnt.followsRefused.Load() != 1 || !strings.Contains(logs.String(), "max_follows=1") {
		t.Fatalf("refused follows: counted %d, logged %q", cnt.followsRefused.Load(), logs.String())
	}
	cancel()
	wait(t, done)
	following(t, cnt, 0) // its blocked read has ended too
	// The slot is free again.
	ctx, cancel = context.WithCancel(t.Context())
	defer cancel()
	done = follow(ctx, e, "s", "g", prime)
	following(t, cnt, 1)
	cancel()
	if res := wait(t, done); !errors.Is(res.err, context.Canceled) {
		t.Fatalf("a Follow once the first ended: %v", res.err)
	}
}

func TestMaxFollowsDefaultsToHalfTheClientsPool(t *testing.T) {
	r := startRedis(t)
	c := redis.NewClient(&redis.Options{Addr: r.Addr(), PoolSize: 12})
	t.Cleanup(func() { c.Close() })
	st := New(c, &Options{Logger: quiet})
	t.Cleanup(func() { st.Close() })
	if e, _ := eventsOf(st, nil); e.opts.MaxFollows != 6 {
		t.Fatalf("MaxFollows with PoolSize 12: %d, want 6", e.opts.MaxFollows)
	}
	var logs syncBuffer
	st2 := New(c, &Options{Logger: logTo(&logs)})
	t.Cleanup(func() { st2.Close() })
	if e, _ := eventsOf(st2, &EventOptions{MaxFollows: 12}); e.opts.MaxFollows != 12 || !strings.Contains(logs.String(), "pool_size=12") {
		t.Fatalf("MaxFollows 12 with PoolSize 12: %d, logged %q", e.opts.MaxFollows, logs.String())
	}
}

func TestTheEventStoreFailsWithinOpTimeoutWhenRedisIsDownWithoutItsPassword(t *testing.T) {
	r := startRedis(t)
	addr := r.Addr()
	r.Stop()
	opt, err := redis.ParseURL("redis://agent:s3cr3t-pw@" + addr + "/0")
	if err != nil {
		t.Fatal(err)
	}
	opt.ContextTimeoutEnabled, opt.MaxRetries, opt.DialerRetries = true, 1, 1
	c := redis.NewClient(opt)
	t.Cleanup(func() { c.Close() })
	st := New(c, &Options{Logger: quiet, OpTimeout: 300 * time.Millisecond})
	t.Cleanup(func() { st.Close() })
	e := st.Events(&EventOptions{FollowWait: 50 * time.Millisecond})
	ss := st.Sessions()
	ctx := t.Context()
	start := time.Now()
	var errs []error
	_, err = e.Append(ctx, "s", "g", []byte(note1))
	errs = append(errs, err)
	_, err = e.Replay(ctx, "s", "g_1-0", collect(new([]sent)))
	errs = append(errs, err)
	errs = append(errs, e.Follow(ctx, "s", "g", "g_1-0", collect(new([]sent))))
	errs = append(errs, e.EndStream(ctx, "s", "g"), e.EndSession(ctx, "s"))
	errs = append(errs, ss.Save(ctx, &streamable.SessionRecord{ID: "s", Version: "2025-11-25"}, time.Minute))
	_, err = ss.Load(ctx, "s")
	errs = append(errs, err)
	_, err = ss.Touch(ctx, "s", time.Minute)
	errs = append(errs, err, ss.Delete(ctx, "s"))
	for i, err := range errs {
		if err == nil {
			t.Fatalf("call %d succeeded with Redis down", i)
		}
		if errors.Is(err, streamable.ErrUnknownEvent) || errors.Is(err, streamable.ErrUnknownSession) {
			t.Fatalf("call %d: an outage reads as unknown: %v", i, err)
		}
		if strings.Contains(err.Error(), "s3cr3t") {
			t.Fatalf("call %d: the password is in the error: %v", i, err)
		}
	}
	if d := time.Since(start); d > time.Duration(len(errs))*2*time.Second {
		t.Fatalf("%d calls took %v with OpTimeout 300 ms", len(errs), d)
	}
	if n := st.Stats().RedisErrors; n < int64(len(errs)) {
		t.Fatalf("RedisErrors %d after %d failed calls", n, len(errs))
	}
}

func TestStreamKeysUseThePrefix(t *testing.T) {
	r := startRedis(t)
	e := storeState(t, r, Options{Prefix: "{fleet}:"}).Events(nil)
	mustAppend(t, e, "s", "g", note1)
	keys := keysMatching(t, r, "*")
	if len(keys) != 2 {
		t.Fatalf("keys %q, want a stream and its session's index", keys)
	}
	for _, k := range keys {
		if !strings.HasPrefix(k, "{fleet}:") {
			t.Fatalf("key %q outside the prefix", k)
		}
	}
}

// Regression: EndStream deleted the stream, and Redis numbers the entries
// of a new stream from its clock: an Append to the same stream id within
// the same millisecond issued an ended event's id again, so a client
// holding the old id would have resumed at a wrong place.
func TestAnAppendRightAfterEndStreamNeverIssuesAnEndedEventsID(t *testing.T) {
	r := startRedis(t)
	e := storeState(t, r, Options{}).Events(nil)
	for round := range 50 {
		stream := "g"
		var old []string
		for range 3 {
			old = append(old, mustAppend(t, e, "s", stream, note1))
		}
		if err := e.EndStream(t.Context(), "s", stream); err != nil {
			t.Fatal(err)
		}
		next := mustAppend(t, e, "s", stream, note2)
		for _, id := range old {
			if id == next {
				t.Fatalf("round %d: id %q issued again after EndStream", round, id)
			}
			if _, err := e.Replay(t.Context(), "s", id, collect(new([]sent))); !errors.Is(err, streamable.ErrUnknownEvent) {
				t.Fatalf("round %d: Replay of an ended event %q: %v", round, id, err)
			}
		}
		if err := e.EndStream(t.Context(), "s", stream); err != nil {
			t.Fatal(err)
		}
	}
}
