package eventstoretest

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

	"github.com/agentwire/agentwire/mcp/streamable"
)

// patience bounds how long a check waits for a follower to deliver or to
// return before it fails: a guard against a hang, never a wait for a
// timeout the store is meant to hit.
const patience = 10 * time.Second

// Run runs the contract's tests against the stores open makes, each as a
// subtest of t with an empty store of its own. The Follow tests are
// skipped for a store that is not a streamable.EventFollower.
func Run(t *testing.T, open func(t *testing.T) streamable.EventStore) {
	t.Run("IDsAreUniqueWithinASessionAndFitAnSSEIDField", func(t *testing.T) { idsAreUnique(t, open(t)) })
	t.Run("ReplaySendsTheLaterEventsOfTheIDsOwnStreamInOrderWithoutPrimingEvents", func(t *testing.T) { replayInOrder(t, open(t)) })
	t.Run("ReplayFromTheLastEventSendsNothingAndNamesTheStream", func(t *testing.T) { replayFromLast(t, open(t)) })
	t.Run("AnIDTheSessionNeverIssuedIsErrUnknownEvent", func(t *testing.T) { unknownIDs(t, open(t)) })
	t.Run("AnotherSessionsIDIsErrUnknownEvent", func(t *testing.T) { anotherSessionsID(t, open(t)) })
	t.Run("AnErrorFromSendEndsTheReplayAndIsReturned", func(t *testing.T) { sendErrorEnds(t, open(t)) })
	t.Run("EndStreamForgetsThatStreamAndItsIDsAreNeverIssuedAgain", func(t *testing.T) { endStream(t, open(t)) })
	t.Run("EndSessionForgetsEveryStreamOfThatSessionOnly", func(t *testing.T) { endSession(t, open(t)) })
	t.Run("AppendKeepsACopyOfTheData", func(t *testing.T) { appendCopies(t, open(t)) })
	t.Run("ConcurrentAppendsAndReplaysAreSafeAndKeepEachStreamsOrder", func(t *testing.T) { concurrent(t, open(t)) })
	t.Run("FollowSendsTheStreamsLaterEventsUntilItsResponse", func(t *testing.T) { followUntilResponse(t, follower(t, open)) })
	t.Run("FollowOfAnAnsweredStreamReturnsOnceItHasSentTheResponse", func(t *testing.T) { followAnswered(t, follower(t, open)) })
	t.Run("FollowReturnsTheContextsErrorWhenItEnds", func(t *testing.T) { followContext(t, follower(t, open)) })
	t.Run("FollowReturnsTheErrorOfSend", func(t *testing.T) { followSendError(t, follower(t, open)) })
}

// Event is one event as a replay or a follower hands it out.
type Event struct {
	ID   string
	Data string
}

// Notification is a notification message whose params carry tag.
func Notification(tag string) []byte {
	return []byte(`{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":` + quote(tag) + `}}`)
}

// Result is a success response to request id (raw JSON) carrying tag.
func Result(id, tag string) []byte {
	return []byte(`{"jsonrpc":"2.0","id":` + id + `,"result":{"content":[{"type":"text","text":` + quote(tag) + `}]}}`)
}

// ErrorResponse is an error response to request id (raw JSON).
func ErrorResponse(id string) []byte {
	return []byte(`{"jsonrpc":"2.0","id":` + id + `,"error":{"code":-32603,"message":"failed"}}`)
}

// Request is a server request: it has an id, but it is no response.
func Request(id string) []byte {
	return []byte(`{"jsonrpc":"2.0","id":` + id + `,"method":"sampling/createMessage","params":{"messages":[],"maxTokens":1}}`)
}

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// tagOf is the tag Notification put in data ("" for another message).
func tagOf(data string) string {
	var m struct {
		Params struct {
			Data string `json:"data"`
		} `json:"params"`
	}
	_ = json.Unmarshal([]byte(data), &m)
	return m.Params.Data
}

// MustAppend appends data to stream in session, failing t when it cannot.
func MustAppend(t testing.TB, s streamable.EventStore, session, stream string, data []byte) string {
	t.Helper()
	id, err := s.Append(t.Context(), session, stream, data)
	if err != nil {
		t.Fatalf("Append(%q, %q): %v", session, stream, err)
	}
	if id == "" {
		t.Fatalf("Append(%q, %q) returned an empty id", session, stream)
	}
	return id
}

