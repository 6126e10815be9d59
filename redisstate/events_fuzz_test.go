package redisstate

import (
	"encoding/json"
	"reflect"
	"strconv"
	"testing"
	"unicode/utf8"

	"github.com/agentwire/agentwire/mcp/streamable"
)

// What the event and session stores read back, from a client (a
// Last-Event-ID) or from Redis (entries, records), is decoded by hand or
// checked after encoding/json: any input is refused or read, never a
// panic, and what was written reads back as it was.

func FuzzParseEventID(f *testing.F) {
	f.Add("g", uint64(1700000000000), uint64(0), "g_1-0")
	f.Add("q_x-_9Zk", uint64(1), uint64(18446744073709551615), "_")
	f.Add("a", uint64(0), uint64(0), "a_01-0")
	f.Fuzz(func(t *testing.T, stream string, ms, seq uint64, raw string) {
		if st, xid, ok := parseEventID(raw); ok {
			// What is accepted names a stream that could be, and an entry
			// id that reads back as itself.
			if !validName(st) || formatEventID(st, xid) != raw {
				t.Fatalf("parseEventID(%q) = %q %q", raw, st, xid)
			}
		}
		if !validName(stream) {
			return
		}
		xid := strconv.FormatUint(ms, 10) + "-" + strconv.FormatUint(seq, 10)
		st, got, ok := parseEventID(formatEventID(stream, xid))
		if !ok || st != stream || got != xid {
			t.Fatalf("formatEventID(%q, %q) read back as %q %q %v", stream, xid, st, got, ok)
		}
	})
}

func FuzzDecodeSession(f *testing.F) {
	f.Add("s1", []byte(`{"id":"s1","version":"2025-11-25","holder":"a","restore":[{"jsonrpc":"2.0"}]}`), "o", "2025-11-25", "h", `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	f.Add("s1", []byte(`{"id":"s1","version":`), "", "v", "", `{}`)
	f.Add("", []byte(`null`), "", "", "", ``)
	f.Fuzz(func(t *testing.T, id string, raw []byte, owner, version, holder, msg string) {
		decodeSession(id, raw) // whatever the key holds: a record or an error
		rec := &streamable.SessionRecord{ID: id, Owner: owner, Version: version, Holder: holder}
		if json.Valid([]byte(msg)) && len(msg) > 0 && msg[0] == '{' {
			var compact json.RawMessage
			if err := json.Unmarshal([]byte(msg), &compact); err != nil {
				t.Fatal(err)
			}
			rec.Restore = []json.RawMessage{compact}
		}
		for _, s := range []string{id, owner, version, holder, msg} {
			if !utf8.ValidString(s) {
				return // encoding/json writes U+FFFD for it: not the same string back
			}
		}
		b, err := encodeSession(rec)
		if err != nil {
			t.Fatal(err)
		}
		got, err := decodeSession(id, b)
		if version == "" {
			if err == nil {
				t.Fatal("a record without a version was read")
			}
			return
		}
		if err != nil {
			t.Fatalf("decodeSession(%q) of what encodeSession wrote: %v", b, err)
		}
		if got.ID != rec.ID || got.Owner != rec.Owner || got.Version != rec.Version || got.Holder != rec.Holder || len(got.Restore) != len(rec.Restore) {
			t.Fatalf("read back %+v, want %+v", got, rec)
		}
		for i := range rec.Restore {
			if !jsonEqual(got.Restore[i], rec.Restore[i]) {
				t.Fatalf("restore message %d read back as %s, want %s", i, got.Restore[i], rec.Restore[i])
			}
		}
	})
}

func jsonEqual(a, b []byte) bool {
	var x, y any
	return json.Unmarshal(a, &x) == nil && json.Unmarshal(b, &y) == nil && reflect.DeepEqual(x, y)
}

// FuzzParseEntries hands parseEntries any shape a reply can take (from
// JSON: lists, strings, numbers, maps, nil): a list of entries or an
// error.
func FuzzParseEntries(f *testing.F) {
	f.Add([]byte(`[["1-0",["d",""]],["2-0",["d","{}","x","y"]]]`))
	f.Add([]byte(`[["1-0",["d"]]]`))
	f.Add([]byte(`[["1-0",["d",1]],[1,2],"x",null]`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		var v any
		if json.Unmarshal(raw, &v) != nil {
			return
		}
		es, err := parseEntries(v)
		if err == nil && es == nil {
			t.Fatal("no entries and no error")
		}
	})
}

// FuzzDecodeChange reads any message of the sessions channel (anyone with
// access to Redis may publish there): a change or an error, never a
// panic; what is accepted has a valid id and a bounded holder, and what
// Save and Delete publish reads back as it was.
func FuzzDecodeChange(f *testing.F) {
	f.Add(`{"id":"s1","holder":"a"}`, "s1", "a")
	f.Add(`{"id":"s1","holder":""}`, "s1", "")
	f.Add(`{"id":"","holder":"x"}`, "", "x")
	f.Add(`{"id":"s:1"}`, "s_1", "h")
	f.Add(`[1,2]`, "a", "b")
	f.Fuzz(func(t *testing.T, payload, id, holder string) {
		if c, err := decodeChange(payload); err == nil {
			if !validName(c.ID) || len(c.Holder) > maxHolder {
				t.Fatalf("decodeChange(%q) accepted %+v", payload, c)
			}
		}
		if !validName(id) || len(holder) > maxHolder || !utf8.ValidString(holder) {
			return
		}
		c, err := decodeChange(string(encodeChange(id, holder)))
		if err != nil || c.ID != id || c.Holder != holder {
			t.Fatalf("(%q, %q) read back as %+v, %v", id, holder, c, err)
		}
	})
}
