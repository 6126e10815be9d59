package jsonrpc

import (
	"bytes"
	"encoding/json"
	"strconv"
)

// Kind tells the four JSON-RPC 2.0 envelopes (and a batch) apart. It is
// decided by which members are present, never by invented keys (guarantee W2).
type Kind uint8

const (
	KindInvalid      Kind = iota
	KindRequest           // "id" and "method"
	KindNotification      // "method", no "id"
	KindResult            // "id" and "result"
	KindError             // "id" and "error"
	KindBatch             // a JSON array of the above
)

var kindNames = [...]string{"invalid", "request", "notification", "result", "error", "batch"}

func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return "Kind(" + strconv.Itoa(int(k)) + ")"
}

// IsResponse reports whether k is a success or error response.
func (k Kind) IsResponse() bool { return k == KindResult || k == KindError }

// Message is one decoded envelope. Every []byte field is a sub-slice of the
// line passed to Decode: raw JSON exactly as it arrived, so ids and params are
// echoed byte for byte (guarantee W5). A member that was absent is nil.
type Message struct {
	Kind   Kind
	ID     []byte // raw id token: a string (with quotes), a number, or null
	Method []byte // raw string token, quotes included; see MethodName
	Params []byte // raw object or array; nil when absent or null
	Result []byte // raw value of a success response
	Error  []byte // raw error object of an error response

	methodEscaped bool
}

// MethodName returns the method as a Go string, decoding escapes if the
// sender used any, exactly as encoding/json would; it is always valid UTF-8
// (Decode rejects lines that are not). It allocates; the runtime avoids it
// on its hot path.
func (m *Message) MethodName() string {
	if len(m.Method) < 2 {
		return ""
	}
	if !m.methodEscaped {
		return string(m.Method[1 : len(m.Method)-1])
	}
	var s string
	_ = json.Unmarshal(m.Method, &s) // validated by Decode
	return s
}

// MethodRaw returns the method's bytes between the quotes and whether they
// hold escapes (in which case use MethodName).
func (m *Message) MethodRaw() (b []byte, escaped bool) {
	if len(m.Method) < 2 {
		return nil, false
	}
	return m.Method[1 : len(m.Method)-1], m.methodEscaped
}

// DecodeError says why a line is not a valid message, and how to answer it.
type DecodeError struct {
	// Code is CodeParseError when the line is not JSON (nothing on it is
	// trusted, the reply carries id null) and CodeInvalidRequest when it is
	// JSON but not a valid JSON-RPC 2.0 message.
	Code int64
	// Reason is a short human-readable explanation.
	Reason string
	// Offset is the byte offset of the problem within the line.
	Offset int
	// ID is the raw id when it could be read (a string or number), so an
	// invalid request is answered with its own id; nil otherwise. It is
	// never set on a parse error, so it is always valid JSON in UTF-8.
	ID []byte
	// Response is true when the object has "result" or "error" and no
	// "method": a broken response. Responses are never answered, so two
	// peers cannot trade error replies forever.
	Response bool
	// Notification is true when the object has "method" and no "id": a
	// broken notification, which is dropped rather than answered (guarantee W4).
	Notification bool
}

func (e *DecodeError) Error() string {
	if e.Code == CodeParseError {
		return "jsonrpc: parse error at offset " + strconv.Itoa(e.Offset) + ": " + e.Reason
	}
	return "jsonrpc: invalid message: " + e.Reason
}

// Is lets errors.Is match ErrParse and ErrInvalidRequest.
func (e *DecodeError) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code
}

// DecodeOptions holds the strictness switches of Decode. The zero value is
// what MCP and ACP require.
type DecodeOptions struct {
	// AllowNullID accepts requests whose id is null. JSON-RPC 2.0 merely
	// discourages them; MCP and ACP forbid them (guarantee W5), so the default
	// answers them with -32600.
	AllowNullID bool
}

var null = []byte("null")