// ReplayAll replays session from lastID and returns what send was given.
func ReplayAll(ctx context.Context, s streamable.EventStore, session, lastID string) (string, []Event, error) {
	var got []Event
	stream, err := s.Replay(ctx, session, lastID, func(id string, data []byte) error {
		got = append(got, Event{id, string(data)})
		return nil
	})
	return stream, got, err
}

// MustReplay replays session from lastID and checks that it sends want,
// and names stream.
func MustReplay(t testing.TB, s streamable.EventStore, session, lastID, stream string, want ...Event) {
	t.Helper()
	gotStream, got, err := ReplayAll(t.Context(), s, session, lastID)
	if err != nil {
		t.Fatalf("Replay(%q, %.40q): %v", session, lastID, err)
	}
	if gotStream != stream {
		t.Errorf("Replay(%q, %.40q) named stream %q, want %q", session, lastID, gotStream, stream)
	}
	if !slices.Equal(got, want) {
		t.Errorf("Replay(%q, %.40q) sent\n%v\nwant\n%v", session, lastID, got, want)
	}
}

// MustBeUnknown checks that replaying session from lastID fails with
// ErrUnknownEvent and sends nothing.
func MustBeUnknown(t testing.TB, s streamable.EventStore, session, lastID string) {
	t.Helper()
	_, got, err := ReplayAll(t.Context(), s, session, lastID)
	if !errors.Is(err, streamable.ErrUnknownEvent) {
		t.Errorf("Replay(%q, %.40q): %v, want ErrUnknownEvent", session, lastID, err)
	}
	if len(got) > 0 {
		t.Errorf("Replay(%q, %.40q) sent %v and then failed", session, lastID, got)
	}
}

// Ids are unique within their session, across its streams, and are
// visible ASCII: the handler writes them in an SSE id field, and the
// client sends them back in a Last-Event-ID header.
func idsAreUnique(t *testing.T, s streamable.EventStore) {
	for _, session := range []string{"s", "t"} {
		seen := map[string]bool{}
		for i := range 4 {
			for _, stream := range []string{"g", "a", "b_c", "b"} {
				var data []byte // the first event of each stream primes it
				if i > 0 {
					data = Notification(fmt.Sprintf("%s-%d", stream, i))
				}
				id := MustAppend(t, s, session, stream, data)
				if seen[id] {
					t.Errorf("session %s: id %q issued twice", session, id)
				}
				seen[id] = true
				if strings.IndexFunc(id, func(r rune) bool { return r < 0x21 || r > 0x7e }) >= 0 {
					t.Errorf("id %q has a character outside visible ASCII", id)
				}
			}
		}
	}
}

// A replay sends the events of lastID's stream after it, in order, each
// with the id Append gave it; never an event of another stream or
// session, never a priming event (one mid-stream included).
func replayInOrder(t *testing.T, s streamable.EventStore) {
	gp := MustAppend(t, s, "s", "g", nil)
	g1 := Event{MustAppend(t, s, "s", "g", Notification("g1")), string(Notification("g1"))}
	ap := MustAppend(t, s, "s", "a", nil)
	g2 := Event{MustAppend(t, s, "s", "g", Request(`"srv-1"`)), string(Request(`"srv-1"`))}
	a1 := Event{MustAppend(t, s, "s", "a", Notification("a1")), string(Notification("a1"))}
	MustAppend(t, s, "t", "g", Notification("another session's g"))
	g3 := Event{MustAppend(t, s, "s", "g", Notification("g3")), string(Notification("g3"))}
	a2 := Event{MustAppend(t, s, "s", "a", Result("7", "a2")), string(Result("7", "a2"))}
	gp2 := MustAppend(t, s, "s", "g", nil)
	g4 := Event{MustAppend(t, s, "s", "g", Notification("g4")), string(Notification("g4"))}

	MustReplay(t, s, "s", gp, "g", g1, g2, g3, g4)
	MustReplay(t, s, "s", g1.ID, "g", g2, g3, g4)
	MustReplay(t, s, "s", g2.ID, "g", g3, g4)
	MustReplay(t, s, "s", gp2, "g", g4)
	MustReplay(t, s, "s", ap, "a", a1, a2)
	MustReplay(t, s, "s", a1.ID, "a", a2)
	// Replaying does not consume: the same replay again sends the same.
	MustReplay(t, s, "s", gp, "g", g1, g2, g3, g4)
}

