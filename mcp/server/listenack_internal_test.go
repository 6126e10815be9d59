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
		for mask := uint8(0); mask < 1<<6; mask++ {
			h := honoredOf(mask, []string{"file:///a<b>&c", "é\u2028", `q"\`}, []string{"t1", "<t2>"})
			got, want := h.ack(subMeta), ackByEncodingJSON(t, h, subMeta)
			if id != `"a<b>&\u2028"` && string(got) != string(want) {
				t.Errorf("mask %06b:\n got %s\nwant %s", mask, got, want)
			}
			sameJSON(t, got, want)
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
		h := honoredOf(mask, []string{sub1, sub2}, []string{task})
		sameJSON(t, h.ack(subMeta), ackByEncodingJSON(t, h, subMeta))
	})
}

// honoredOf is the honoredListen the bits of mask say: tools, prompts,
// resources, tasks, then whether subs and taskIDs are given.
func honoredOf(mask uint8, subs, taskIDs []string) honoredListen {
	h := honoredListen{tools: mask&1 != 0, prompts: mask&2 != 0, resources: mask&4 != 0, tasks: mask&8 != 0}
	if mask&16 != 0 {
		h.subscriptions = subs
	}
	if mask&32 != 0 {
		h.taskIDs = taskIDs
	}
	return h
}

// ackByEncodingJSON is the acknowledgment as it was encoded before: a map
// of maps through encoding/json.
func ackByEncodingJSON(t *testing.T, h honoredListen, subMeta json.RawMessage) []byte {
	t.Helper()
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
	return want
}

// sameJSON fails unless got is JSON with the value of want, numbers kept
// as written (an id may be a number no float64 holds).
func sameJSON(t *testing.T, got, want []byte) {
	t.Helper()
	g, err := decodeExact(got)
	if err != nil {
		t.Fatalf("not JSON: %s: %v", got, err)
	}
	w, _ := decodeExact(want)
	if !reflect.DeepEqual(g, w) {
		t.Fatalf("not the same JSON:\n got %s\nwant %s", got, want)
	}
}

func decodeExact(b []byte) (any, error) {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	err := d.Decode(&v)
	return v, err
}
