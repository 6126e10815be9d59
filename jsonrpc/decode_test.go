package jsonrpc_test

import (
	"encoding/json"
	"errors"
	"testing"
	"unicode/utf8"

	"github.com/agentwire/agentwire/jsonrpc"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestDecodeClassifies(t *testing.T) {
	cases := []struct {
		line   string
		kind   jsonrpc.Kind
		code   int64  // expected DecodeError code, 0 for success
		id     string // raw id (success) or echoable id (failure)
		method string
		params string
		resp   bool // failure looks like a response
	}{
		{line: `{"jsonrpc":"2.0","id":1,"method":"m","params":[1]}`, kind: jsonrpc.KindRequest, id: "1", method: "m", params: "[1]"},
		{line: ` {"jsonrpc":"2.0","id":"x","method":"m"} `, kind: jsonrpc.KindRequest, id: `"x"`, method: "m"},
		{line: `{"jsonrpc":"2.0","method":"n","params":{}}`, kind: jsonrpc.KindNotification, method: "n", params: "{}"},
		{line: `{"jsonrpc":"2.0","id":12345678901234567890,"result":null}`, kind: jsonrpc.KindResult, id: "12345678901234567890"},
		{line: `{"jsonrpc":"2.0","id":-1.5e3,"error":{"code":-1,"message":"m","data":[1]}}`, kind: jsonrpc.KindError, id: "-1.5e3"},
		{line: `{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"x"}}`, kind: jsonrpc.KindError, id: "null"},
		{line: `[1,2]`, kind: jsonrpc.KindBatch},
		{line: `{"jsonrpc":"2.0","method":"\u006d"}`, kind: jsonrpc.KindNotification, method: "m"},
		{line: `{"jsonr\u0070c":"2.\u0030","id":1,"method":"m"}`, kind: jsonrpc.KindRequest, id: "1", method: "m"},

		{line: ``, code: jsonrpc.CodeParseError},
		{line: `{`, code: jsonrpc.CodeParseError},
		{line: `{"a":1,}`, code: jsonrpc.CodeParseError},
		{line: `{"a" 1}`, code: jsonrpc.CodeParseError},
		{line: `{'a':1}`, code: jsonrpc.CodeParseError},
		{line: `{"a":"` + "\x01" + `"}`, code: jsonrpc.CodeParseError},
		{line: `{"a":"\u12"}`, code: jsonrpc.CodeParseError},
		{line: `{"a":1.}`, code: jsonrpc.CodeParseError},
		{line: `{"a":-}`, code: jsonrpc.CodeParseError},
		{line: `{"a":1e}`, code: jsonrpc.CodeParseError},
		{line: `{"a":nul}`, code: jsonrpc.CodeParseError},
		{line: `{} {}`, code: jsonrpc.CodeParseError},
		{line: `"x"`, code: jsonrpc.CodeInvalidRequest},
		{line: `{}`, code: jsonrpc.CodeInvalidRequest},
		{line: `{"jsonrpc":"2.0"}`, code: jsonrpc.CodeInvalidRequest},
		{line: `{"jsonrpc":"2.0","id":3}`, code: jsonrpc.CodeInvalidRequest, id: "3"},
		{line: `{"jsonrpc":"2.0","id":[3],"method":"m"}`, code: jsonrpc.CodeInvalidRequest},
		{line: `{"jsonrpc":"2.0","id":true,"method":"m"}`, code: jsonrpc.CodeInvalidRequest},
		{line: `{"jsonrpc":"2.0","id":null,"method":"m"}`, code: jsonrpc.CodeInvalidRequest},
		{line: `{"jsonrpc":"2.0","id":1,"method":"m","params":1}`, code: jsonrpc.CodeInvalidRequest, id: "1"},
		{line: `{"jsonrpc":"2.0","id":1,"id":2,"method":"m"}`, code: jsonrpc.CodeInvalidRequest, id: "2"},
		{line: `{"jsonrpc":"2.0","id":1,"result":1,"error":{"code":1,"message":""}}`, code: jsonrpc.CodeInvalidRequest, id: "1", resp: true},
		{line: `{"jsonrpc":"2.0","result":1}`, code: jsonrpc.CodeInvalidRequest, resp: true},
		{line: `{"jsonrpc":"2.0","id":null,"result":1}`, code: jsonrpc.CodeInvalidRequest, resp: true},
		{line: `{"jsonrpc":"2.0","id":1,"error":{"code":"1","message":""}}`, code: jsonrpc.CodeInvalidRequest, id: "1", resp: true},
		{line: `{"jsonrpc":"2.0","id":1,"error":{"code":1}}`, code: jsonrpc.CodeInvalidRequest, id: "1", resp: true},
		{line: `{"jsonrpc":"2.0","id":1,"error":"bad"}`, code: jsonrpc.CodeInvalidRequest, id: "1", resp: true},
		{line: `{"jsonrpc":"2.0","id":1,"result":1,"params":{}}`, code: jsonrpc.CodeInvalidRequest, id: "1", resp: true},
		{line: `{"jsonrpc":"2.0 ","id":1,"method":"m"}`, code: jsonrpc.CodeInvalidRequest, id: "1"},
	}
	for _, tc := range cases {
		m, err := jsonrpc.Decode([]byte(tc.line), nil)
		if tc.code != 0 {
			var de *jsonrpc.DecodeError
			if !errors.As(err, &de) {
				t.Errorf("%s: err = %v, want a DecodeError %d", tc.line, err, tc.code)
				continue
			}
			if de.Code != tc.code || string(de.ID) != tc.id || de.Response != tc.resp {
				t.Errorf("%s: got code %d id %q response %v, want %d %q %v", tc.line, de.Code, de.ID, de.Response, tc.code, tc.id, tc.resp)
			}
			want := jsonrpc.ErrParse
			if tc.code == jsonrpc.CodeInvalidRequest {
				want = jsonrpc.ErrInvalidRequest
			}
			if !errors.Is(err, want) {
				t.Errorf("%s: errors.Is(err, %v) is false", tc.line, want)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: unexpected error %v", tc.line, err)
			continue
		}
		if m.Kind != tc.kind || string(m.ID) != tc.id || m.MethodName() != tc.method || string(m.Params) != tc.params {
			t.Errorf("%s: got %v id %q method %q params %q", tc.line, m.Kind, m.ID, m.MethodName(), m.Params)
		}
	}
}

// Defect: strings were not checked for UTF-8, so a method of "\x88" came
// back from MethodName as the raw byte (encoding/json reads U+FFFD), and
// an id holding invalid UTF-8 was echoed raw, making the error reply
// invalid UTF-8 too. A line that is not UTF-8 is now not JSON text
// (RFC 8259 §8.1): -32700, id null, wherever the bad bytes are.
func TestRegressionDecodeInvalidUTF8(t *testing.T) {
	for _, line := range []string{
		"{\"jsonrpc\":\"2.0\",\"method\":\"\x88\"}",              // the fuzzer's find
		"{\"jsonrpc\":\"2.0\",\"id\":\"\xff\",\"method\":\"m\"}", // an id that would be echoed
		"{\"jsonrpc\":\"2.0\",\"id\":\"a\xc3\",\"method\":1}",    // and echoed by an invalid request
		"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"m\",\"params\":{\"k\xe9y\":1}}",
		"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"m\",\"params\":[\"\xed\xa0\x80\"]}", // an encoded surrogate
		"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"m\",\"params\":[\"\xc0\xaf\"]}",     // an overlong '/'
		"{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":\"\xf4\x90\x80\x80\"}",                // past U+10FFFF
		"[{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"\xe6\x97\"}]",                      // truncated, in a batch
	} {
		_, err := jsonrpc.Decode([]byte(line), nil)
		var de *jsonrpc.DecodeError
		if !errors.As(err, &de) || de.Code != jsonrpc.CodeParseError || de.ID != nil {
			t.Errorf("%q: got %v (%+v), want a parse error with no id", line, err, de)
		}
	}
	// UTF-8 beyond ASCII, and escapes (a lone surrogate included), are
	// fine; MethodName reads them as encoding/json does.
	for _, method := range []string{"é日本😀", "\uFFFD", `\u00e9\ud83d\ude00`, `\ud800`, `a\udc00b`} {
		line := `{"jsonrpc":"2.0","id":"ü","method":"` + method + `"}`
		m, err := jsonrpc.Decode([]byte(line), nil)
		var want string
		json.Unmarshal([]byte(`"`+method+`"`), &want)
		if err != nil || m.MethodName() != want || !utf8.ValidString(m.MethodName()) {
			t.Errorf("%s: method %q, %v; want %q", line, m.MethodName(), err, want)
		}
	}
}

// Defect: repeated keys inside params were accepted (the last one wins in
// encoding/json) while repeated envelope members were refused, so a proxy
// reading the first "name" or "region" and a server reading the last saw
// different requests. Any object in params that repeats a key, at any
// depth, now makes the message invalid, as a repeated envelope member does:
// -32600, the id echoed, the reason naming the key and where it is.
func TestRegressionDecodeDuplicateKeysInParams(t *testing.T) {
	cases := []struct{ line, id, reason string }{
		{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"safe","arguments":{},"name":"rm"}}`,
			"1", `duplicate key "name" in params`},
		{`{"jsonrpc":"2.0","id":"x","method":"tools/call","params":{"name":"deploy","arguments":{"region":"us","region":"eu"}}}`,
			`"x"`, `duplicate key "region" in params at "/arguments"`},
		{`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"_meta":{"progressToken":1,"progressToken":2},"name":"a"}}`,
			"2", `duplicate key "progressToken" in params at "/_meta"`},
		{`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"_meta":{},"_meta":{}}}`,
			"3", `duplicate key "_meta" in params`},
		{`{"jsonrpc":"2.0","id":4,"method":"m","params":{"arguments":{"cfg":{"zones":[{"id":1},{"id":2,"id":3}]}}}}`,
			"4", `duplicate key "id" in params at "/arguments/cfg/zones/1"`},
		{`{"jsonrpc":"2.0","id":5,"method":"m","params":{"n\u0061me":"a","name":"b"}}`,
			"5", `duplicate key "name" in params`},
		{`{"jsonrpc":"2.0","id":6,"method":"m","params":[{"\ud800":1,"\udfff":2}]}`,
			"6", "duplicate key \"\ufffd\" in params at \"/0\""},
		{`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1,"requestId":2}}`,
			"", `duplicate key "requestId" in params`},
	}
	for _, tc := range cases {
		_, err := jsonrpc.Decode([]byte(tc.line), nil)
		var de *jsonrpc.DecodeError
		if !errors.As(err, &de) || de.Code != jsonrpc.CodeInvalidRequest || string(de.ID) != tc.id || de.Reason != tc.reason {
			t.Errorf("%s:\n got %v (%+v)\nwant -32600 id %s: %s", tc.line, err, de, tc.id, tc.reason)
		}
	}
	// The same key in different objects, keys differing in case, and a
	// repeat inside a string are all fine.
	for _, line := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"m","params":{"a":{"a":{"a":1}},"b":[{"a":1},{"a":1}]}}`,
		`{"jsonrpc":"2.0","id":1,"method":"m","params":{"name":1,"Name":2,"NAME":3}}`,
		`{"jsonrpc":"2.0","id":1,"method":"m","params":{"s":"{\"a\":1,\"a\":2}"}}`,
		`{"jsonrpc":"2.0","id":1,"result":{"a":1,"a":2}}`, // responses are never answered
	} {
		if _, err := jsonrpc.Decode([]byte(line), nil); err != nil {
			t.Errorf("%s: %v", line, err)
		}
	}
}

