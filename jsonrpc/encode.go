package jsonrpc

import (
	"bytes"
	"encoding/json"
	"errors"
	"slices"
	"strconv"
	"unicode/utf8"
)

// The fixed pieces of the envelopes agentwire writes. Output is always
// compact JSON with "jsonrpc" first, so a line can be assembled from these and
// raw values without an intermediate buffer.
var (
	PrefixID       = []byte(`{"jsonrpc":"2.0","id":`)
	PrefixMethod   = []byte(`{"jsonrpc":"2.0","method":`)
	MidResult      = []byte(`,"result":`)
	MidError       = []byte(`,"error":`)
	MidMethod      = []byte(`,"method":`)
	MidParams      = []byte(`,"params":`)
	Suffix         = []byte(`}`)
	NullValue      = []byte(`null`)
	EmptyObject    = []byte(`{}`)
	errNotJSON     = errors.New("jsonrpc: value is not valid JSON")
	errUnencodable = errors.New("jsonrpc: value cannot be encoded")
)

// RawValue turns a Go value into one line's worth of JSON: compact, with no
// raw newline. nil becomes null. A json.RawMessage or []byte is taken as JSON
// text: used byte for byte when it is valid and holds no newline, compacted
// when it holds newlines, and rejected when it is not JSON. Anything else goes
// through json.Marshal.
func RawValue(v any) ([]byte, error) {
	switch x := v.(type) {
	case nil:
		return NullValue, nil
	case json.RawMessage:
		return rawJSON(x)
	case *Encoded:
		if x == nil || len(*x) == 0 {
			return NullValue, nil
		}
		return *x, nil
	case *json.RawMessage:
		// A pointer needs no boxing: a handler that keeps its encoded
		// result in a struct of its own returns it without an allocation.
		if x == nil {
			return NullValue, nil
		}
		return rawJSON(*x)
	case []byte:
		return rawJSON(x)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, errors.Join(errUnencodable, err)
	}
	return b, nil
}

// Encoded is JSON its maker vouches for: one valid value, without a
// newline (as an encoder that escapes every string writes it). RawValue
// passes a *Encoded on as it is, without the validating scan a
// json.RawMessage gets: a handler that returns encoder output of its own
// (agentwire's MCP server returns every tool result this way) is not
// scanned once more per response. Anything else must not be passed as
// Encoded: it would reach the peer unchecked.
type Encoded []byte

// MarshalJSON returns e as it is, so that encoding/json embeds an Encoded
// as the JSON it holds (not as a base64 string, as it would a []byte).
func (e Encoded) MarshalJSON() ([]byte, error) {
	if len(e) == 0 {
		return NullValue, nil
	}
	return e, nil
}

func rawJSON(b []byte) ([]byte, error) {
	if len(b) == 0 {
		return NullValue, nil
	}
	if !Valid(b) {
		return nil, errNotJSON
	}
	if bytes.IndexByte(b, '\n') < 0 && !isSpace(b[0]) && !isSpace(b[len(b)-1]) {
		return b, nil
	}
	var buf bytes.Buffer
	buf.Grow(len(b))
	if err := json.Compact(&buf, b); err != nil {
		return nil, errNotJSON
	}
	return buf.Bytes(), nil
}

// EncodedLen is the number of bytes AppendString appends for s (quotes
// included): for making room for a large string once. It reads plain runs
// eight bytes at a time.
func EncodedLen(s string) int {
	n := 2
	for i := 0; i < len(s); {
		j := safeRun(s, i)
		n += j - i
		if i = j; i >= len(s) {
			break
		}
		c := s[i]
		if c < utf8.RuneSelf {
			switch c {
			case '"', '\\', '\n', '\r', '\t', '\b', '\f':
				n += 2
			default: // another control byte, '<', '>' or '&'
				n += 6
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1, r == '\u2028', r == '\u2029':
			n += 6
		default:
			n += size
		}
		i += size
	}
	return n
}

// AppendString appends s as a JSON string. It escapes what JSON requires and
// the same HTML-sensitive characters encoding/json does, and replaces invalid
// UTF-8 with U+FFFD.
func AppendString(dst []byte, s string) []byte {
	const hex = "0123456789abcdef"
	if len(s) > 256 {
		// A long string is copied in runs: room for all of it at once
		// rather than doubling the line while it is appended.
		dst = slices.Grow(dst, len(s)+2)
	}
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		if i = safeRun(s, i); i >= len(s) {
			break
		}
		c := s[i]
		if c < utf8.RuneSelf {
			dst = append(dst, s[start:i]...)
			switch c {
			case '"', '\\':
				dst = append(dst, '\\', c)
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hex[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// AppendError appends the error object {"code":…,"message":…[,"data":…]}.
// Data that is not valid JSON is dropped rather than corrupting the line.
func AppendError(dst []byte, e *Error) []byte {
	dst = append(dst, `{"code":`...)
	dst = strconv.AppendInt(dst, e.Code, 10)
	dst = append(dst, `,"message":`...)
	dst = AppendString(dst, e.Message)
	if len(e.Data) > 0 {
		if data, err := rawJSON(e.Data); err == nil {
			dst = append(dst, `,"data":`...)
			dst = append(dst, data...)
		}
	}
	return append(dst, '}')
}

// AppendErrorResponse appends a whole error response (without the newline).
// A zero id is written as null.
func AppendErrorResponse(dst []byte, id ID, e *Error) []byte {
	dst = append(dst, PrefixID...)
	if id == "" {
		dst = append(dst, NullValue...)
	} else {
		dst = append(dst, id...)
	}
	dst = append(dst, MidError...)
	dst = AppendError(dst, e)
	return append(dst, '}')
}
