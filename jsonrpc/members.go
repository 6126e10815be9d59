package jsonrpc

import (
	"errors"
	"strconv"
	"unicode/utf8"
)

// Walking objects and arrays, and reading strings, with the scanner that
// Decode uses: a reader of params (MCP's, ACP's, a handler's) needs no
// scanner of its own, and none that is neither validating nor fuzzed.
// Each walker validates its whole input before it calls fn, so fn is never
// called for a malformed input (no partial walk), then slices the members
// out with a cheap second pass over what is now known to be valid. Both
// passes are allocation-free; only a key with escapes is decoded into a new
// slice.

// errNotObject and errNotArray are the errors for valid JSON of the wrong
// kind.
var (
	errNotObject = errors.New("jsonrpc: not a JSON object")
	errNotArray  = errors.New("jsonrpc: not a JSON array")
)

// SyntaxError is the error Members and Elements return for input that is
// not valid JSON (UTF-8 included, as Decode requires).
type SyntaxError struct {
	Offset int    // byte offset in the input where the error was found
	Reason string // what is wrong there
}

func (e *SyntaxError) Error() string {
	return "jsonrpc: invalid JSON at offset " + strconv.Itoa(e.Offset) + ": " + e.Reason
}

// validate checks that b is exactly one JSON value whose first byte is
// open ('{' or '['), surrounded by optional white space, and returns the
// offset of that byte.
func validate(b []byte, open byte, wrongKind error) (int, error) {
	i := skipSpace(b, 0)
	var st scanState
	end, err := scanValue(b, i, 0, &st)
	if err != nil {
		return 0, &SyntaxError{err.off, err.reason}
	}
	if j := skipSpace(b, end); j != len(b) {
		return 0, &SyntaxError{j, "invalid character " + quoteByte(b[j]) + " after top-level value"}
	}
	if b[i] != open {
		return 0, wrongKind
	}
	return i, nil
}

// Members calls fn with each member of the JSON object obj, in order, and
// stops early when fn returns false. obj must be exactly one object,
// optionally surrounded by white space; anything else (not JSON, not
// UTF-8, trailing data, another kind of value) is an error and fn is not
// called at all: obj is validated in full, with Decode's grammar, before
// the first member is handed out.
//
// value is the member's raw JSON, a sub-slice of obj without surrounding
// white space. key is the member's name: a sub-slice of obj (between the
// quotes) when it holds no escapes, which costs nothing, and a newly
// allocated decoded copy when it does, decoded as encoding/json decodes it
// ("n\u0061me" is "name"; an unpaired surrogate is U+FFFD). Both alias
// obj or are owned by the caller; fn may keep them.
//
// A repeated key is handed out each time it occurs (Decode has already
// refused params that repeat a key, at any depth). For valid input the
// members are exactly those encoding/json decodes into a
// map[string]json.RawMessage, the last of a repeated key being the one it
// keeps (FuzzMembers holds it to that).
func Members(obj []byte, fn func(key, value []byte) bool) error {
	i, err := validate(obj, '{', errNotObject)
	if err != nil {
		return err
	}
	i = skipSpace(obj, i+1)
	if obj[i] == '}' {
		return nil
	}
	for {
		kEnd, escaped := skipString(obj, i)
		key := obj[i+1 : kEnd-1]
		if escaped {
			key = unescape(key)
		}
		i = skipSpace(obj, skipSpace(obj, kEnd)+1) // past the ':'
		vEnd := skipValid(obj, i)
		if !fn(key, obj[i:vEnd]) {
			return nil
		}
		i = skipSpace(obj, vEnd)
		if obj[i] == '}' {
			return nil
		}
		i = skipSpace(obj, i+1) // past the ','
	}
}

// Elements calls fn with each element of the JSON array arr, in order, and
// stops early when fn returns false. Like Members, it validates arr in
// full first: anything but exactly one array, optionally surrounded by
// white space, is an error and fn is not called. value is the element's
// raw JSON, a sub-slice of arr without surrounding white space.
func Elements(arr []byte, fn func(value []byte) bool) error {
	i, err := validate(arr, '[', errNotArray)
	if err != nil {
		return err
	}
	i = skipSpace(arr, i+1)
	if arr[i] == ']' {
		return nil
	}
	for {
		end := skipValid(arr, i)
		if !fn(arr[i:end]) {
			return nil
		}
		i = skipSpace(arr, end)
		if arr[i] == ']' {
			return nil
		}
		i = skipSpace(arr, i+1)
	}
}