func TestDecodeAllowNullID(t *testing.T) {
	m, err := jsonrpc.Decode([]byte(`{"jsonrpc":"2.0","id":null,"method":"m"}`), &jsonrpc.DecodeOptions{AllowNullID: true})
	if err != nil || m.Kind != jsonrpc.KindRequest || string(m.ID) != "null" {
		t.Fatalf("got %+v, %v", m, err)
	}
}

func TestDecodeDoesNotAllocate(t *testing.T) {
	for _, line := range [][]byte{
		[]byte(`{"jsonrpc":"2.0","id":123,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hello"}}}`),
		[]byte(`{"jsonrpc":"2.0","id":"é","method":"tools/call","params":{"name":"echo","arguments":{"text":"日本語 😀"}}}`),
	} {
		allocs := testing.AllocsPerRun(100, func() {
			if _, err := jsonrpc.Decode(line, nil); err != nil {
				t.Fatal(err)
			}
		})
		if allocs != 0 {
			t.Errorf("Decode allocates %v times per request", allocs)
		}
	}
}

func TestBatchElements(t *testing.T) {
	var got []string
	n := jsonrpc.Batch([]byte(` [ 1 , {"a":[2]} ,"x" ] `), func(e []byte) { got = append(got, string(e)) })
	if n != 3 || len(got) != 3 || got[0] != "1" || got[1] != `{"a":[2]}` || got[2] != `"x"` {
		t.Fatalf("got %d %q", n, got)
	}
}

