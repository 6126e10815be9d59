package streamable_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentwire/agentwire/jsonrpc"
	"github.com/agentwire/agentwire/mcp/streamable"
	"github.com/agentwire/agentwire/mcp/streamable/eventstoretest"
)

func TestMemoryEventsKeepsTheEventStoreContract(t *testing.T) {
	eventstoretest.Run(t, func(t *testing.T) streamable.EventStore { return streamable.NewMemoryEvents(nil) })
}

// The contract's Follow checks pass for a follower that keeps it (a
// MemoryEvents taught to follow), so that a store they fail is at fault.
func TestTheContractsFollowChecksPassForACorrectFollower(t *testing.T) {
	eventstoretest.Run(t, func(t *testing.T) streamable.EventStore { return newFollowing(streamable.NewMemoryEvents(nil)) })
}

// following is a MemoryEvents with Follow: it replays what is stored
// after the last event sent, then waits for the next Append.
type following struct {
	*streamable.MemoryEvents
	mu      sync.Mutex
	changed chan struct{} // closed and replaced by each Append
}

func newFollowing(m *streamable.MemoryEvents) *following {
	return &following{MemoryEvents: m, changed: make(chan struct{})}
}

func (f *following) Append(ctx context.Context, session, stream string, data []byte) (string, error) {
	id, err := f.MemoryEvents.Append(ctx, session, stream, data)
	f.mu.Lock()
	close(f.changed)
	f.changed = make(chan struct{})
	f.mu.Unlock()
	return id, err
}

var errAnswered = errors.New("the stream's response was sent")