// A replay from the stream's latest event has nothing to send: it
// succeeds and names the stream, so that the handler can attach the
// connection to it; events appended later are replayed from there.
func replayFromLast(t *testing.T, s streamable.EventStore) {
	MustAppend(t, s, "s", "g", nil)
	g1 := MustAppend(t, s, "s", "g", Notification("g1"))
	ap := MustAppend(t, s, "s", "a_1", nil)
	a1 := MustAppend(t, s, "s", "a_1", Result(`"r"`, "done"))
	MustReplay(t, s, "s", g1, "g")
	MustReplay(t, s, "s", a1, "a_1")
	MustReplay(t, s, "s", ap, "a_1", Event{a1, string(Result(`"r"`, "done"))})
	g2 := MustAppend(t, s, "s", "g", Notification("g2"))
	MustReplay(t, s, "s", g1, "g", Event{g2, string(Notification("g2"))})
	// A priming event as the stream's latest: nothing to send either.
	gp := MustAppend(t, s, "s", "g", nil)
	MustReplay(t, s, "s", gp, "g")
}

// Any id the session did not issue is refused with ErrUnknownEvent, and
// costs nothing: no panic, nothing sent, the store still serves.
func unknownIDs(t *testing.T, s streamable.EventStore) {
	gp := MustAppend(t, s, "s", "g", nil)
	g1 := MustAppend(t, s, "s", "g", Notification("g1"))
	for _, id := range []string{
		"", "x", "g", "_", "__", "no such event", "\x00", "g\r\nx",
		g1 + "x", g1 + "_", "x" + g1, g1 + " ", " " + g1,
		strings.Repeat("9", 64), strings.Repeat("_", 1000) + "1", strings.Repeat("x", 64<<10),
	} {
		MustBeUnknown(t, s, "s", id)
	}
	for _, session := range []string{"", "nobody", "S"} {
		MustBeUnknown(t, s, session, gp)
		MustBeUnknown(t, s, session, g1)
	}
	MustReplay(t, s, "s", gp, "g", Event{g1, string(Notification("g1"))})
}

// Ids are the session's: another session's id names none of this
// session's events, even of a stream of the same name.
func anotherSessionsID(t *testing.T, s streamable.EventStore) {
	var ofS []string
	for i := range 4 {
		ofS = append(ofS, MustAppend(t, s, "s", "g", Notification(fmt.Sprint("s-g", i))))
		ofS = append(ofS, MustAppend(t, s, "s", "a", Notification(fmt.Sprint("s-a", i))))
	}
	tp := MustAppend(t, s, "t", "g", nil)
	issuedT := map[string]bool{tp: true}
	for _, id := range ofS {
		if issuedT[id] {
			continue // ids need only be unique within a session
		}
		MustBeUnknown(t, s, "t", id)
	}
	MustReplay(t, s, "t", tp, "g")
}

// An error from send ends the replay at once and is returned.
func sendErrorEnds(t *testing.T, s streamable.EventStore) {
	gp := MustAppend(t, s, "s", "g", nil)
	var want []Event
	for i := range 3 {
		tag := fmt.Sprint("g", i)
		want = append(want, Event{MustAppend(t, s, "s", "g", Notification(tag)), string(Notification(tag))})
	}
	boom := errors.New("the connection is gone")
	var got []Event
	_, err := s.Replay(t.Context(), "s", gp, func(id string, data []byte) error {
		got = append(got, Event{id, string(data)})
		if len(got) == 2 {
			return boom
		}
		return nil
	})
	if !errors.Is(err, boom) {
		t.Errorf("Replay: %v, want send's error", err)
	}
	if !slices.Equal(got, want[:2]) {
		t.Errorf("send was called with %v, want %v and no more", got, want[:2])
	}
	MustReplay(t, s, "s", gp, "g", want...)
}

