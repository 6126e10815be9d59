package server

import (
	"bytes"
	"encoding"
	"encoding/json"
	"reflect"
	"strconv"
	"strings"

	"github.com/agentwire/agentwire/jsonrpc"
)

// argCodec decodes a typed tool's arguments the way encoding/json.Unmarshal
// does, for the shape most tools take — a struct of strings, numbers,
// booleans, and pointers, slices and structs of those — without
// encoding/json's per-call machinery (its own validation pass, its
// scanner state machine, a field lookup per member): on a tools/call
// that was half of the MCP layer's CPU.
//
// It is a fast path, never a second decoder with opinions of its own.
// decode reports false for anything it cannot decode exactly as
// encoding/json would — a value of the wrong type, a number that does not
// fit, a member given twice (under case folding), a key that matches a
// field only under Unicode folding, a string that is not UTF-8 — and the
// caller then decodes with encoding/json into a fresh value, whose result
// or error message is the one that counts. Types it does not handle at all
// (a map, an interface, an array, []byte, an embedded struct, a method
// UnmarshalJSON or UnmarshalText anywhere, a ",string" tag, a tag name
// encoding/json does not accept, two fields whose names fold together,
// non-ASCII names, recursion) get no codec, and
// go to encoding/json every time. FuzzArgDecode holds it to encoding/json.
type argCodec struct {
	kind   reflect.Kind
	typ    reflect.Type
	bits   int        // numbers: the size that overflow is checked against
	elem   *argCodec  // pointer and slice
	fields []argField // struct, in declaration order
}

type argField struct {
	name  string // as JSON spells it: the tag's name, or the Go name
	index int
	codec *argCodec
}

// maxArgCodecDepth bounds how deeply nested a type gets a codec; a seen
// set of struct members is a uint64, which bounds a struct's fields.
const (
	maxArgCodecDepth  = 16
	maxArgCodecFields = 64
)

var (
	jsonUnmarshalerType = reflect.TypeFor[json.Unmarshaler]()
	textUnmarshalerType = reflect.TypeFor[encoding.TextUnmarshaler]()
)

// newArgCodec returns the codec for t, or nil when t is not a shape it
// decodes exactly as encoding/json does.
func newArgCodec(t reflect.Type) *argCodec {
	return buildArgCodec(t, 0, map[reflect.Type]bool{})
}

func buildArgCodec(t reflect.Type, depth int, building map[reflect.Type]bool) *argCodec {
	if depth > maxArgCodecDepth || building[t] {
		return nil
	}
	if t.Implements(jsonUnmarshalerType) || t.Implements(textUnmarshalerType) {
		return nil
	}
	if t.Kind() != reflect.Pointer {
		pt := reflect.PointerTo(t)
		if pt.Implements(jsonUnmarshalerType) || pt.Implements(textUnmarshalerType) {
			return nil
		}
	}
	c := &argCodec{kind: t.Kind(), typ: t}
	switch t.Kind() {
	case reflect.String, reflect.Bool:
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
		reflect.Float32, reflect.Float64:
		c.bits = t.Bits()
	case reflect.Pointer:
		building[t] = true
		defer delete(building, t)
		if c.elem = buildArgCodec(t.Elem(), depth+1, building); c.elem == nil {
			return nil
		}
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 {
			return nil // []byte is base64 in encoding/json
		}
		building[t] = true
		defer delete(building, t)
		if c.elem = buildArgCodec(t.Elem(), depth+1, building); c.elem == nil {
			return nil
		}
	case reflect.Struct:
		building[t] = true
		defer delete(building, t)
		for i := range t.NumField() {
			f := t.Field(i)
			if f.Anonymous {
				return nil // promotion has rules of its own
			}
			if !f.IsExported() {
				continue
			}
			tag := f.Tag.Get("json")
			if tag == "-" {
				continue
			}
			name, opts, _ := strings.Cut(tag, ",")
			for opt := range strings.SplitSeq(opts, ",") {
				if opt == "string" {
					return nil
				}
			}
			if name != "" && !validTagName(name) {
				// encoding/json ignores such a name (v1) or keeps part
				// of it (GOEXPERIMENT=jsonv2): it decides alone.
				return nil
			}
			if name == "" {
				name = f.Name
			}
			if !isASCII(name) {
				return nil
			}
			fc := buildArgCodec(f.Type, depth+1, building)
			if fc == nil {
				return nil
			}
			c.fields = append(c.fields, argField{name: name, index: i, codec: fc})
		}
		if len(c.fields) > maxArgCodecFields {
			return nil
		}
		for i, a := range c.fields {
			for _, b := range c.fields[i+1:] {
				if strings.EqualFold(a.name, b.name) {
					return nil // encoding/json's dominance rules decide
				}
			}
		}
	default:
		return nil
	}
	return c
}

// validTagName is encoding/json's test of a tag's name.
func validTagName(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		switch {
		case strings.ContainsRune("!#$%&()*+-./:;<=>?@[]^_{|}~ ", c):
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case c >= 0x80:
			// encoding/json accepts Unicode letters and digits; the
			// name is then refused as non-ASCII, the same either way.
		default:
			return false
		}
	}
	return true
}