func (f *following) Follow(ctx context.Context, session, stream, afterID string, send func(id string, data []byte) error) error {
	last := afterID
	for {
		f.mu.Lock()
		changed := f.changed
		f.mu.Unlock()
		var sendErr error
		_, err := f.Replay(ctx, session, last, func(id string, data []byte) error {
			if sendErr = send(id, data); sendErr != nil {
				return sendErr
			}
			last = id
			if m, err := jsonrpc.Decode(data, nil); err == nil && m.Kind.IsResponse() {
				return errAnswered
			}
			return nil
		})
		switch {
		case errors.Is(err, errAnswered):
			return nil
		case sendErr != nil:
			return sendErr
		case err != nil:
			return err
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// clock is an injected Now: time moves only when the test says.
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

// note is a notification of about n bytes.
func note(tag string, n int) []byte {
	b := eventstoretest.Notification(tag)
	if len(b) >= n {
		return b
	}
	return eventstoretest.Notification(tag + strings.Repeat(".", n-len(b)))
}

func ev(id string, data []byte) eventstoretest.Event {
	return eventstoretest.Event{ID: id, Data: string(data)}
}

// quiet is the logger of stores whose drops a test causes on purpose.
var quiet = slog.New(slog.DiscardHandler)

var (
	mustAppend    = eventstoretest.MustAppend
	mustReplay    = eventstoretest.MustReplay
	mustBeUnknown = eventstoretest.MustBeUnknown
)

// mustBeGap checks that a replay from id is refused as a gap: the id is
// the session's, but an event after it was dropped.
func mustBeGap(t *testing.T, m *streamable.MemoryEvents, session, id string) {
	t.Helper()
	before := m.Stats().Gaps
	mustBeUnknown(t, m, session, id)
	if m.Stats().Gaps != before+1 {
		t.Errorf("Replay(%q, %q) was not counted as a gap: %+v", session, id, m.Stats())
	}
}

func TestMemoryEventsDropsEventsOnceTheyAreRetainOldAndForgetsAStreamIdleAsLong(t *testing.T) {
	clk := newClock()
	m := streamable.NewMemoryEvents(&streamable.MemoryEventsOptions{Retain: time.Minute, Now: clk.Now, Logger: quiet})
	gp := mustAppend(t, m, "s", "g", nil)
	g1 := mustAppend(t, m, "s", "g", note("g1", 0))
	clk.Advance(30 * time.Second)
	g2 := mustAppend(t, m, "s", "g", note("g2", 0))
	clk.Advance(30*time.Second - time.Nanosecond)
	m.Sweep()
	if st := m.Stats(); st.Events != 3 || st.Expired != 0 {
		t.Fatalf("events dropped before they were Retain old: %+v", st)
	}
	clk.Advance(time.Nanosecond)
	if st := m.Stats(); st.Events != 3 {
		t.Fatalf("Stats dropped events: the store drops them as it is used and by Sweep: %+v", st)
	}
	m.Sweep()
	if st := m.Stats(); st.Events != 1 || st.Expired != 2 || st.Dropped != 2 || st.Evicted != 0 || st.Streams != 1 {
		t.Fatalf("after Sweep at Retain: %+v, want the priming event and g1 expired", st)
	}
	mustBeGap(t, m, "s", gp)
	// Nothing after g1 is lost: a client that had it resumes.
	mustReplay(t, m, "s", g1, "g", ev(g2, note("g2", 0)))

	// Replay drops what has aged without a Sweep; the stream, idle for
	// Retain, is forgotten with its last event, and the session with it.
	clk.Advance(30 * time.Second)
	mustBeUnknown(t, m, "s", g2)
	if st := m.Stats(); st.Events != 0 || st.Streams != 0 || st.Sessions != 0 || st.Bytes != 0 || st.Expired != 3 {
		t.Fatalf("after everything expired: %+v", st)
	}
}

func TestMemoryEventsAppendDropsAgedEventsOfOtherSessions(t *testing.T) {
	clk := newClock()
	m := streamable.NewMemoryEvents(&streamable.MemoryEventsOptions{Retain: time.Minute, Now: clk.Now, Logger: quiet})
	mustAppend(t, m, "old", "g", note("x", 0))
	clk.Advance(time.Minute)
	mustAppend(t, m, "new", "g", note("y", 0))
	if st := m.Stats(); st.Events != 1 || st.Sessions != 1 || st.Expired != 1 {
		t.Fatalf("an Append left aged events in place: %+v", st)
	}
}

func TestMemoryEventsEvictsASessionsAnsweredStreamsBeforeItsLiveOnesThenTheOldest(t *testing.T) {
	m := streamable.NewMemoryEvents(&streamable.MemoryEventsOptions{MaxSessionBytes: 16 << 10, Logger: quiet})
	other := mustAppend(t, m, "other", "g", nil)
	otherEv := ev(mustAppend(t, m, "other", "g", note("other", 0)), note("other", 0))

	// The oldest events are the live stream's; then a stream answered.
	gp := mustAppend(t, m, "s", "g", nil)
	live := []eventstoretest.Event{ev(mustAppend(t, m, "s", "g", note("g1", 1000)), note("g1", 1000))}
	pp := mustAppend(t, m, "s", "p", nil)
	p1 := ev(mustAppend(t, m, "s", "p", note("p1", 1000)), note("p1", 1000))
	answer := eventstoretest.Result("1", strings.Repeat("r", 1000))
	p2 := ev(mustAppend(t, m, "s", "p", answer), answer)

	// The session's events are to go in this order: the answered
	// stream's (pp, p1, p2), then the live one's, oldest first (gp, then
	// live[0], live[1], …). After each Append, the first Evicted of them
	// are gone and nothing else.
	for step := 0; m.Stats().Evicted < 8; step++ {
		if step > 100 {
			t.Fatal("nothing evicted over MaxSessionBytes")
		}
		tag := fmt.Sprint("g", step+2)
		live = append(live, ev(mustAppend(t, m, "s", "g", note(tag, 1000)), note(tag, 1000)))
		e := int(m.Stats().Evicted)
		switch {
		case e < 2: // at most the priming event: nothing lost
			mustReplay(t, m, "s", pp, "p", p1, p2)
		case e == 2:
			mustBeGap(t, m, "s", pp)
			mustReplay(t, m, "s", p1.ID, "p", p2)
		default:
			mustBeGap(t, m, "s", p1.ID)
			mustReplay(t, m, "s", p2.ID, "p") // its events are gone; the record remains
		}
		if k := e - 4; k < 1 { // live lost at most its priming event
			mustReplay(t, m, "s", gp, "g", live...)
		} else {
			mustBeGap(t, m, "s", gp)
			mustReplay(t, m, "s", live[k-1].ID, "g", live[k:]...)
			if k >= 2 {
				mustBeGap(t, m, "s", live[k-2].ID)
			}
		}
		if t.Failed() {
			t.Fatalf("after %d evictions: %+v", e, m.Stats())
		}
	}
	if st := m.Stats(); st.Bytes > 16<<10+1024 { // "other" holds a little besides
		t.Errorf("the session is over MaxSessionBytes: %+v", st)
	}
	// The other session lost nothing.
	mustReplay(t, m, "other", other, "g", otherEv)
}

func TestMemoryEventsPastMaxBytesEvictsTheOldestEventsOfAnySession(t *testing.T) {
	const maxBytes = 64 << 10
	m := streamable.NewMemoryEvents(&streamable.MemoryEventsOptions{MaxBytes: maxBytes, MaxSessionBytes: 32 << 10, Logger: quiet})
	sessions := []string{"a", "b", "c"}
	first := map[string]string{}
	for _, s := range sessions {
		first[s] = mustAppend(t, m, s, "g", nil)
	}
	var second string
	for i := 0; m.Stats().Evicted < 2; i++ {
		if i > 300 {
			t.Fatal("nothing evicted over MaxBytes")
		}
		id := mustAppend(t, m, sessions[i%3], "g", note(fmt.Sprint(i), 1000))
		if i == 0 {
			second = id
		}
		if st := m.Stats(); st.Bytes > maxBytes {
			t.Fatalf("the store is over MaxBytes: %+v", st)
		}
	}
	// The two oldest events are a's priming event and first notification.
	mustBeGap(t, m, "a", first["a"])
	if _, got, err := eventstoretest.ReplayAll(t.Context(), m, "a", second); err != nil || len(got) == 0 {
		t.Errorf("a replay after the evicted events: %v, %d events", err, len(got))
	}
	for _, s := range []string{"b", "c"} {
		if _, _, err := eventstoretest.ReplayAll(t.Context(), m, s, first[s]); err != nil {
			t.Errorf("session %s lost events, though a's were older: %v", s, err)
		}
	}
}

// An event that cannot fit in its session is given an id, so that it is
// delivered live and a client can resume after it, but not kept: a replay
// from before it is a gap, never a silent skip.
func TestMemoryEventsGivesAnEventTooLargeToKeepAnIDAndKeepsNothingBeforeIt(t *testing.T) {
	var logs syncBuffer
	m := streamable.NewMemoryEvents(&streamable.MemoryEventsOptions{MaxSessionBytes: 4 << 10,
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	gp := mustAppend(t, m, "s", "g", nil)
	g1 := mustAppend(t, m, "s", "g", note("g1", 0))
	big := mustAppend(t, m, "s", "g", note("big", 8<<10))
	st := m.Stats()
	if st.TooLarge != 1 || st.Evicted != 3 || st.Events != 0 || st.Bytes > 4<<10 {
		t.Fatalf("after an event larger than MaxSessionBytes: %+v", st)
	}
	mustBeGap(t, m, "s", gp)
	mustBeGap(t, m, "s", g1)
	mustReplay(t, m, "s", big, "g")
	g2 := mustAppend(t, m, "s", "g", note("g2", 0))
	mustReplay(t, m, "s", big, "g", ev(g2, note("g2", 0)))
	if !strings.Contains(logs.String(), "larger than MaxSessionBytes") {
		t.Errorf("no log line for the event not kept: %q", logs.String())
	}
}

// MaxSessionBytes is never more than MaxBytes: an event over MaxBytes is
// too large to keep, not kept by evicting everything else and then
// exceeding MaxBytes anyway.
func TestMemoryEventsHoldsMaxBytesWhenMaxSessionBytesIsLarger(t *testing.T) {
	m := streamable.NewMemoryEvents(&streamable.MemoryEventsOptions{MaxBytes: 8 << 10, MaxSessionBytes: 1 << 20, Logger: quiet})
	mustAppend(t, m, "other", "g", note("small", 0))
	mustAppend(t, m, "s", "g", note("big", 10<<10))
	if st := m.Stats(); st.Bytes > 8<<10 || st.TooLarge != 1 || st.Events != 1 {
		t.Fatalf("after an event over MaxBytes: %+v", st)
	}
}

func TestMemoryEventsDefaultsToOneMiBPerSessionSixteenInAllAndFiveMinutes(t *testing.T) {
	clk := newClock()
	m := streamable.NewMemoryEvents(&streamable.MemoryEventsOptions{Now: clk.Now, Logger: quiet})
	kb := note("x", 1024)
	for range 1100 {
		mustAppend(t, m, "s", "g", kb)
	}
	if st := m.Stats(); st.Bytes > 1<<20 || st.Bytes < 1<<20-2048 || st.Evicted == 0 {
		t.Fatalf("one session after 1100 KiB: %+v, want about 1 MiB held", st)
	}
	for i := range 20 {
		for range 1000 {
			mustAppend(t, m, fmt.Sprint("s", i), "g", kb)
		}
	}
	if st := m.Stats(); st.Bytes > 16<<20 || st.Bytes < 16<<20-2048 {
		t.Fatalf("twenty sessions of about 1 MiB: %+v, want about 16 MiB held", st)
	}
	clk.Advance(5*time.Minute - time.Nanosecond)
	m.Sweep()
	if st := m.Stats(); st.Expired != 0 {
		t.Fatalf("expired before 5 min: %+v", st)
	}
	clk.Advance(time.Nanosecond)
	m.Sweep()
	if st := m.Stats(); st.Events != 0 || st.Bytes != 0 {
		t.Fatalf("held after 5 min: %+v", st)
	}
}

// Ids of a forgotten stream are never issued again: a counter restarting
// at the stream's first number would hand a client's old Last-Event-ID a
// place in the new events, and resume it silently past what it missed.
func TestMemoryEventsNeverReissuesTheIDsOfAStreamItForgot(t *testing.T) {
	clk := newClock()
	m := streamable.NewMemoryEvents(&streamable.MemoryEventsOptions{Retain: time.Minute, Now: clk.Now, Logger: quiet})
	old := map[string]bool{}
	for range 3 {
		old[mustAppend(t, m, "s", "g", nil)] = true
		old[mustAppend(t, m, "s", "g", note("n", 0))] = true
	}
	clk.Advance(time.Minute) // forgotten for age
	var again []string
	for range 6 {
		id := mustAppend(t, m, "s", "g", note("again", 0))
		if old[id] {
			t.Fatalf("id %q issued again after its stream was forgotten", id)
		}
		again = append(again, id)
	}
	for id := range old {
		mustBeUnknown(t, m, "s", id)
	}
	mustReplay(t, m, "s", again[4], "g", ev(again[5], note("again", 0)))
}

// A session's ids name nothing in another session, not even in its stream
// of the same name with as many events: a Last-Event-ID from another
// session (a client mixing up its sessions) is refused, never replayed
// from a place in this one.
func TestMemoryEventsIDsOfOneSessionNameNoEventOfAnother(t *testing.T) {
	m := streamable.NewMemoryEvents(nil)
	var ofS, ofT []string
	for i := range 5 {
		var data []byte
		if i > 0 {
			data = note(fmt.Sprint(i), 0)
		}
		ofS = append(ofS, mustAppend(t, m, "s", "g", data))
		ofT = append(ofT, mustAppend(t, m, "t", "g", data))
	}
	for i := range ofS {
		mustBeUnknown(t, m, "t", ofS[i])
		mustBeUnknown(t, m, "s", ofT[i])
	}
}

// send may be slow (a client's connection): it is called without the
// store's lock, so that every other session and the handler's own calls
// go on meanwhile.
func TestMemoryEventsReplayCallsSendWithoutHoldingTheStore(t *testing.T) {
	m := streamable.NewMemoryEvents(nil)
	gp := mustAppend(t, m, "s", "g", nil)
	mustAppend(t, m, "s", "g", note("g1", 0))
	mustAppend(t, m, "s", "g", note("g2", 0))
	done := make(chan error, 1)
	go func() {
		_, err := m.Replay(context.Background(), "s", gp, func(string, []byte) error {
			if _, err := m.Append(context.Background(), "s", "g", note("during", 0)); err != nil {
				return err
			}
			_ = m.Stats()
			return m.EndSession(context.Background(), "other")
		})
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Replay deadlocked: send was called with the store locked")
	}
	// The replay sent what was there when it began.
	if st := m.Stats(); st.Replayed != 2 || st.Appended != 5 {
		t.Errorf("Stats after the replay: %+v", st)
	}
}

// Drops for space are logged once per burst (internal/refusal), and the
// log names the limit, never a session or stream id (a session id is
// what a client holds to be served).
func TestMemoryEventsLogsDropsForSpaceOncePerBurstWithoutIDs(t *testing.T) {
	clk := newClock()
	var logs syncBuffer
	m := streamable.NewMemoryEvents(&streamable.MemoryEventsOptions{MaxSessionBytes: 8 << 10, Retain: time.Hour, Now: clk.Now,
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	const session, stream = "secret-session-9f8e7d", "stream-5c4b3a"
	for range 50 {
		mustAppend(t, m, session, stream, note("n", 1000))
	}
	if n := strings.Count(logs.String(), "MaxSessionBytes"); n != 1 {
		t.Fatalf("%d log lines for a burst of drops, want 1:\n%s", n, logs.String())
	}
	clk.Advance(time.Minute) // past the burst window, within Retain
	mustAppend(t, m, session, stream, note("n", 1000))
	out := logs.String()
	if n := strings.Count(out, "MaxSessionBytes"); n != 2 || !strings.Contains(out, "suppressed=") {
		t.Fatalf("after the burst window: %d lines, want 2 with the suppressed count:\n%s", n, out)
	}
	if strings.Contains(out, session) || strings.Contains(out, stream) {
		t.Errorf("the log names a session or stream id:\n%s", out)
	}
}

func TestMemoryEventsCountsWhatItHoldsAndGivesItAllBack(t *testing.T) {
	m := streamable.NewMemoryEvents(nil)
	gp := mustAppend(t, m, "s", "g", nil)
	data := note("x", 500)
	d := mustAppend(t, m, "s", "g", data)
	mustAppend(t, m, "s", "p", []byte{}) // empty data: a priming event too
	mustAppend(t, m, "t", "g", data)
	st := m.Stats()
	if st.Events != 4 || st.Sessions != 2 || st.Streams != 3 || st.Appended != 4 || st.Bytes < int64(2*len(data)) {
		t.Fatalf("Stats: %+v", st)
	}
	mustReplay(t, m, "s", gp, "g", ev(d, data))
	pp := mustAppend(t, m, "s", "p", nil)
	mustReplay(t, m, "s", pp, "p")
	mustBeUnknown(t, m, "s", "g_x")
	if st := m.Stats(); st.Replayed != 1 || st.UnknownIDs != 1 || st.Gaps != 0 {
		t.Fatalf("Stats after the replays: %+v", st)
	}
	for _, s := range []string{"s", "t"} {
		if err := m.EndSession(t.Context(), s); err != nil {
			t.Fatal(err)
		}
	}
	if st := m.Stats(); st.Events != 0 || st.Sessions != 0 || st.Streams != 0 || st.Bytes != 0 || st.Dropped != 0 {
		t.Fatalf("Stats after EndSession: %+v, want nothing held and nothing dropped", st)
	}
}

func TestMemoryEventsFailsOnlyForAnEndedContextOrIDsLargerThanASession(t *testing.T) {
	m := streamable.NewMemoryEvents(&streamable.MemoryEventsOptions{MaxSessionBytes: 4 << 10, Logger: quiet})
	gp := mustAppend(t, m, "s", "g", nil)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := m.Append(ctx, "s", "g", note("x", 0)); !errors.Is(err, context.Canceled) {
		t.Errorf("Append with an ended context: %v", err)
	}
	if _, err := m.Replay(ctx, "s", gp, func(string, []byte) error { return nil }); !errors.Is(err, context.Canceled) {
		t.Errorf("Replay with an ended context: %v", err)
	}
	if err := m.EndStream(ctx, "s", "g"); err != nil {
		t.Errorf("EndStream with an ended context: %v; forgetting needs no time", err)
	}
	if _, err := m.Append(t.Context(), "s", strings.Repeat("x", 8<<10), nil); err == nil || errors.Is(err, streamable.ErrUnknownEvent) {
		t.Errorf("Append with a stream id over MaxSessionBytes: %v", err)
	}
	if st := m.Stats(); st.Events != 0 || st.Bytes != 0 {
		t.Errorf("refused appends left something: %+v", st)
	}
}

// syncBuffer is a bytes.Buffer for a logger written from several goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
