package jsonrpc

import "unicode/utf8"

// A small, allocation-free JSON syntax scanner. It validates what
// encoding/json's Valid accepts, except that strings must be UTF-8 (RFC 8259
// §8.1), which encoding/json does not check (the fuzz target
// FuzzScannerMatchesValid holds it to that), and reports where each value
// starts and ends, so the envelope decoder can slice id, method and params
// out of the line without copying.

// maxDepth matches encoding/json's nesting limit, so a line that json.Valid
// rejects for depth is rejected here too.
const maxDepth = 10000

type scanError struct {
	off    int
	reason string
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

func skipSpace(b []byte, i int) int {
	for i < len(b) && isSpace(b[i]) {
		i++
	}
	return i
}

// scanState is what a validating scan learns beside validity.
type scanState struct {
	// mayRepeat: some object may repeat a key. The scan compares the keys
	// of each object as it validates them, which settles the common case
	// (a few keys without escapes, all different) in the same pass; an
	// object with escaped keys or more than screenedKeys keys, or one
	// that does repeat a key, sets it, and the exact check (duplicateKey)
	// then decides.
	mayRepeat bool
}

// screenedKeys is how many keys of one object the scan compares itself.
const screenedKeys = 16

// scanValue validates the JSON value starting at b[i] (no leading space) and
// returns the offset just past it.
func scanValue(b []byte, i, depth int, st *scanState) (int, *scanError) {
	if i >= len(b) {
		return i, &scanError{i, "unexpected end of input"}
	}
	switch c := b[i]; {
	case c == '"':
		end, _, err := scanString(b, i)
		return end, err
	case c == '{':
		return scanObject(b, i, depth+1, st)
	case c == '[':
		return scanArray(b, i, depth+1, st)
	case c == '-' || (c >= '0' && c <= '9'):
		return scanNumber(b, i)
	case c == 't':
		return scanLiteral(b, i, "true")
	case c == 'f':
		return scanLiteral(b, i, "false")
	case c == 'n':
		return scanLiteral(b, i, "null")
	default:
		return i, &scanError{i, "invalid character " + quoteByte(c) + " looking for beginning of value"}
	}
}

func scanLiteral(b []byte, i int, lit string) (int, *scanError) {
	for j := 0; j < len(lit); j++ {
		if i+j >= len(b) {
			return i + j, &scanError{i + j, "unexpected end of input in literal " + lit}
		}
		if b[i+j] != lit[j] {
			return i + j, &scanError{i + j, "invalid character " + quoteByte(b[i+j]) + " in literal " + lit}
		}
	}
	return i + len(lit), nil
}

// scanString validates a string token starting at the opening quote and
// returns the offset past the closing quote and whether it holds escapes.
func scanString(b []byte, i int) (int, bool, *scanError) {
	escaped := false
	i++ // opening quote
	for i < len(b) {
		// Most of a string is plain ASCII: skip it without the switch
		// below.
		if i = plainRun(b, i); i >= len(b) {
			break
		}
		c := b[i]
		switch {
		case c == '"':
			return i + 1, escaped, nil
		case c == '\\':
			escaped = true
			if i+1 >= len(b) {
				return i, escaped, &scanError{i, "unexpected end of input in string escape"}
			}
			switch b[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if len(b)-i < 6 {
					return i, escaped, &scanError{i, "unexpected end of input in \\u escape"}
				}
				for _, h := range b[i+2 : i+6] {
					if !isHex(h) {
						return i, escaped, &scanError{i, "invalid character in \\u escape"}
					}
				}
				i += 6
			default:
				return i, escaped, &scanError{i, "invalid escape character " + quoteByte(b[i+1])}
			}
		case c < 0x20:
			return i, escaped, &scanError{i, "invalid control character in string"}
		case c < utf8.RuneSelf:
			i++
		default:
			// Only bytes past ASCII are decoded: ASCII costs nothing more.
			_, size := utf8.DecodeRune(b[i:])
			if size == 1 {
				return i, escaped, &scanError{i, "invalid UTF-8 in string"}
			}
			i += size
		}
	}
	return i, escaped, &scanError{i, "unexpected end of input in string"}
}

// plainString marks the bytes a string may hold as they are: ASCII, not
// a control character, a quote or a backslash. It is never written.
var plainString = func() (t [256]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

func isHex(c byte) bool {
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// scanNumber validates -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func scanNumber(b []byte, i int) (int, *scanError) {
	start := i
	if b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && b[i] >= '1' && b[i] <= '9':
		for i < len(b) && isDigit(b[i]) {
			i++
		}
	default:
		return start, &scanError{i, "invalid number"}
	}
	if i < len(b) && b[i] == '.' {
		i++
		if i >= len(b) || !isDigit(b[i]) {
			return start, &scanError{i, "invalid number: digit expected after decimal point"}
		}
		for i < len(b) && isDigit(b[i]) {
			i++
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if i >= len(b) || !isDigit(b[i]) {
			return start, &scanError{i, "invalid number: digit expected in exponent"}
		}
		for i < len(b) && isDigit(b[i]) {
			i++
		}
	}
	return i, nil
}

func scanObject(b []byte, i, depth int, st *scanState) (int, *scanError) {
	if depth > maxDepth {
		return i, &scanError{i, "exceeded max nesting depth"}
	}
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == '}' {
		return i + 1, nil
	}
	var keys [screenedKeys]struct{ start, end int32 }
	n := 0
	if len(b) > 1<<31-1 {
		st.mayRepeat = true
	}
	for {
		if i >= len(b) {
			return i, &scanError{i, "unexpected end of input in object"}
		}
		if b[i] != '"' {
			return i, &scanError{i, "object key expected"}
		}
		var err *scanError
		start := i
		var escaped bool
		if i, escaped, err = scanString(b, i); err != nil {
			return i, err
		}
		if !st.mayRepeat {
			if escaped || n == screenedKeys {
				st.mayRepeat = true
			} else {
				key := b[start+1 : i-1]
				for _, k := range keys[:n] {
					if string(b[k.start:k.end]) == string(key) {
						st.mayRepeat = true
						break
					}
				}
				keys[n] = struct{ start, end int32 }{int32(start + 1), int32(i - 1)}
				n++
			}
		}
		i = skipSpace(b, i)
		if i >= len(b) || b[i] != ':' {
			return i, &scanError{i, "':' expected after object key"}
		}
		i = skipSpace(b, i+1)
		if i, err = scanValue(b, i, depth, st); err != nil {
			return i, err
		}
		i = skipSpace(b, i)
		if i >= len(b) {
			return i, &scanError{i, "unexpected end of input in object"}
		}
		switch b[i] {
		case ',':
			i = skipSpace(b, i+1)
		case '}':
			return i + 1, nil
		default:
			return i, &scanError{i, "',' or '}' expected in object"}
		}
	}
}

func scanArray(b []byte, i, depth int, st *scanState) (int, *scanError) {
	if depth > maxDepth {
		return i, &scanError{i, "exceeded max nesting depth"}
	}
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == ']' {
		return i + 1, nil
	}
	for {
		var err *scanError
		if i, err = scanValue(b, i, depth, st); err != nil {
			return i, err
		}
		i = skipSpace(b, i)
		if i >= len(b) {
			return i, &scanError{i, "unexpected end of input in array"}
		}
		switch b[i] {
		case ',':
			i = skipSpace(b, i+1)
		case ']':
			return i + 1, nil
		default:
			return i, &scanError{i, "',' or ']' expected in array"}
		}
	}
}

// Valid reports whether b is exactly one JSON value, optionally surrounded by
// white space, in UTF-8. It agrees with encoding/json.Valid on UTF-8 input,
// rejects what is not UTF-8 (which encoding/json.Valid accepts inside
// strings), and does not allocate.
func Valid(b []byte) bool {
	i := skipSpace(b, 0)
	var st scanState
	end, err := scanValue(b, i, 0, &st)
	return err == nil && skipSpace(b, end) == len(b)
}

func quoteByte(c byte) string {
	if c >= 0x20 && c < 0x7f {
		return "'" + string(rune(c)) + "'"
	}
	const hex = "0123456789abcdef"
	return "0x" + string([]byte{hex[c>>4], hex[c&15]})
}