// EachMember is Members for an object that has already been validated —
// a message's params, or a value inside them, as Decode accepted them —
// without validating it again: every reader of a request's params would
// otherwise scan all of it once more (a 4 MiB tool call, many times). It
// hands fn the same keys and values as Members for such input. Given
// input that is not valid JSON it does not panic and reads nothing past
// obj, but which members it hands out is unspecified: use Members for
// input of unknown origin.
func EachMember(obj []byte, fn func(key, value []byte) bool) {
	i := skipSpace(obj, 0)
	if i >= len(obj) || obj[i] != '{' {
		return
	}
	i = skipSpace(obj, i+1)
	for i < len(obj) && obj[i] == '"' {
		kEnd, escaped := skipString(obj, i)
		if kEnd < i+2 || obj[kEnd-1] != '"' {
			return // unterminated
		}
		key := obj[i+1 : kEnd-1]
		if escaped {
			if _, _, err := scanString(obj, i); err != nil {
				return // decoding a broken escape is not safe
			}
			key = unescape(key)
		}
		i = skipSpace(obj, kEnd)
		if i >= len(obj) || obj[i] != ':' {
			return
		}
		if i = skipSpace(obj, i+1); i >= len(obj) {
			return
		}
		vEnd := skipValid(obj, i)
		if !fn(key, obj[i:vEnd]) {
			return
		}
		if i = skipSpace(obj, vEnd); i >= len(obj) || obj[i] != ',' {
			return
		}
		i = skipSpace(obj, i+1)
	}
}

// EachElement is Elements for an array that has already been validated,
// as EachMember is Members.
func EachElement(arr []byte, fn func(value []byte) bool) {
	i := skipSpace(arr, 0)
	if i >= len(arr) || arr[i] != '[' {
		return
	}
	for i = skipSpace(arr, i+1); i < len(arr) && arr[i] != ']'; {
		end := skipValid(arr, i)
		if end <= i || !fn(arr[i:end]) {
			return
		}
		if i = skipSpace(arr, end); i >= len(arr) || arr[i] != ',' {
			return
		}
		i = skipSpace(arr, i+1)
	}
}

// StringBytes returns the contents of the JSON string v, which must be
// exactly one string token (quotes included, no surrounding white space,
// as Members and Elements hand values out); ok is false for anything else,
// a string that is not valid JSON or not UTF-8 included. Without escapes
// the contents are a sub-slice of v, between the quotes, and nothing is
// allocated: string(b) == "x", a switch on string(b) and a map lookup
// m[string(b)] do not copy either. With escapes they are a newly
// allocated decoded copy, decoded as encoding/json decodes them.
func StringBytes(v []byte) (b []byte, ok bool) {
	if len(v) < 2 || v[0] != '"' {
		return nil, false
	}
	end, escaped, err := scanString(v, 0)
	if err != nil || end != len(v) {
		return nil, false
	}
	b = v[1 : end-1]
	if escaped {
		b = unescape(b)
	}
	return b, true
}

// StringValue is StringBytes as a Go string: the JSON string v decoded, ok
// false when v is not exactly one valid JSON string. The string is a copy
// (a Go string cannot share v's memory safely); use StringBytes to compare
// or look up a value without one.
func StringValue(v []byte) (string, bool) {
	b, ok := StringBytes(v)
	return string(b), ok
}

// skipValid returns the offset past the value starting at b[i], which has
// been validated (no check is repeated).
func skipValid(b []byte, i int) int {
	switch b[i] {
	case '"':
		end, _ := skipString(b, i)
		return end
	case '{', '[':
		depth := 0
		for ; i < len(b); i++ {
			switch b[i] {
			case '"':
				end, _ := skipString(b, i)
				i = end - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1
				}
			}
		}
		return len(b)
	}
	for i < len(b) {
		switch b[i] {
		case ',', '}', ']', ' ', '\t', '\n', '\r':
			return i
		}
		i++
	}
	return i
}

// unescape decodes the contents of a validated string that holds escapes,
// into a new slice.
func unescape(s []byte) []byte {
	b := make([]byte, 0, len(s))
	for i := 0; i < len(s); {
		var r rune
		r, i = nextRune(s, i)
		b = utf8.AppendRune(b, r)
	}
	return b
}
