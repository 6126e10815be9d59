package jsonrpc

import (
	"bytes"
	"encoding/json"
	"io"
	"strconv"
	"strings"
	"testing"
)

// duplicatesOracle walks b with encoding/json's tokenizer and returns
// every repeated key as pointer + "\x00" + key, keys decoded and compared
// the way encoding/json decodes them into a map.
func duplicatesOracle(t *testing.T, b []byte) map[string]bool {
	type level struct {
		object    bool
		keys      map[string]bool
		expectKey bool
		key       string // object: the key being read
		index     int    // array: the element being read
	}
	pointer := func(stack []*level) string {
		var p strings.Builder
		for _, l := range stack {
			p.WriteByte('/')
			if l.object {
				p.WriteString(strings.ReplaceAll(strings.ReplaceAll(l.key, "~", "~0"), "/", "~1"))
			} else {
				p.WriteString(strconv.Itoa(l.index))
			}
		}
		return p.String()
	}
	dups := map[string]bool{}
	var stack []*level
	// valueDone moves the enclosing level past the value just read.
	valueDone := func() {
		if n := len(stack); n > 0 {
			if stack[n-1].object {
				stack[n-1].expectKey = true
			} else {
				stack[n-1].index++
			}
		}
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			return dups
		}
		if err != nil {
			t.Fatalf("encoding/json cannot tokenize valid JSON %q: %v", b, err)
		}
		top := (*level)(nil)
		if n := len(stack); n > 0 {
			top = stack[n-1]
		}
		if s, ok := tok.(string); ok && top != nil && top.object && top.expectKey {
			if top.keys[s] {
				dups[pointer(stack[:len(stack)-1])+"\x00"+s] = true
			}
			top.keys[s], top.key, top.expectKey = true, s, false
			continue
		}
		switch tok {
		case json.Delim('{'):
			stack = append(stack, &level{object: true, keys: map[string]bool{}, expectKey: true})
		case json.Delim('['):
			stack = append(stack, &level{})
		case json.Delim('}'), json.Delim(']'):
			stack = stack[:len(stack)-1]
			valueDone()
		default:
			valueDone()
		}
	}
}

// FuzzDuplicateKey holds duplicateKey to encoding/json: it finds a
// repeated key exactly when there is one, and names a real one.
func FuzzDuplicateKey(f *testing.F) {
	for _, s := range []string{
		`{"a":1,"a":2}`, `{"a":1,"b":2}`, `[{"x":{"y":1,"y":2}}]`, `{"n\u0061me":1,"name":2}`,
		`{"\ud800":1,"\udbff":2}`, `{"\ud83d\ude00":1,"😀":2}`, `{"a/b~":{"k":[0,{"z":1,"z":1}]}}`,
		`{"a":{"b":1},"b":{"a":1}}`, `{"k1":0,"k2":0,"k3":0,"k4":0,"k5":0,"k6":0,"k7":0,"k8":0,"k9":0,"k5":1}`,
		`"{\"a\":1,\"a\":1}"`, `{"":1,"":2}`, `{"\"":1,"\\":2,"\u0022":3}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if !Valid(b) {
			return // Decode checks only what it has validated
		}
		want := duplicatesOracle(t, b)
		// The validating scan's screening may only clear what repeats
		// nothing.
		var st scanState
		if _, err := scanValue(b, skipSpace(b, 0), 0, &st); err != nil {
			t.Fatalf("scanValue(%q): %v", b, err)
		}
		if !st.mayRepeat && len(want) > 0 {
			t.Fatalf("the scan cleared %q, which repeats %v", b, want)
		}
		key, pointer, found := duplicateKey(b)
		if found != (len(want) > 0) {
			t.Fatalf("duplicateKey(%q) = %v, encoding/json finds %v", b, found, want)
		}
		if found && !want[pointer+"\x00"+key] {
			t.Fatalf("duplicateKey(%q) names %q at %q, encoding/json's repeats are %v", b, key, pointer, want)
		}
	})
}

func TestDuplicateKeyPointer(t *testing.T) {
	cases := []struct{ in, key, pointer string }{
		{`{"a":1,"a":2}`, "a", ""},
		{`{"x":[1,{"y":{"k":1,"k":2}}]}`, "k", "/x/1/y"},
		{`{"a/b":{"c~":{"d":0,"d":0}}}`, "d", "/a~1b/c~0"},
		{`[[0],[1,{"z":0,"z":0}]]`, "z", "/1/1"},
		{`{"p":{"q":1},"r":{"s":[{"t":1},{"t":1,"t":2}]}}`, "t", "/r/s/1"},
		{`{"k0":0,"k1":0,"k2":0,"k3":0,"k4":0,"k5":0,"k6":0,"k7":0,"k8":0,"k9":0,"k\u0033":1}`, "k3", ""},
	}
	for _, tc := range cases {
		key, pointer, found := duplicateKey([]byte(tc.in))
		if !found || key != tc.key || pointer != tc.pointer {
			t.Errorf("%s: got %q at %q (%v), want %q at %q", tc.in, key, pointer, found, tc.key, tc.pointer)
		}
	}
}

// A large object is sorted, not compared pairwise: 100 000 distinct keys
// take a few milliseconds, not minutes.
func TestDuplicateKeyLargeObject(t *testing.T) {
	var b strings.Builder
	b.WriteString("{")
	for i := range 100000 {
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString(`"` + strconv.Itoa(i) + `":0`)
	}
	b.WriteString("}")
	if _, _, found := duplicateKey([]byte(b.String())); found {
		t.Fatal("found a duplicate among distinct keys")
	}
	withDup := b.String()[:b.Len()-1] + `,"99999":1}`
	if key, _, found := duplicateKey([]byte(withDup)); !found || key != "99999" {
		t.Fatalf("got %q %v", key, found)
	}
}

// The reason stays short however deep or long the offending key is: the
// pointer is built only as far as it is quoted.
func TestDuplicateReasonBounded(t *testing.T) {
	long := strings.Repeat("k", 5000)
	deep := strings.Repeat(`{"`+long+`":`, 2000) + `{"` + long + `":1,"` + long + `":2}` + strings.Repeat("}", 2000)
	key, pointer, found := duplicateKey([]byte(deep))
	if !found || key != long {
		t.Fatalf("found %v, key of %d bytes", found, len(key))
	}
	if len(pointer) > maxPointer+len(long)+1 {
		t.Errorf("pointer of %d bytes built for a reason that quotes %d", len(pointer), maxPointer)
	}
	if r := duplicateReason(key, pointer); len(r) > maxKey+maxPointer+64 {
		t.Errorf("reason of %d bytes", len(r))
	}
}

func BenchmarkDuplicateKey(b *testing.B) {
	params := []byte(`{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}},"name":"echo","arguments":{"text":"hello","n":1,"flags":[true,false]}}`)
	for b.Loop() {
		duplicateKey(params)
	}
}

// DuplicatesOracle lets the external tests (FuzzDecode) use the oracle.
var DuplicatesOracle = duplicatesOracle
