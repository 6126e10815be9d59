package jsonrpc

import (
	"bytes"
	"slices"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// Repeated keys. RFC 8259 §4 says the names within an object SHOULD be
// unique, and that when they are not, implementations differ: encoding/json
// and JSON.parse keep the last, others the first, some refuse the text. A
// proxy that reads one and a server that reads the other see two different
// requests, so Decode refuses a request whose params repeat a key in any
// object at any depth, as it refuses a repeated envelope member.
//
// Keys are compared as encoding/json decodes them: "name" and "n\u0061me"
// are the same key, and so are "\ud800" and "\udbff" (each an unpaired
// surrogate, read as U+FFFD). The work is O(n log n) in the size of params
// at worst (objects of more than a few keys are sorted), and nothing is
// allocated for params of ordinary size.

// keyRef is a key of the object being walked: the bytes between its
// quotes, as offsets into the value, and whether it holds escapes.
type keyRef struct {
	start, end int32
	escaped    bool
}

// frame is an object or array the walk is inside.
type frame struct {
	object bool
	keys   int // where this object's keys start on the key stack
	index  int // array: the element's index
}

// smallObject is how many keys are compared pairwise; larger objects are
// sorted.
const smallObject = 8

// duplicateKey reports the first repeated key found in an object anywhere in
// v, which must be valid JSON (values longer than 2 GiB are not checked),
// and the JSON Pointer (RFC 6901) of the object that repeats it.
func duplicateKey(v []byte) (key, pointer string, found bool) {
	if len(v) > 1<<31-1 {
		return "", "", false
	}
	var frameBuf [16]frame
	var keyBuf [32]keyRef
	frames, keys := frameBuf[:0], keyBuf[:0]
	expectKey := false
	for i := 0; i < len(v); i++ {
		// Numbers, literals and white space say nothing about keys.
		for i < len(v) && !structural[v[i]] {
			i++
		}
		if i >= len(v) {
			break
		}
		switch v[i] {
		case '"':
			end, escaped := skipString(v, i)
			if expectKey {
				keys = append(keys, keyRef{int32(i + 1), int32(end - 1), escaped})
				expectKey = false
			}
			i = end - 1
		case '{':
			frames = append(frames, frame{object: true, keys: len(keys)})
			expectKey = true
		case '[':
			frames = append(frames, frame{})
		case ',':
			if n := len(frames); n > 0 {
				if frames[n-1].object {
					expectKey = true
				} else {
					frames[n-1].index++
				}
			}
		case '}', ']':
			n := len(frames)
			if n == 0 {
				return "", "", false
			}
			f := frames[n-1]
			if f.object {
				if a, ok := repeated(v, keys[f.keys:]); ok {
					return decodeKey(v, a), jsonPointer(v, frames[:n-1], keys[:f.keys]), true
				}
				keys = keys[:f.keys]
			}
			frames = frames[:n-1]
			expectKey = false
		}
	}
	return "", "", false
}

// skipString returns the offset past the string starting at v[i] (its
// opening quote), which has been validated, and whether it holds escapes.
func skipString(v []byte, i int) (int, bool) {
	escaped := false
	for i++; i < len(v); i++ {
		if i = quoteOrEscapeRun(v, i); i >= len(v) {
			break
		}
		if v[i] == '"' {
			return i + 1, escaped
		}
		escaped = true
		i++ // the escaped byte
	}
	return len(v), escaped
}

// quoteOrEscape marks the bytes skipString stops at. It is never written.
var quoteOrEscape = [256]bool{'"': true, '\\': true}

// structural marks the bytes duplicateKey acts on. It is never written.
var structural = func() (t [256]bool) {
	for _, c := range `"{}[],` {
		t[c] = true
	}
	return t
}()

// repeated returns a key that occurs twice among keys (which it may
// reorder).
func repeated(v []byte, keys []keyRef) (keyRef, bool) {
	if len(keys) <= smallObject {
		for i := 1; i < len(keys); i++ {
			for j := 0; j < i; j++ {
				if compareKeys(v, keys[i], keys[j]) == 0 {
					return keys[i], true
				}
			}
		}
		return keyRef{}, false
	}
	slices.SortFunc(keys, func(a, b keyRef) int { return compareKeys(v, a, b) })
	for i := 1; i < len(keys); i++ {
		if compareKeys(v, keys[i-1], keys[i]) == 0 {
			return keys[i], true
		}
	}
	return keyRef{}, false
}

// compareKeys orders keys by the code points they decode to. Keys without
// escapes are compared as bytes, which for UTF-8 is the same order.
func compareKeys(v []byte, a, b keyRef) int {
	x, y := v[a.start:a.end], v[b.start:b.end]
	if !a.escaped && !b.escaped {
		return bytes.Compare(x, y)
	}
	i, j := 0, 0
	for i < len(x) && j < len(y) {
		var r, s rune
		r, i = nextRune(x, i)
		s, j = nextRune(y, j)
		if r != s {
			if r < s {
				return -1
			}
			return 1
		}
	}
	switch {
	case i < len(x):
		return 1
	case j < len(y):
		return -1
	}
	return 0
}

// nextRune decodes the code point at s[i] of a string's contents (valid
// JSON) as encoding/json does: escapes are decoded, a surrogate pair makes
// one code point, and an unpaired surrogate or a byte that is not UTF-8
// reads as U+FFFD.
func nextRune(s []byte, i int) (rune, int) {
	c := s[i]
	if c != '\\' {
		if c < utf8.RuneSelf {
			return rune(c), i + 1
		}
		r, size := utf8.DecodeRune(s[i:])
		return r, i + size
	}
	switch s[i+1] {
	case 'b':
		return '\b', i + 2
	case 'f':
		return '\f', i + 2
	case 'n':
		return '\n', i + 2
	case 'r':
		return '\r', i + 2
	case 't':
		return '\t', i + 2
	case 'u':
	default: // '"', '\\', '/'
		return rune(s[i+1]), i + 2
	}
	r := hex4(s[i+2 : i+6])
	i += 6
	if !utf16.IsSurrogate(r) {
		return r, i
	}
	if i+6 <= len(s) && s[i] == '\\' && s[i+1] == 'u' {
		if pair := utf16.DecodeRune(r, hex4(s[i+2:i+6])); pair != utf8.RuneError {
			return pair, i + 6
		}
	}
	return utf8.RuneError, i
}

func hex4(h []byte) rune {
	var r rune
	for _, c := range h {
		switch {
		case c <= '9':
			c -= '0'
		case c >= 'a':
			c -= 'a' - 10
		default:
			c -= 'A' - 10
		}
		r = r<<4 | rune(c)
	}
	return r
}

// decodeKey returns a key as a Go string.
func decodeKey(v []byte, k keyRef) string {
	s := v[k.start:k.end]
	if !k.escaped {
		return string(s)
	}
	return string(unescape(s))
}

// jsonPointer names the object that frames lead to: for each enclosing
// object the key being read, for each array the index. The key an object
// is reading is its last on the stack: the one just before the keys of the
// next object down (or the end of the stack), found in one pass from the
// innermost frame outwards, so that the work is linear in the depth.
func jsonPointer(v []byte, frames []frame, keys []keyRef) string {
	reading := make([]int, len(frames))
	end := len(keys)
	for n := len(frames) - 1; n >= 0; n-- {
		if frames[n].object {
			reading[n] = end - 1
			end = frames[n].keys
		}
	}
	var b strings.Builder
	for n, f := range frames {
		if b.Len() > maxPointer {
			break // duplicateReason clips it anyway
		}
		b.WriteByte('/')
		if !f.object {
			b.WriteString(strconv.Itoa(f.index))
			continue
		}
		key := decodeKey(v, keys[reading[n]])
		key = strings.ReplaceAll(key, "~", "~0")
		b.WriteString(strings.ReplaceAll(key, "/", "~1"))
	}
	return b.String()
}

// The longest key and pointer a reason quotes in full, in bytes.
const (
	maxKey     = 100
	maxPointer = 200
)

// duplicateReason is the DecodeError reason for a repeated key in params.
func duplicateReason(key, pointer string) string {
	r := "duplicate key " + strconv.Quote(clip(key, maxKey)) + " in params"
	if pointer != "" {
		r += " at " + strconv.Quote(clip(pointer, maxPointer))
	}
	return r
}

// clip shortens s to at most n bytes (on a rune boundary), marking the cut.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}
