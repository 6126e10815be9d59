package streamable

import (
	"context"
	"errors"
	"slices"
	"testing"
)

// FuzzMemoryEventsReplayID replays a session from any Last-Event-ID a
// client may send: an id the session issued replays exactly the later
// events of its stream; anything else is ErrUnknownEvent with nothing
// sent, and never a panic. The ids are made predictable (every stream
// starts at 1) so that the corpus (testdata/fuzz) can name real ones.
func FuzzMemoryEventsReplayID(f *testing.F) {
	f.Fuzz(func(t *testing.T, lastID string) {
		if stream, seq, ok := parseEventID(lastID); ok && formatEventID(stream, seq) != lastID {
			t.Fatalf("parseEventID(%q) = %q, %d: formats back as %q", lastID, stream, seq, formatEventID(stream, seq))
		}
		m := NewMemoryEvents(nil)
		m.newBase = func() uint64 { return 0 }
		ctx := context.Background()
		type event struct{ id, data string }
		var order []struct {
			stream string
			e      event
		}
		add := func(session, stream, data string) {
			var b []byte
			if data != "" {
				b = []byte(data)
			}
			id, err := m.Append(ctx, session, stream, b)
			if err != nil {
				t.Fatal(err)
			}
			if session == "s" {
				order = append(order, struct {
					stream string
					e      event
				}{stream, event{id, data}})
			}
		}
		add("s", "g", "")
		add("s", "g", `{"jsonrpc":"2.0","method":"n","params":{"n":1}}`)
		add("s", "a_b", "")
		add("s", "g", `{"jsonrpc":"2.0","method":"n","params":{"n":2}}`)
		add("s", "a_b", `{"jsonrpc":"2.0","method":"n","params":{"n":3}}`)
		add("s", "", `{"jsonrpc":"2.0","method":"n","params":{"n":4}}`)
		add("s", "a_b", `{"jsonrpc":"2.0","id":1,"result":{}}`)
		add("t", "g", `{"jsonrpc":"2.0","method":"n","params":{"n":5}}`)
		add("t", "c", `{"jsonrpc":"2.0","method":"n","params":{"n":6}}`)

		var got []event
		stream, err := m.Replay(ctx, "s", lastID, func(id string, data []byte) error {
			got = append(got, event{id, string(data)})
			return nil
		})
		at := slices.IndexFunc(order, func(o struct {
			stream string
			e      event
		}) bool {
			return o.e.id == lastID
		})
		if at < 0 {
			if !errors.Is(err, ErrUnknownEvent) || len(got) > 0 || stream != "" {
				t.Fatalf("Replay(%q), an id never issued: %q, %v, sent %v", lastID, stream, err, got)
			}
			return
		}
		var want []event
		for _, o := range order[at+1:] {
			if o.stream == order[at].stream && o.e.data != "" {
				want = append(want, o.e)
			}
		}
		if err != nil || stream != order[at].stream || !slices.Equal(got, want) {
			t.Fatalf("Replay(%q): %q, %v, sent %v; want %q, nil, %v", lastID, stream, err, got, order[at].stream, want)
		}
	})
}

// FuzzEventIDRoundTrip: every id the store makes parses back to its stream
// and number, whatever the stream id holds ("_" included).
func FuzzEventIDRoundTrip(f *testing.F) {
	f.Fuzz(func(t *testing.T, stream string, seq uint64) {
		id := formatEventID(stream, seq)
		s, n, ok := parseEventID(id)
		if !ok || s != stream || n != seq {
			t.Fatalf("parseEventID(formatEventID(%q, %d) = %q) = %q, %d, %v", stream, seq, id, s, n, ok)
		}
	})
}
