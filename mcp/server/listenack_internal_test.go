package server

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
)

// The acknowledgment of subscriptions/listen is encoded by hand (it was a
// map of maps through encoding/json, most of what opening a stream
// allocated): it must be the bytes encoding/json gives the same map, for
// every combination of what is honoured. The subscription id is the
// request's id as the client wrote it (as in every later notification of
// the stream), where encoding/json would escape <, > and & in it again:
// with such an id the two are the same JSON, not the same bytes.
func TestTheListenAcknowledgmentIsWhatEncodingJSONWouldWrite(t *testing.T) {
	for _, id := range []string{`7`, `"a-b"`, `"a<b>&\u2028"`} {
		subMeta := json.RawMessage(`{"io.modelcontextprotocol/subscriptionId":` + id + `}`)
		ackMatchesEncodingJSON(t, subMeta, id != `"a<b>&\u2028"`)
	}
}

func ackMatchesEncodingJSON(t *testing.T, subMeta json.RawMessage, sameBytes bool) {
	t.Helper()
	subs := []string{"file:///a<b>&c", "é\u2028", `q"\`}
	for mask := 0; mask < 1<<6; mask++ {
		h := honoredListen{tools: mask&1 != 0, prompts: mask&2 != 0, resources: mask&4 != 0, tasks: mask&8 != 0}
		if mask&16 != 0 {
			h.subscriptions = subs
		}
		if mask&32 != 0 {
			h.taskIDs = []string{"t1", "<t2>"}
		}
		honored := map[string]any{}
		if h.tools {
			honored["toolsListChanged"] = true
		}
		if h.prompts {
			honored["promptsListChanged"] = true
		}
		if h.resources {
			honored["resourcesListChanged"] = true
		}
		if len(h.subscriptions) > 0 {
			honored["resourceSubscriptions"] = h.subscriptions
		}
		if h.tasks {
			honored["taskIds"] = h.taskIDs // nil is null, as before
		}
		want, err := json.Marshal(map[string]any{"_meta": subMeta, "notifications": honored})
		if err != nil {
			t.Fatal(err)
		}
		got := h.ack(subMeta)
		if sameBytes && string(got) != string(want) {
			t.Errorf("mask %06b:\n got %s\nwant %s", mask, got, want)
		}
		var g, w any
		if err := json.Unmarshal(got, &g); err != nil {
			t.Fatalf("mask %06b: %s: %v", mask, got, err)
		}
		json.Unmarshal(want, &w)
		if !reflect.DeepEqual(g, w) {
			t.Errorf("mask %06b: not the same JSON:\n got %s\nwant %s", mask, got, want)
		}
	}
}

// FuzzListenAck holds the hand-encoded acknowledgment to encoding/json's
// for any subscription URIs and task ids: valid JSON, and the same value.
func FuzzListenAck(f *testing.F) {
	f.Add(uint8(0xff), "file:///a", "é\u2028<>&", "t-1", `"id-1"`)
	f.Add(uint8(0), "", "", "", `7`)
	f.Add(uint8(0x15), "\xff\xfe", `q"\`, "\x00", `"\ud83d\ude00"`)
	f.Fuzz(func(t *testing.T, mask uint8, sub1, sub2, task, id string) {
		if !json.Valid([]byte(id)) {
			return
		}
		subMeta := json.RawMessage(`{"io.modelcontextprotocol/subscriptionId":` + id + `}`)
		h := honoredListen{tools: mask&1 != 0, prompts: mask&2 != 0, resources: mask&4 != 0, tasks: mask&8 != 0}
		if mask&16 != 0 {
			h.subscriptions = []string{sub1, sub2}
		}
		if mask&32 != 0 {
			h.taskIDs = []string{task}
		}
		honored := map[string]any{}
		if h.tools {
			honored["toolsListChanged"] = true
		}
		if h.prompts {
			honored["promptsListChanged"] = true
		}
		if h.resources {
			honored["resourcesListChanged"] = true
		}
		if len(h.subscriptions) > 0 {
			honored["resourceSubscriptions"] = h.subscriptions
		}
		if h.tasks {
			honored["taskIds"] = h.taskIDs
		}
		want, err := json.Marshal(map[string]any{"_meta": subMeta, "notifications": honored})
		if err != nil {
			t.Skip(err)
		}
		got := h.ack(subMeta)
		g, err := decodeExact(got)
		if err != nil {
			t.Fatalf("not JSON: %s: %v", got, err)
		}
		w, _ := decodeExact(want)
		if !reflect.DeepEqual(g, w) {
			t.Fatalf("not the same JSON:\n got %s\nwant %s", got, want)
		}
	})
}

// decodeExact decodes JSON keeping numbers as written (an id may be a
// number no float64 holds).
func decodeExact(b []byte) (any, error) {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	err := d.Decode(&v)
	return v, err
}
