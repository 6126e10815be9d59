package server

import (
	"encoding/json"
	"strings"

	"github.com/agentwire/agentwire/jsonrpc"
	"testing"
)

func TestIsInteger(t *testing.T) {
	for n, want := range map[string]bool{
		"0": true, "-7": true, "2.0": true, "2.50e1": true, "1e1000000": true, "100e-2": true, "0.0e-5": true,
		"-0.5": false, "1.5": false, "1e-1": false, "1e-1000000": false, "123e-2": false, "1.25E+1": false,
		"1e99999999999999999999": true, "1e-99999999999999999999": false,
	} {
		if got := isInteger(json.Number(n)); got != want {
			t.Errorf("isInteger(%s) = %v, want %v", n, got, want)
		}
	}
}

// BenchmarkArgumentCheck measures the check of a conforming call with a
// 64 KiB string argument. Checking used to decode the arguments into maps
// and copy every string (a dozen allocations and the 64 KiB); it reads the
// raw bytes now and allocates nothing. (A benchmark, not a test: allocation
// counts are process-wide, and the package's tests run in parallel.)
func BenchmarkArgumentCheck(b *testing.B) {
	s := compileArgSchema(json.RawMessage(`{"type":"object","properties":{"text":{"type":"string"},"n":{"type":"integer"},"tags":{"type":"array","items":{"type":"string"}}},"required":["text"]}`))
	args := json.RawMessage(`{"text":"` + strings.Repeat("x", 1<<16) + `","n":3,"tags":["a","b"]}`)
	b.ReportAllocs()
	for b.Loop() {
		if p := s.check(args); len(p) != 0 {
			b.Fatal(p)
		}
	}
}

// FuzzArgumentCheck holds the raw-bytes check to what decoding the
// arguments says, for a schema with a required integer and an array of
// strings.
func FuzzArgumentCheck(f *testing.F) {
	s := compileArgSchema(json.RawMessage(`{"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"array","items":{"type":"string"}}},"required":["a"]}`))
	for _, seed := range []string{`{"a":1}`, `{"a":1.5}`, `{"b":["x"]}`, `{"a":2,"b":["x",3]}`, `[]`, `{"a":1e400,"b":[]}`, `{"\u0061":1}`, ` { "a" : -0 , "b" : [ "" ] } `} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, args string) {
		// What reaches a tool has passed the decoder: valid JSON, UTF-8, no
		// repeated key at any depth.
		if _, err := jsonrpc.Decode([]byte(`{"jsonrpc":"2.0","method":"m","params":{"x":`+args+`}}`), nil); err != nil {
			return
		}
		dec := json.NewDecoder(strings.NewReader(args))
		dec.UseNumber()
		var v any
		if dec.Decode(&v) != nil {
			return
		}
		want := false // conforms
		if m, ok := v.(map[string]any); ok {
			n, isNum := m["a"].(json.Number)
			want = isNum && isInteger(n)
			if b, present := m["b"]; present {
				items, isArr := b.([]any)
				want = want && isArr
				for _, it := range items {
					_, isStr := it.(string)
					want = want && isStr
				}
			}
		}
		if got := len(s.check(json.RawMessage(args))) == 0; got != want {
			t.Fatalf("check(%s) conforms = %v, decoding says %v: %q", args, got, want, s.check(json.RawMessage(args)))
		}
	})
}