func TestValidDepthMatchesEncodingJSON(t *testing.T) {
	for _, depth := range []int{9999, 10000, 10001} {
		b := make([]byte, 0, 2*depth)
		for range depth {
			b = append(b, '[')
		}
		for range depth {
			b = append(b, ']')
		}
		if got, want := jsonrpc.Valid(b), json.Valid(b); got != want {
			t.Errorf("depth %d: Valid = %v, encoding/json says %v", depth, got, want)
		}
	}
}

// FuzzScannerMatchesValid holds the scanner to encoding/json's grammar.
func FuzzScannerMatchesValid(f *testing.F) {
	for _, s := range []string{`{}`, `[1,"a",null,true,false,-0.5e+3]`, `{"a":{"b":[]}}`, `"\u00e9\n"`, `01`, `1.`, `{"a":1,}`, "\"\x7f\xff\"", ` 1 `} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		// encoding/json.Valid lets bytes that are not UTF-8 through in
		// strings; RFC 8259 §8.1 does not, and neither does Valid.
		if got, want := jsonrpc.Valid(b), json.Valid(b) && utf8.Valid(b); got != want {
			t.Fatalf("Valid(%q) = %v, encoding/json and utf8.Valid say %v", b, got, want)
		}
	})
}

// FuzzDecode: Decode never panics, and what it accepts is consistent.
func FuzzDecode(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"m","params":[1]}`,
		`{"jsonrpc":"2.0","method":"n"}`,
		`{"jsonrpc":"2.0","id":"a","result":{}}`,
		`{"jsonrpc":"2.0","id":1,"error":{"code":1,"message":"x"}}`,
		`[{"jsonrpc":"2.0","id":1,"method":"m"}]`,
		`{"jsonrpc":"2.0","id":1,"id":1}`,
		"{\"jsonrpc\":\"2.0\",\"id\":\"\xff\",\"method\":1}",
		`{"jsonrpc":"2.0","id":"\ud800","method":"\u00e9\ud83d\ude00"}`,
		`{"jsonrpc":"2.0","id":1,"method":"m","params":{"a":{"b":1,"b":2}}}`,
		`{"jsonrpc":"2.0","id":1,"method":"m","params":[{"k":1},{"k":1}]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		// What a valid line is: JSON (encoding/json's grammar) in UTF-8.
		valid := json.Valid(b) && utf8.Valid(b)
		m, err := jsonrpc.Decode(b, nil)
		if err != nil {
			var de *jsonrpc.DecodeError
			if !errors.As(err, &de) || (de.Code != jsonrpc.CodeParseError && de.Code != jsonrpc.CodeInvalidRequest) {
				t.Fatalf("unexpected error %v", err)
			}
			if (de.Code == jsonrpc.CodeParseError) == valid {
				t.Fatalf("parse error is %v for a line that is valid JSON in UTF-8: %v: %q", de.Code == jsonrpc.CodeParseError, valid, b)
			}
			if de.ID != nil && (!json.Valid(de.ID) || !utf8.Valid(de.ID)) {
				t.Fatalf("echoable id is not JSON in UTF-8: %q", de.ID)
			}
			// The reply the runtime would send is one valid line.
			id := jsonrpc.NullID
			if de.ID != nil {
				id = jsonrpc.ID(de.ID)
			}
			reply := jsonrpc.AppendErrorResponse(nil, id, &jsonrpc.Error{Code: de.Code, Message: de.Reason})
			if !json.Valid(reply) || !utf8.Valid(reply) {
				t.Fatalf("the reply to %q is not JSON in UTF-8: %q", b, reply)
			}
			return
		}
		if !valid {
			t.Fatalf("accepted a line that is not JSON in UTF-8: %q", b)
		}
		if m.Params != nil && len(jsonrpc.DuplicatesOracle(t, m.Params)) > 0 {
			t.Fatalf("accepted params that repeat a key: %q", m.Params)
		}
		switch m.Kind {
		case jsonrpc.KindRequest, jsonrpc.KindNotification:
			if m.Method == nil || (m.Kind == jsonrpc.KindRequest) != (m.ID != nil) {
				t.Fatalf("inconsistent %v: %+v", m.Kind, m)
			}
			var s string
			if json.Unmarshal(m.Method, &s) != nil || s != m.MethodName() {
				t.Fatalf("method %q decodes differently", m.Method)
			}
			if raw, escaped := m.MethodRaw(); !escaped && string(raw) != s {
				t.Fatalf("MethodRaw %q says unescaped, but the method is %q", raw, s)
			}
		case jsonrpc.KindResult, jsonrpc.KindError:
			if m.ID == nil {
				t.Fatalf("response without id: %q", b)
			}
		case jsonrpc.KindBatch:
			jsonrpc.Batch(b, func(e []byte) {
				if !json.Valid(e) {
					t.Fatalf("batch element %q is not JSON", e)
				}
			})
		default:
			t.Fatalf("kind %v", m.Kind)
		}
	})
}