// EndStream forgets one stream of one session: its ids are unknown from
// then on, and an Append to the same stream id afterwards issues new ids
// (a client still holding an old one must not resume at a wrong place).
// Ending what does not exist is not an error.
func endStream(t *testing.T, s streamable.EventStore) {
	gp := MustAppend(t, s, "s", "g", nil)
	g1 := MustAppend(t, s, "s", "g", Notification("g1"))
	old := []string{
		MustAppend(t, s, "s", "a", nil),
		MustAppend(t, s, "s", "a", Notification("a1")),
		MustAppend(t, s, "s", "a", Result("1", "a2")),
	}
	tp := MustAppend(t, s, "t", "a", nil)
	t1 := MustAppend(t, s, "t", "a", Notification("t1"))
	if err := s.EndStream(t.Context(), "s", "a"); err != nil {
		t.Fatalf("EndStream: %v", err)
	}
	for _, id := range old {
		MustBeUnknown(t, s, "s", id)
	}
	MustReplay(t, s, "s", gp, "g", Event{g1, string(Notification("g1"))})
	MustReplay(t, s, "t", tp, "a", Event{t1, string(Notification("t1"))})

	// The stream id used again: new ids, and the old ones still unknown.
	np := MustAppend(t, s, "s", "a", nil)
	n1 := MustAppend(t, s, "s", "a", Notification("again"))
	for _, id := range []string{np, n1} {
		if slices.Contains(old, id) || id == gp || id == g1 {
			t.Errorf("id %q issued again after EndStream", id)
		}
	}
	for _, id := range old {
		MustBeUnknown(t, s, "s", id)
	}
	MustReplay(t, s, "s", np, "a", Event{n1, string(Notification("again"))})

	for _, c := range [][2]string{{"s", "nope"}, {"nobody", "a"}} {
		if err := s.EndStream(t.Context(), c[0], c[1]); err != nil {
			t.Errorf("EndStream(%q, %q) of nothing: %v", c[0], c[1], err)
		}
	}
}

// EndSession forgets every stream of the session and nothing of another.
func endSession(t *testing.T, s streamable.EventStore) {
	var ofS []string
	for _, stream := range []string{"g", "a", "b"} {
		ofS = append(ofS, MustAppend(t, s, "s", stream, nil), MustAppend(t, s, "s", stream, Notification(stream)))
	}
	tp := MustAppend(t, s, "t", "g", nil)
	t1 := MustAppend(t, s, "t", "g", Notification("t1"))
	if err := s.EndSession(t.Context(), "s"); err != nil {
		t.Fatalf("EndSession: %v", err)
	}
	for _, id := range ofS {
		MustBeUnknown(t, s, "s", id)
	}
	MustReplay(t, s, "t", tp, "g", Event{t1, string(Notification("t1"))})
	for _, session := range []string{"s", "nobody"} {
		if err := s.EndSession(t.Context(), session); err != nil {
			t.Errorf("EndSession(%q) of nothing: %v", session, err)
		}
	}
}

// Append keeps its own copy: the handler reuses its encoding buffer.
func appendCopies(t *testing.T, s streamable.EventStore) {
	gp := MustAppend(t, s, "s", "g", nil)
	buf := Notification("first")
	first := string(buf)
	id1 := MustAppend(t, s, "s", "g", buf)
	copy(buf, Notification("secnd")) // the same length
	second := string(buf)
	id2 := MustAppend(t, s, "s", "g", buf)
	for i := range buf {
		buf[i] = 'X'
	}
	MustReplay(t, s, "s", gp, "g", Event{id1, first}, Event{id2, second})
}