// Decode classifies one line. The line must not include its terminator.
// On success every member of the returned Message points into line. A JSON
// array yields KindBatch; use Batch to walk its elements.
//
// Decoding is strict: the whole line must be one JSON value (the same grammar
// as encoding/json) in UTF-8, "jsonrpc" must be exactly "2.0", the five envelope
// members may not repeat, ids must be strings or numbers, params must be an
// object or an array in which no object repeats a key, at any depth, and a
// response carries exactly one of result and error.
// Unknown members are ignored, as JSON-RPC 2.0 does not forbid them.
func Decode(line []byte, opts *DecodeOptions) (Message, error) {
	i := skipSpace(line, 0)
	var st scanState
	end, serr := scanValue(line, i, 0, &st)
	if serr == nil {
		if j := skipSpace(line, end); j != len(line) {
			serr = &scanError{j, "invalid character " + quoteByte(line[j]) + " after top-level value"}
		}
	}
	if serr != nil {
		return Message{}, &DecodeError{Code: CodeParseError, Reason: serr.reason, Offset: serr.off}
	}
	switch line[i] {
	case '{':
		return decodeObject(line[i:end], i, opts, st.mayRepeat)
	case '[':
		return Message{Kind: KindBatch}, nil
	default:
		return Message{}, &DecodeError{Code: CodeInvalidRequest, Reason: "message is not a JSON object", Offset: i}
	}
}

// Batch calls fn with each element of a batch line that Decode classified as
// KindBatch. It returns the number of elements.
func Batch(line []byte, fn func(elem []byte)) int {
	i := skipSpace(line, 0)
	if i >= len(line) || line[i] != '[' {
		return 0
	}
	n := 0
	i = skipSpace(line, i+1)
	for i < len(line) && line[i] != ']' {
		var st scanState
		end, err := scanValue(line, i, 1, &st)
		if err != nil {
			return n
		}
		if fn != nil {
			fn(line[i:end])
		}
		n++
		i = skipSpace(line, end)
		if i < len(line) && line[i] == ',' {
			i = skipSpace(line, i+1)
		}
	}
	return n
}

