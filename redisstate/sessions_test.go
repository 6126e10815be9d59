package redisstate

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/agentwire/agentwire/mcp/streamable"
)

func sessionRec(id, holder string) *streamable.SessionRecord {
	return &streamable.SessionRecord{
		ID: id, Owner: "https://issuer\x00alice", Version: "2025-11-25", Holder: holder,
		Restore: []json.RawMessage{
			json.RawMessage(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}`),
			json.RawMessage(`{"jsonrpc":"2.0","method":"notifications/initialized"}`),
			json.RawMessage(`{"jsonrpc":"2.0","id":3,"method":"resources/subscribe","params":{"uri":"test://r"}}`),
		},
	}
}

func sessionCountersOf(ss streamable.SessionStore) *sessionCounters { return ss.(*sessions).cnt }

func TestASessionSavedThroughOneInstanceLoadsThroughAnother(t *testing.T) {
	r := startRedis(t)
	a, b := storeState(t, r, Options{}).Sessions(), storeState(t, r, Options{}).Sessions()
	in := sessionRec("Zk3_-abc", "inst-a")
	if err := a.Save(t.Context(), in, time.Minute); err != nil {
		t.Fatal(err)
	}
	got, err := b.Load(t.Context(), in.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, in) {
		t.Fatalf("Load: %+v, want %+v", got, in)
	}
	if ms, err := r.Int("PTTL", "test:sess:"+in.ID); err != nil || ms <= 50_000 || ms > 60_000 {
		t.Fatalf("PTTL after Save with a minute: %d %v", ms, err)
	}
}

func TestTouchExtendsASessionAndReturnsItsHolderAfterATakeover(t *testing.T) {
	r := startRedis(t)
	a, b := storeState(t, r, Options{}).Sessions(), storeState(t, r, Options{}).Sessions()
	if err := a.Save(t.Context(), sessionRec("s1", "inst-a"), 10*time.Second); err != nil {
		t.Fatal(err)
	}
	h, err := a.Touch(t.Context(), "s1", 90*time.Second)
	if err != nil || h != "inst-a" {
		t.Fatalf("Touch: %q %v, want inst-a", h, err)
	}
	if ms, err := r.Int("PTTL", "test:sess:s1"); err != nil || ms <= 80_000 || ms > 90_000 {
		t.Fatalf("PTTL after Touch with 90 s: %d %v", ms, err)
	}
	// Another instance takes the session over: the old holder's next
	// touch tells it.
	if err := b.Save(t.Context(), sessionRec("s1", "inst-b"), time.Minute); err != nil {
		t.Fatal(err)
	}
	if h, err := a.Touch(t.Context(), "s1", time.Minute); err != nil || h != "inst-b" {
		t.Fatalf("Touch after the takeover: %q %v, want inst-b", h, err)
	}
	if got, err := a.Load(t.Context(), "s1"); err != nil || got.Holder != "inst-b" {
		t.Fatalf("Load after the takeover: %+v %v", got, err)
	}
}

func TestAnUnknownSessionIsErrUnknownSession(t *testing.T) {
	r := startRedis(t)
	st := storeState(t, r, Options{})
	ss := st.Sessions()
	ctx := t.Context()
	if err := ss.Save(ctx, sessionRec("gone", "i"), time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := ss.Save(ctx, sessionRec("expired", "i"), time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := ss.Delete(ctx, "gone"); err != nil {
		t.Fatal(err)
	}
	// An expiry in the past is Redis expiring the key now.
	if _, err := r.Do("PEXPIREAT", "test:sess:expired", "1"); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"never", "gone", "expired", "", "a b", "x\n", strings.Repeat("s", 257)} {
		if _, err := ss.Load(ctx, id); !errors.Is(err, streamable.ErrUnknownSession) {
			t.Errorf("Load(%q): %v, want ErrUnknownSession", id, err)
		}
		if _, err := ss.Touch(ctx, id, time.Minute); !errors.Is(err, streamable.ErrUnknownSession) {
			t.Errorf("Touch(%q): %v, want ErrUnknownSession", id, err)
		}
		if err := ss.Delete(ctx, id); err != nil {
			t.Errorf("Delete(%q): %v, want nil", id, err)
		}
	}
	// Touch does not bring a session back.
	if n, err := r.Int("EXISTS", "test:sess:never"); err != nil || n != 0 {
		t.Fatalf("Touch made a key: %d %v", n, err)
	}
	if st.Stats().RedisErrors != 0 {
		t.Fatalf("unknown sessions cost Redis errors: %d", st.Stats().RedisErrors)
	}
}

func TestTheErrorOfAnUnknownSessionDoesNotRepeatItsID(t *testing.T) {
	r := startRedis(t)
	ss := storeState(t, r, Options{}).Sessions()
	const id = "SECRETSESSIONID"
	_, err := ss.Load(t.Context(), id)
	if !errors.Is(err, streamable.ErrUnknownSession) || strings.Contains(err.Error(), id) {
		t.Fatalf("Load: %v", err)
	}
	_, err = ss.Touch(t.Context(), id, time.Minute)
	if !errors.Is(err, streamable.ErrUnknownSession) || strings.Contains(err.Error(), id) {
		t.Fatalf("Touch: %v", err)
	}
}

func TestSaveReplacesTheWholeRecord(t *testing.T) {
	r := startRedis(t)
	ss := storeState(t, r, Options{}).Sessions()
	if err := ss.Save(t.Context(), sessionRec("s1", "a"), time.Minute); err != nil {
		t.Fatal(err)
	}
	next := &streamable.SessionRecord{ID: "s1", Version: "2025-03-26", Holder: "b"}
	if err := ss.Save(t.Context(), next, time.Minute); err != nil {
		t.Fatal(err)
	}
	got, err := ss.Load(t.Context(), "s1")
	if err != nil || !reflect.DeepEqual(got, next) {
		t.Fatalf("Load after a second Save: %+v %v, want %+v", got, err, next)
	}
}

func TestSaveRefusesARecordThatWouldNotExpireOrHasNoID(t *testing.T) {
	r := startRedis(t)
	ss := storeState(t, r, Options{}).Sessions()
	for _, ttl := range []time.Duration{0, -time.Second} {
		if err := ss.Save(t.Context(), sessionRec("s1", "a"), ttl); err == nil {
			t.Errorf("Save with ttl %v accepted", ttl)
		}
	}
	if _, err := ss.Touch(t.Context(), "s1", 0); err == nil {
		t.Error("Touch with ttl 0 accepted")
	}
	for _, rec := range []*streamable.SessionRecord{nil, {Version: "2025-11-25"}, {ID: "a b", Version: "2025-11-25"}} {
		if err := ss.Save(t.Context(), rec, time.Minute); err == nil {
			t.Errorf("Save(%+v) accepted", rec)
		}
	}
	if n := dbsize(t, r); n != 0 {
		t.Fatalf("%d keys written by refused saves", n)
	}
}

func TestACorruptSessionRecordIsAnErrorNotAPanic(t *testing.T) {
	r := startRedis(t)
	var logs syncBuffer
	ss := storeState(t, r, Options{Logger: logTo(&logs)}).Sessions()
	cnt := sessionCountersOf(ss)
	corrupt := []string{
		`{"id":"s1","version":`, // cut short
		`[]`,                    // not an object
		`{"id":"other","version":"2025-11-25","holder":"a"}`,   // another session's
		`{"id":"s1","holder":"a"}`,                             // no version
		`{"id":"s1","version":"2025-11-25","restore":[1,"x"]}`, // restore not messages
		`{"id":"s1","version":"2025-11-25","restore":{"a":1}}`, // restore not a list
		`{"id":"s1","version":"2025-11-25","restore":[null]}`,  // a null message
		"\xff\xfe",                        // not text
		`{"id":1,"version":"2025-11-25"}`, // a number for an id
		`{"id":"s1","version":"2025-11-25","restore":[{"a":1}` + "\x00]}", // a NUL
	}
	for i, rec := range corrupt {
		if _, err := r.Do("HSET", "test:sess:s1", "rec", rec, "holder", "a"); err != nil {
			t.Fatal(err)
		}
		got, err := ss.Load(t.Context(), "s1")
		if err == nil || errors.Is(err, streamable.ErrUnknownSession) {
			t.Errorf("Load of %q: %+v %v, want an error that is not ErrUnknownSession", rec, got, err)
		}
		if cnt.corrupt.Load() != int64(i+1) {
			t.Errorf("corrupt records counted: %d, want %d", cnt.corrupt.Load(), i+1)
		}
	}
	if !strings.Contains(logs.String(), "a session record could not be read") {
		t.Fatalf("nothing logged: %q", logs.String())
	}
	// A key of another type under the session's name: an error, no panic.
	if _, err := r.Do("DEL", "test:sess:s1"); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Do("SET", "test:sess:s1", "x"); err != nil {
		t.Fatal(err)
	}
	if _, err := ss.Load(t.Context(), "s1"); err == nil || errors.Is(err, streamable.ErrUnknownSession) {
		t.Fatalf("Load of a string key: %v", err)
	}
	if _, err := ss.Touch(t.Context(), "s1", time.Minute); err == nil || errors.Is(err, streamable.ErrUnknownSession) {
		t.Fatalf("Touch of a string key: %v", err)
	}
}

// Every instance hears of a session that changes hands (Save) or ends
// (Delete), its own changes included; a record saved without a holder
// tells nothing.
func TestAWatcherHearsOfEverySessionSavedWithAHolderAndDeleted(t *testing.T) {
	r := startRedis(t)
	a, b := storeState(t, r, Options{}).Sessions(), storeState(t, r, Options{}).Sessions()
	got := make(chan [2]string, 8)
	stop, err := a.(streamable.SessionWatcher).WatchSessions(t.Context(), func(id, holder string) { got <- [2]string{id, holder} })
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	rdb := r.client(t)
	eventually(t, 5*time.Second, "the watcher is subscribed", func() bool {
		n, err := rdb.PubSubNumSub(t.Context(), "test:sessions").Result()
		return err == nil && n["test:sessions"] == 1
	})
	if err := b.Save(t.Context(), sessionRec("s1", ""), time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := b.Save(t.Context(), sessionRec("s1", "inst-b"), time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := b.Delete(t.Context(), "s1"); err != nil {
		t.Fatal(err)
	}
	for _, want := range [][2]string{{"s1", "inst-b"}, {"s1", ""}} {
		select {
		case c := <-got:
			if c != want {
				t.Fatalf("heard %q, want %q", c, want)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("did not hear %q", want)
		}
	}
}

// The sessions channel is Redis's: anyone with access may publish to it.
// What Save and Delete cannot have published is dropped, not delivered.
func TestAMalformedSessionChangeIsNotDelivered(t *testing.T) {
	for _, payload := range []string{``, `null`, `[]`, `{"id":""}`, `{"id":"a b","holder":"x"}`, `{"id":"s1","holder":"` + strings.Repeat("h", 300) + `"}`, `{"id":` + strings.Repeat("1", 2000) + `}`, `{"id":"s1","holder":7}`} {
		if c, err := decodeChange(payload); err == nil {
			t.Errorf("decodeChange(%.40q) = %+v, want an error", payload, c)
		}
	}
	if c, err := decodeChange(`{"id":"s1","holder":"inst-b"}`); err != nil || c != (sessionChange{ID: "s1", Holder: "inst-b"}) {
		t.Fatalf("a good change: %+v %v", c, err)
	}
}