// Many goroutines append to many streams of many sessions at once, while
// others replay: each replay shows each writer's events in the order it
// appended them, and in the end every event is there exactly once, with
// the id Append gave it.
func concurrent(t *testing.T, s streamable.EventStore) {
	const sessions, streams, writers, each = 8, 3, 2, 25
	ctx := t.Context()
	type key struct{ session, stream int }
	primes := map[key]string{}
	for i := range sessions {
		for j := range streams {
			primes[key{i, j}] = MustAppend(t, s, fmt.Sprint("s", i), fmt.Sprint("st_", j), nil)
		}
	}
	var mu sync.Mutex
	issued := map[string]string{} // data → id
	var writing sync.WaitGroup
	for i := range sessions {
		for j := range streams {
			for w := range writers {
				writing.Go(func() {
					for n := range each {
						data := Notification(fmt.Sprintf("%d/%d/%d/%d", i, j, w, n))
						id, err := s.Append(ctx, fmt.Sprint("s", i), fmt.Sprint("st_", j), data)
						if err != nil {
							t.Errorf("Append: %v", err)
							return
						}
						mu.Lock()
						issued[string(data)] = id
						mu.Unlock()
					}
				})
			}
		}
	}
	// check reads one stream's events: each writer's in its own order,
	// none twice, and (complete) all of them.
	check := func(i, j int, got []Event, complete bool) {
		next := make([]int, writers)
		for _, e := range got {
			var si, sj, w, n int
			if _, err := fmt.Sscanf(tagOf(e.Data), "%d/%d/%d/%d", &si, &sj, &w, &n); err != nil || si != i || sj != j || w < 0 || w >= writers {
				t.Errorf("stream s%d/st_%d replayed an event not its own: %s", i, j, e.Data)
				return
			}
			if n < next[w] {
				t.Errorf("stream s%d/st_%d: writer %d's event %d after its event %d", i, j, w, n, next[w]-1)
				return
			}
			if complete && n != next[w] {
				t.Errorf("stream s%d/st_%d: writer %d's events %d..%d missing", i, j, w, next[w], n-1)
				return
			}
			next[w] = n + 1
		}
		if complete {
			for w, n := range next {
				if n != each {
					t.Errorf("stream s%d/st_%d: writer %d has %d events, want %d", i, j, w, n, each)
				}
			}
		}
	}
	stop := make(chan struct{})
	var reading sync.WaitGroup
	for i := range sessions {
		reading.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				j := i % streams
				_, got, err := ReplayAll(ctx, s, fmt.Sprint("s", i), primes[key{i, j}])
				if err != nil {
					t.Errorf("a Replay during the appends: %v", err)
					return
				}
				check(i, j, got, false)
			}
		})
	}
	writing.Wait()
	close(stop)
	reading.Wait()
	if t.Failed() {
		return
	}
	for i := range sessions {
		seen := map[string]bool{}
		for j := range streams {
			stream, got, err := ReplayAll(ctx, s, fmt.Sprint("s", i), primes[key{i, j}])
			if err != nil || stream != fmt.Sprint("st_", j) {
				t.Fatalf("Replay of s%d/st_%d: %q, %v", i, j, stream, err)
			}
			check(i, j, got, true)
			for _, e := range got {
				if id := issued[e.Data]; id != e.ID {
					t.Errorf("event %s replayed with id %q, Append gave %q", e.Data, e.ID, id)
				}
				if seen[e.ID] {
					t.Errorf("session s%d: id %q issued twice", i, e.ID)
				}
				seen[e.ID] = true
			}
		}
	}
}

// follower is a store from open, or skips t when the store cannot follow.
func follower(t *testing.T, open func(t *testing.T) streamable.EventStore) streamable.EventFollower {
	f, ok := open(t).(streamable.EventFollower)
	if !ok {
		t.Skip("the store is not an EventFollower")
	}
	return f
}

// followed is a Follow running on a goroutine of its own.
type followed struct {
	events   chan Event // what send was given
	end      chan error // what Follow returned
	cancel   context.CancelFunc
	err      error
	returned bool
}

// following starts Follow, handing what send gets to events and then
// calling send (nil: it succeeds). Cleanup cancels it and waits for it,
// so that no goroutine outlives the test.
func following(t *testing.T, f streamable.EventFollower, session, stream, afterID string,
	send func(id string, data []byte) error) *followed {
	ctx, cancel := context.WithCancel(t.Context())
	fl := &followed{events: make(chan Event, 64), end: make(chan error, 1), cancel: cancel}
	go func() {
		fl.end <- f.Follow(ctx, session, stream, afterID, func(id string, data []byte) error {
			select {
			case fl.events <- Event{id, string(data)}:
			case <-ctx.Done():
				return ctx.Err()
			}
			if send != nil {
				return send(id, data)
			}
			return nil
		})
	}()
	t.Cleanup(func() {
		cancel()
		if !fl.returned {
			select {
			case <-fl.end:
			case <-time.After(patience):
				t.Errorf("Follow did not return within %v of its context ending", patience)
			}
		}
	})
	return fl
}

