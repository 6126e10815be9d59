package jsonrpc_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"maps"
	"slices"
	"testing"

	"github.com/agentwire/agentwire/jsonrpc"
)

// compact is v in encoding/json's compact form, for comparing raw values.
func compact(t *testing.T, v []byte) string {
	t.Helper()
	var b bytes.Buffer
	if err := json.Compact(&b, v); err != nil {
		t.Fatalf("value %q is not JSON: %v", v, err)
	}
	return b.String()
}

// FuzzMembers holds Members to encoding/json: for any input it never
// panics; for a valid JSON object (UTF-8, as Decode requires) it yields
// exactly the members encoding/json decodes into a
// map[string]json.RawMessage (every key, escapes decoded, with its raw
// value; the last of a repeated key wins in both), and StringValue reads
// each string value as encoding/json does; for anything else it is an
// error and fn is never called. Elements is held to []json.RawMessage the
// same way, on the input itself and on each array value.
func FuzzMembers(f *testing.F) {
	for _, s := range []string{
		`{}`, `{"a":1}`, ` { "a" : [1,{"b":"}"}] , "c":"x\"y", "d":null } `,
		`{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"},"name":"echo","arguments":{"text":"hi"}}`,
		`{"n\u0061me":"escaped key","name":"later"}`, `[1,2]`, `"str"`, `{"a":{"b":{"c":[[]]}}}`, `{"a":-1.5e3,"b":true}`,
		`{"a":1,"a":2}`, `{"\ud800":"\udbff\u00e9"}`, `{"a":1}x`, `{"a":1,}`, `{"a"}`, `{"a":"\xff"}`, `{`, ``, `null`,
		`[{"a":1}, "x", [], {}]`, `{"a":[1,2,{"b":[3]}]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		var want map[string]json.RawMessage
		isObject := jsonrpc.Valid(raw) && json.Unmarshal(raw, &want) == nil && want != nil
		got := map[string]json.RawMessage{}
		err := jsonrpc.Members(raw, func(key, value []byte) bool {
			got[string(key)] = bytes.Clone(value)
			return true
		})
		if !isObject {
			if err == nil || len(got) > 0 {
				t.Fatalf("Members(%q): err %v after %d members, want an error and none", raw, err, len(got))
			}
		} else {
			if err != nil {
				t.Fatalf("Members(%q): %v", raw, err)
			}
			if len(got) != len(want) {
				t.Fatalf("Members saw %d keys, encoding/json %d: %q", len(got), len(want), raw)
			}
			for k, v := range want {
				g, ok := got[k]
				if !ok {
					t.Fatalf("key %q: missing from Members (in %q)", k, raw)
				}
				if !bytes.Equal(g, bytes.TrimSpace(g)) {
					t.Fatalf("key %q: value %q has surrounding white space", k, g)
				}
				if compact(t, g) != compact(t, v) {
					t.Fatalf("key %q: Members %s, encoding/json %s (in %q)", k, g, v, raw)
				}
				checkString(t, g)
				checkElements(t, g)
			}
		}
		checkElements(t, raw)
		checkString(t, bytes.TrimSpace(raw))
		// EachMember hands out exactly what Members does for an object
		// Members accepts, and never panics on anything else.
		each := map[string]json.RawMessage{}
		jsonrpc.EachMember(raw, func(key, value []byte) bool {
			each[string(key)] = bytes.Clone(value)
			return true
		})
		jsonrpc.EachElement(raw, func([]byte) bool { return true })
		if isObject && !maps.EqualFunc(each, got, func(a, b json.RawMessage) bool { return bytes.Equal(a, b) }) {
			t.Fatalf("EachMember(%q) = %q, Members = %q", raw, each, got)
		}
	})
}

// checkString holds StringValue and StringBytes to encoding/json on v.
func checkString(t *testing.T, v []byte) {
	t.Helper()
	var want string
	isString := jsonrpc.Valid(v) && len(v) > 0 && v[0] == '"' && json.Unmarshal(v, &want) == nil
	s, ok := jsonrpc.StringValue(v)
	b, okb := jsonrpc.StringBytes(v)
	if ok != isString || okb != isString {
		t.Fatalf("StringValue(%q) ok %v, StringBytes ok %v; a valid JSON string: %v", v, ok, okb, isString)
	}
	if ok && (s != want || string(b) != want) {
		t.Fatalf("StringValue(%q) = %q, StringBytes %q, encoding/json %q", v, s, b, want)
	}
}

// checkElements holds Elements to encoding/json on v.
func checkElements(t *testing.T, v []byte) {
	t.Helper()
	var want []json.RawMessage
	isArray := jsonrpc.Valid(v) && json.Unmarshal(v, &want) == nil && want != nil
	var got [][]byte
	err := jsonrpc.Elements(v, func(value []byte) bool {
		got = append(got, bytes.Clone(value))
		return true
	})
	if !isArray {
		if err == nil || len(got) > 0 {
			t.Fatalf("Elements(%q): err %v after %d elements, want an error and none", v, err, len(got))
		}
		return
	}
	if err != nil {
		t.Fatalf("Elements(%q): %v", v, err)
	}
	if len(got) != len(want) {
		t.Fatalf("Elements saw %d elements, encoding/json %d: %q", len(got), len(want), v)
	}
	for i := range want {
		if compact(t, got[i]) != compact(t, want[i]) {
			t.Fatalf("element %d: Elements %s, encoding/json %s (in %q)", i, got[i], want[i], v)
		}
	}
}

func TestMembers(t *testing.T) {
	var keys, values []string
	err := jsonrpc.Members([]byte(` {"n\u0061me" : "echo", "arguments":{"a":[1, 2]} ,"x":null} `), func(key, value []byte) bool {
		keys = append(keys, string(key))
		values = append(values, string(value))
		return true
	})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"name", "arguments", "x"}; !slices.Equal(keys, want) {
		t.Errorf("keys %q, want %q", keys, want)
	}
	if want := []string{`"echo"`, `{"a":[1, 2]}`, `null`}; !slices.Equal(values, want) {
		t.Errorf("values %q, want %q", values, want)
	}

	// fn returning false stops the walk.
	n := 0
	if err := jsonrpc.Members([]byte(`{"a":1,"b":2,"c":3}`), func(key, value []byte) bool { n++; return string(key) != "b" }); err != nil || n != 2 {
		t.Errorf("stopped after %d members (err %v), want 2", n, err)
	}

	// A malformed object is an error and no member is handed out, even the
	// well-formed ones before the break. "{\"\xe1\":0}" (a key that is not
	// UTF-8) is the finding in testdata/fuzz/FuzzMembers, from when mcp had
	// a scanner of its own.
	for _, in := range []string{``, `null`, `[1]`, `"s"`, `{"a":1,}`, `{"a":1} {}`, `{"a":1`, "{\"a\":1,\"b\":\"\xff\"}", "{\"\xe1\":0}", `{"a" 1}`, `{1:2}`} {
		called := false
		err := jsonrpc.Members([]byte(in), func(key, value []byte) bool { called = true; return true })
		if err == nil || called {
			t.Errorf("Members(%q): err %v, fn called %v; want an error and no call", in, err, called)
		}
	}
	var se *jsonrpc.SyntaxError
	if err := jsonrpc.Members([]byte(`{"a":tru}`), func(key, value []byte) bool { return true }); !errors.As(err, &se) || se.Offset != 8 {
		t.Errorf("Members of a broken literal: %v, want a *SyntaxError at offset 8", err)
	}
}

func TestStringValue(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want string
		ok   bool
	}{
		{`"echo"`, "echo", true},
		{`""`, "", true},
		{`"a\"b\u00e9\ud83d\ude00"`, "a\"bé😀", true},
		{`"\ud800"`, "\uFFFD", true},
		{`"unterminated`, "", false},
		{`"a" `, "", false},
		{` "a"`, "", false},
		{`"\x"`, "", false},
		{"\"\xff\"", "", false},
		{`1`, "", false},
		{`null`, "", false},
		{``, "", false},
	} {
		got, ok := jsonrpc.StringValue([]byte(tc.in))
		if got != tc.want || ok != tc.ok {
			t.Errorf("StringValue(%q) = %q, %v; want %q, %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
	v := []byte(`"echo"`)
	if b, ok := jsonrpc.StringBytes(v); !ok || &b[0] != &v[1] {
		t.Errorf("StringBytes copied a string without escapes")
	}
}

// A tools/call params object is walked, its _meta and its name read,
// without allocating.
func BenchmarkMembers(b *testing.B) {
	params := []byte(`{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/logLevel":"info"},"name":"echo","arguments":{"text":"hello","n":1,"flags":[true,false]}}`)
	b.ReportAllocs()
	b.SetBytes(int64(len(params)))
	var found int
	for b.Loop() {
		jsonrpc.Members(params, func(key, value []byte) bool {
			switch string(key) {
			case "_meta":
				jsonrpc.Members(value, func(key, value []byte) bool {
					if string(key) == "io.modelcontextprotocol/logLevel" {
						if s, ok := jsonrpc.StringBytes(value); ok && string(s) == "info" {
							found++
						}
					}
					return true
				})
			case "name":
				if s, ok := jsonrpc.StringBytes(value); ok && string(s) == "echo" {
					found++
				}
			}
			return true
		})
	}
	if found == 0 {
		b.Fatal("nothing found")
	}
}

// BenchmarkEachMember is BenchmarkMembers without the validating pass,
// for params Decode has already accepted.
func BenchmarkEachMember(b *testing.B) {
	obj := []byte(`{"name":"echo","arguments":{"text":"hello, world"},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/logLevel":"info"}}`)
	b.SetBytes(int64(len(obj)))
	b.ReportAllocs()
	for b.Loop() {
		n := 0
		jsonrpc.EachMember(obj, func(key, value []byte) bool { n++; return true })
		if n != 3 {
			b.Fatal(n)
		}
	}
}