// decodeObject checks the envelope of a syntactically valid object. base is
// the object's offset within the line, for error offsets; mayRepeat is
// what the validating scan learned (false: no object in obj repeats a
// key).
func decodeObject(obj []byte, base int, opts *DecodeOptions, mayRepeat bool) (Message, error) {
	var m Message
	var seen [6]bool // jsonrpc id method params result error
	var version []byte
	var versionEscaped bool
	dup := ""
	i := skipSpace(obj, 1)
	for i < len(obj) && obj[i] == '"' {
		// obj has been validated: what follows skips, it does not check
		// again (a message's params were scanned three times).
		keyEnd, keyEscaped := skipString(obj, i)
		key := obj[i+1 : keyEnd-1]
		if keyEscaped {
			var s string
			_ = json.Unmarshal(obj[i:keyEnd], &s)
			key = []byte(s)
		}
		i = skipSpace(obj, keyEnd)
		i = skipSpace(obj, i+1) // ':'
		valEnd := skipValid(obj, i)
		val := obj[i:valEnd]
		slot := -1
		switch string(key) {
		case "jsonrpc":
			slot, version = 0, val
			if val[0] == '"' {
				_, versionEscaped = skipString(val, 0)
			}
		case "id":
			slot, m.ID = 1, val
		case "method":
			slot, m.Method = 2, val
		case "params":
			slot, m.Params = 3, val
		case "result":
			slot, m.Result = 4, val
		case "error":
			slot, m.Error = 5, val
		}
		if slot >= 0 {
			if seen[slot] && dup == "" {
				dup = string(key)
			}
			seen[slot] = true
		}
		i = skipSpace(obj, valEnd)
		if i < len(obj) && obj[i] == ',' {
			i = skipSpace(obj, i+1)
		}
	}

	invalid := func(reason string) (Message, error) {
		e := &DecodeError{Code: CodeInvalidRequest, Reason: reason, Offset: base}
		if m.ID != nil && (m.ID[0] == '"' || m.ID[0] == '-' || isDigit(m.ID[0])) {
			e.ID = m.ID
		}
		e.Response = m.Method == nil && (m.Result != nil || m.Error != nil)
		e.Notification = m.Method != nil && m.ID == nil
		return Message{}, e
	}

	if dup != "" {
		return invalid("duplicate member " + strconv.Quote(dup))
	}
	if version == nil {
		return invalid(`missing "jsonrpc": "2.0"`)
	}
	if !isVersion2(version, versionEscaped) {
		return invalid(`"jsonrpc" must be exactly "2.0"`)
	}
	if m.ID != nil {
		switch c := m.ID[0]; {
		case c == '"' || c == '-' || isDigit(c):
		case c == 'n':
			// A null id is legal only on an error response to a message
			// whose id could not be read, and (optionally) on a request.
		default:
			return invalid("id must be a string or a number")
		}
	}
	if m.Params != nil {
		switch m.Params[0] {
		case '{', '[':
		case 'n':
			m.Params = nil // "params": null is treated as absent
		default:
			return invalid("params must be an object or an array")
		}
		if !mayRepeat {
			// Settled by the scan.
		} else if key, pointer, dup := duplicateKey(m.Params); dup {
			return invalid(duplicateReason(key, pointer))
		}
	}

	if m.Method != nil {
		if m.Method[0] != '"' {
			return invalid("method must be a string")
		}
		_, m.methodEscaped = skipString(m.Method, 0)
		if m.Result != nil || m.Error != nil {
			return invalid("a request may not carry result or error")
		}
		if m.ID == nil {
			m.Kind = KindNotification
			return m, nil
		}
		if m.ID[0] == 'n' && (opts == nil || !opts.AllowNullID) {
			return invalid("request id may not be null")
		}
		m.Kind = KindRequest
		return m, nil
	}

	switch {
	case m.Result == nil && m.Error == nil:
		return invalid(`message has neither "method" nor "result" nor "error"`)
	case m.Result != nil && m.Error != nil:
		return invalid(`response has both "result" and "error"`)
	case m.ID == nil:
		return invalid("response has no id")
	case m.Params != nil:
		return invalid("response may not carry params")
	case m.Result != nil:
		if m.ID[0] == 'n' {
			return invalid("success response has a null id")
		}
		m.Kind = KindResult
		return m, nil
	}
	if _, err := ParseError(m.Error); err != nil {
		return invalid(err.Error())
	}
	m.Kind = KindError
	return m, nil
}

func isVersion2(v []byte, escaped bool) bool {
	if !escaped {
		return string(v) == `"2.0"`
	}
	var s string
	return json.Unmarshal(v, &s) == nil && s == "2.0"
}

// ParseError decodes and checks a raw error object: "code" must be an integer
// and "message" a string.
func ParseError(raw []byte) (*Error, error) {
	if len(raw) == 0 || raw[0] != '{' {
		return nil, errString("error must be an object")
	}
	var probe struct {
		Code    json.RawMessage `json:"code"`
		Message *string         `json:"message"`
		Data    json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(raw, &probe); err != nil {
		return nil, errString("error object: " + err.Error())
	}
	if probe.Code == nil || probe.Message == nil {
		return nil, errString(`error object needs an integer "code" and a string "message"`)
	}
	code, err := strconv.ParseInt(string(probe.Code), 10, 64)
	if err != nil {
		return nil, errString(`error "code" must be an integer`)
	}
	e := &Error{Code: code, Message: *probe.Message}
	if probe.Data != nil && !bytes.Equal(probe.Data, null) {
		e.Data = probe.Data
	}
	return e, nil
}

type errString string

func (e errString) Error() string { return string(e) }