// wait returns what Follow returned, failing t when it does not return.
func (fl *followed) wait(t *testing.T) error {
	t.Helper()
	if !fl.returned {
		select {
		case fl.err = <-fl.end:
			fl.returned = true
		case <-time.After(patience):
			t.Fatalf("Follow did not return within %v", patience)
		}
	}
	return fl.err
}

// receive checks that send is given want next.
func (fl *followed) receive(t *testing.T, want Event) {
	t.Helper()
	select {
	case got := <-fl.events:
		if got != want {
			t.Fatalf("Follow sent %v, want %v", got, want)
		}
	case <-time.After(patience):
		t.Fatalf("Follow did not send %v within %v", want, patience)
	}
}

// Follow sends each event of the stream after afterID, those appended
// before it was called and those appended while it runs, in order and
// only the stream's (no priming event, no other stream's, no other
// session's), and returns nil once it has sent the stream's response. A
// server request, which has an id too, is not the response.
func followUntilResponse(t *testing.T, f streamable.EventFollower) {
	MustAppend(t, f, "s", "p", nil)
	a0 := MustAppend(t, f, "s", "p", Notification("p0"))
	a1 := Event{MustAppend(t, f, "s", "p", Notification("p1")), string(Notification("p1"))}
	fl := following(t, f, "s", "p", a0, nil)
	fl.receive(t, a1)
	MustAppend(t, f, "s", "g", Notification("another stream"))
	MustAppend(t, f, "t", "p", Notification("another session"))
	MustAppend(t, f, "s", "p", nil)
	a2 := Event{MustAppend(t, f, "s", "p", Request(`"srv-1"`)), string(Request(`"srv-1"`))}
	a3 := Event{MustAppend(t, f, "s", "p", Notification("p3")), string(Notification("p3"))}
	a4 := Event{MustAppend(t, f, "s", "p", Result(`"call-1"`, "done")), string(Result(`"call-1"`, "done"))}
	fl.receive(t, a2)
	fl.receive(t, a3)
	fl.receive(t, a4)
	if err := fl.wait(t); err != nil {
		t.Fatalf("Follow after the response: %v, want nil", err)
	}
	MustAppend(t, f, "s", "p", Notification("after the response"))
	select {
	case e := <-fl.events:
		t.Errorf("Follow sent %v after it returned", e)
	default:
	}
}

// A stream whose response is stored already is followed to its response,
// an error response included, and Follow returns nil.
func followAnswered(t *testing.T, f streamable.EventFollower) {
	p := MustAppend(t, f, "s", "p", nil)
	a1 := Event{MustAppend(t, f, "s", "p", Notification("p1")), string(Notification("p1"))}
	a2 := Event{MustAppend(t, f, "s", "p", ErrorResponse("42")), string(ErrorResponse("42"))}
	fl := following(t, f, "s", "p", p, nil)
	fl.receive(t, a1)
	fl.receive(t, a2)
	if err := fl.wait(t); err != nil {
		t.Fatalf("Follow of an answered stream: %v, want nil", err)
	}
}

// Follow of a stream still running returns ctx's error once ctx ends.
func followContext(t *testing.T, f streamable.EventFollower) {
	p := MustAppend(t, f, "s", "p", nil)
	a1 := Event{MustAppend(t, f, "s", "p", Notification("p1")), string(Notification("p1"))}
	fl := following(t, f, "s", "p", p, nil)
	fl.receive(t, a1)
	fl.cancel()
	if err := fl.wait(t); !errors.Is(err, context.Canceled) {
		t.Fatalf("Follow after its context ended: %v, want context.Canceled", err)
	}
}

// An error from send ends Follow, which returns it.
func followSendError(t *testing.T, f streamable.EventFollower) {
	p := MustAppend(t, f, "s", "p", nil)
	a1 := Event{MustAppend(t, f, "s", "p", Notification("p1")), string(Notification("p1"))}
	MustAppend(t, f, "s", "p", Notification("p2"))
	boom := errors.New("the connection is gone")
	fl := following(t, f, "s", "p", p, func(string, []byte) error { return boom })
	fl.receive(t, a1)
	if err := fl.wait(t); !errors.Is(err, boom) {
		t.Fatalf("Follow after send failed: %v, want send's error", err)
	}
	select {
	case e := <-fl.events:
		t.Errorf("Follow sent %v after send failed", e)
	default:
	}
}
