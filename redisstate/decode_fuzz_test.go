package redisstate

import (
	"strings"
	"testing"
)

// The messages and members redisstate reads back from Redis, and the
// List cursor a client hands to tasks/list, are decoded by hand: any
// input is refused or read, never a panic, and what was written reads
// back as it was.

func FuzzParseEvent(f *testing.F) {
	f.Add("t", uint64(3), []byte(`{"rev":3,"id":"t"}`))
	f.Add("task-1", uint64(0), []byte(strings.Repeat("x", inlineEvent+1)))
	f.Add("a:b", uint64(1<<63), []byte(`{}`))
	f.Fuzz(func(t *testing.T, id string, rev uint64, rec []byte) {
		// Arbitrary bytes as a message: read or refused.
		parseEvent(id)
		parseEvent(string(rec))
		if id == "" {
			return
		}
		msg := eventMessage(id, rev, rec)
		kind, gotID, gotRev, gotRec, ok := parseEvent(msg)
		if !ok || gotID != id {
			t.Fatalf("eventMessage(%q, %d, %q) = %q: parsed %c %q %d %q %v", id, rev, rec, msg, kind, gotID, gotRev, gotRec, ok)
		}
		if kind == eventTask && gotRec != string(rec) {
			t.Fatalf("the record of an inline event: %q, want %q", gotRec, rec)
		}
		if kind == eventID && gotRev != rev {
			t.Fatalf("the revision of an id event: %d, want %d", gotRev, rev)
		}
	})
}

func FuzzParseEndedMember(f *testing.F) {
	f.Add("task-1", "agentwire:owner:x\x00")
	f.Add("1:2", "")
	f.Fuzz(func(t *testing.T, id, index string) {
		parseEndedMember(id + index)
		gotID, gotIndex, ok := parseEndedMember(endedMember(id, index))
		if !ok || gotID != id || gotIndex != index {
			t.Fatalf("endedMember(%q, %q) read back as %q %q %v", id, index, gotID, gotIndex, ok)
		}
	})
}

func FuzzDecodeCursor(f *testing.F) {
	f.Add("e1", uint64(42))
	f.Add("", uint64(0))
	f.Fuzz(func(t *testing.T, epoch string, seq uint64) {
		decodeCursor(epoch) // whatever a client sends: a cursor or ErrInvalidCursor
		if strings.Contains(epoch, "/") {
			return // epochs never hold the separator
		}
		gotEpoch, gotSeq, err := decodeCursor(encodeCursor(epoch, seq))
		if err != nil || gotEpoch != epoch || gotSeq != seq {
			t.Fatalf("encodeCursor(%q, %d) read back as %q %d %v", epoch, seq, gotEpoch, gotSeq, err)
		}
	})
}
