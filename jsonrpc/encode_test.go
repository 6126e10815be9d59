package jsonrpc_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	"github.com/agentwire/agentwire/jsonrpc"
)

func TestAppendStringMatchesEncodingJSON(t *testing.T) {
	for _, s := range []string{"", "plain", "quote\" back\\slash", "ctl\x00\x01\x1f\n\r\t\b\f", "<html>&", "é日本", "bad\xffutf8", "\u2028\u2029"} {
		want, _ := json.Marshal(s)
		if got := jsonrpc.AppendString(nil, s); string(got) != string(want) {
			t.Errorf("AppendString(%q) = %s, want %s", s, got, want)
		}
	}
}

func FuzzAppendString(f *testing.F) {
	f.Add("x\u2028\xff\"")
	f.Add("abcdefgh<abcdefgh\x01abcdefghé\u2029abcdefgh")
	f.Fuzz(func(t *testing.T, s string) {
		want, _ := json.Marshal(s)
		got := jsonrpc.AppendString(nil, s)
		if string(got) != string(want) {
			t.Fatalf("AppendString(%q) = %s, want %s", s, got, want)
		}
		if n := jsonrpc.EncodedLen(s); n != len(got) {
			t.Fatalf("EncodedLen(%q) = %d, AppendString appends %d", s, n, len(got))
		}
	})
}

func TestRawValue(t *testing.T) {
	cases := []struct {
		in   any
		want string
		err  bool
	}{
		{nil, "null", false},
		{json.RawMessage(`{"a" : 1}`), `{"a" : 1}`, false}, // byte for byte
		{json.RawMessage("{\n\"a\":1}"), `{"a":1}`, false}, // compacted: no newline on the wire
		{json.RawMessage(" 1"), `1`, false},
		{json.RawMessage(`{`), "", true},
		{[]byte(`[1]`), `[1]`, false},
		{map[string]int{"b": 2}, `{"b":2}`, false},
		{"s\n", `"s\n"`, false},
		{make(chan int), "", true},
	}
	for _, tc := range cases {
		got, err := jsonrpc.RawValue(tc.in)
		if (err != nil) != tc.err || (!tc.err && string(got) != tc.want) {
			t.Errorf("RawValue(%v) = %s, %v", tc.in, got, err)
		}
	}
}

func TestErrorIsMatchesByCode(t *testing.T) {
	err := fmt.Errorf("wrapped: %w", jsonrpc.Errorf(jsonrpc.CodeMethodNotFound, "no %s", "x"))
	if !errors.Is(err, jsonrpc.ErrMethodNotFound) || errors.Is(err, jsonrpc.ErrInvalidParams) {
		t.Fatal("errors.Is does not match by code")
	}
	e := jsonrpc.NewError(-32001, "m", map[string]int{"a": 1})
	if got := string(jsonrpc.AppendError(nil, e)); got != `{"code":-32001,"message":"m","data":{"a":1}}` {
		t.Errorf("AppendError = %s", got)
	}
	if got := string(jsonrpc.AppendErrorResponse(nil, "", &jsonrpc.Error{Code: 1, Message: "x", Data: json.RawMessage("{bad")})); got != `{"jsonrpc":"2.0","id":null,"error":{"code":1,"message":"x"}}` {
		t.Errorf("invalid data must be dropped: %s", got)
	}
}

func TestIDs(t *testing.T) {
	if jsonrpc.Int64ID(-7) != "-7" || jsonrpc.StringID(`a"b`) != `"a\"b"` || !jsonrpc.StringID("x").IsString() || jsonrpc.ID("").IsZero() == false {
		t.Fatal("id constructors")
	}
	var id jsonrpc.ID
	if err := json.Unmarshal([]byte(`1.50`), &id); err != nil || id != "1.50" {
		t.Fatalf("unmarshal kept %q, %v", id, err)
	}
	if err := json.Unmarshal([]byte(`{}`), &id); err == nil {
		t.Fatal("object id accepted")
	}
	b, _ := json.Marshal(struct{ ID jsonrpc.ID }{"12345678901234567890"})
	if string(b) != `{"ID":12345678901234567890}` {
		t.Fatalf("marshal %s", b)
	}
}

// A *Encoded is passed on as it is (its maker vouches for it), an empty or
// nil one as null; a json.RawMessage is still checked.
func TestRawValueTrustsEncoded(t *testing.T) {
	e := jsonrpc.Encoded(`{"content":[]}`)
	if got, err := jsonrpc.RawValue(&e); err != nil || string(got) != `{"content":[]}` {
		t.Errorf("RawValue(*Encoded) = %s, %v", got, err)
	}
	var none *jsonrpc.Encoded
	if got, err := jsonrpc.RawValue(none); err != nil || string(got) != "null" {
		t.Errorf("RawValue(nil *Encoded) = %s, %v", got, err)
	}
	bad := json.RawMessage(`{"a":`)
	if _, err := jsonrpc.RawValue(&bad); err == nil {
		t.Error("RawValue(*json.RawMessage) passed invalid JSON")
	}
}