func isASCII(s string) bool {
	for i := range len(s) {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}

// decode decodes raw — valid JSON as jsonrpc.Decode accepts it (UTF-8, no
// key repeated), without white space around it, as jsonrpc.EachMember
// hands a value out — into v, which must be settable and
// of c's type. false means encoding/json must decide; v may then hold part
// of the value and must be thrown away.
func (c *argCodec) decode(v reflect.Value, raw []byte) bool {
	if len(raw) == 0 {
		return false
	}
	if raw[0] == 'n' { // null
		if c.kind == reflect.Pointer || c.kind == reflect.Slice {
			v.SetZero()
		}
		return true
	}
	switch c.kind {
	case reflect.String:
		if raw[0] != '"' || len(raw) < 2 {
			return false
		}
		if bytes.IndexByte(raw, '\\') < 0 {
			// Validated and without escapes: the bytes between the
			// quotes are the string (a vectorized search, where
			// StringBytes would walk a long text once more).
			v.SetString(string(raw[1 : len(raw)-1]))
			break
		}
		s, ok := jsonrpc.StringBytes(raw)
		if !ok {
			return false
		}
		v.SetString(string(s))
	case reflect.Bool:
		switch raw[0] {
		case 't':
			v.SetBool(true)
		case 'f':
			v.SetBool(false)
		default:
			return false
		}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		n, ok := parseInt(raw)
		if !ok || v.OverflowInt(n) {
			return false
		}
		v.SetInt(n)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		n, ok := parseUint(raw)
		if !ok || v.OverflowUint(n) {
			return false
		}
		v.SetUint(n)
	case reflect.Float32, reflect.Float64:
		if raw[0] != '-' && (raw[0] < '0' || raw[0] > '9') {
			return false
		}
		f, err := strconv.ParseFloat(string(raw), c.bits)
		if err != nil || v.OverflowFloat(f) {
			return false
		}
		v.SetFloat(f)
	case reflect.Pointer:
		if v.IsNil() {
			v.Set(reflect.New(c.typ.Elem()))
		}
		return c.elem.decode(v.Elem(), raw)
	case reflect.Slice:
		return c.decodeSlice(v, raw)
	case reflect.Struct:
		return c.decodeStruct(v, raw)
	default:
		return false
	}
	return true
}

func (c *argCodec) decodeSlice(v reflect.Value, raw []byte) bool {
	if raw[0] != '[' {
		return false
	}
	n := 0
	jsonrpc.EachElement(raw, func([]byte) bool { n++; return true })
	s := reflect.MakeSlice(c.typ, n, n)
	i, ok := 0, true
	jsonrpc.EachElement(raw, func(e []byte) bool {
		ok = c.elem.decode(s.Index(i), e)
		i++
		return ok
	})
	if !ok {
		return false
	}
	v.Set(s)
	return true
}

func (c *argCodec) decodeStruct(v reflect.Value, raw []byte) bool {
	if raw[0] != '{' {
		return false
	}
	var seen uint64
	ok := true
	jsonrpc.EachMember(raw, func(key, value []byte) bool {
		i := c.field(key)
		switch {
		case i == -2:
			ok = false // only Unicode folding could tell
		case i >= 0:
			if seen&(1<<i) != 0 {
				ok = false // encoding/json merges a repeat into the first
				break
			}
			seen |= 1 << i
			f := &c.fields[i]
			ok = f.codec.decode(v.Field(f.index), value)
		}
		return ok
	})
	return ok
}

// field finds the field a member's key names, as encoding/json does: an
// exact match, else one under ASCII case folding. -1: no field (the
// member is ignored); -2: a non-ASCII key that matches no name exactly,
// which encoding/json's Unicode folding might still match.
func (c *argCodec) field(key []byte) int {
	for i := range c.fields {
		if string(key) == c.fields[i].name {
			return i
		}
	}
	if !isASCII(string(key)) {
		return -2
	}
	for i := range c.fields {
		if bytes.EqualFold(key, []byte(c.fields[i].name)) {
			return i
		}
	}
	return -1
}

// parseInt parses a JSON number that is an integer (as strconv.ParseInt
// does); ok is false for a fraction, an exponent or one that does not fit
// 64 bits, which encoding/json refuses for an integer field too.
func parseInt(raw []byte) (int64, bool) {
	neg := raw[0] == '-'
	digits := raw
	if neg {
		digits = raw[1:]
	}
	u, ok := parseUint(digits)
	switch {
	case !ok:
		return 0, false
	case neg && u <= 1<<63:
		return -int64(u), true
	case !neg && u < 1<<63:
		return int64(u), true
	}
	return 0, false
}

// parseUint parses digits only, without allocating, as strconv.ParseUint
// does for a JSON number's digits.
func parseUint(raw []byte) (uint64, bool) {
	if len(raw) == 0 {
		return 0, false
	}
	var n uint64
	for _, d := range raw {
		if d < '0' || d > '9' {
			return 0, false
		}
		if n > (1<<64-1)/10 {
			return 0, false
		}
		n *= 10
		if n+uint64(d-'0') < n {
			return 0, false
		}
		n += uint64(d - '0')
	}
	return n, true
}
