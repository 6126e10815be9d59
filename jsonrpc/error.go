package jsonrpc

import (
	"encoding/json"
	"fmt"
	"strconv"
)

// The standard codes of JSON-RPC 2.0 (guarantee W3). -32000..-32099 are left to
// servers; agentwire's own use of that range is documented where it occurs.
const (
	CodeParseError     int64 = -32700 // not JSON; reply id is null
	CodeInvalidRequest int64 = -32600 // JSON, but not a valid message
	CodeMethodNotFound int64 = -32601
	CodeInvalidParams  int64 = -32602
	CodeInternalError  int64 = -32603 // handler error or recovered panic
	// CodeRequestCancelled is the LSP/ACP code for a request that was
	// cancelled with $/cancel_request and still answered.
	CodeRequestCancelled int64 = -32800
	// CodeServerBusy is agentwire's answer to a request it cannot take on:
	// every handler slot and queue place taken (or, with RejectWhenBusy,
	// every slot), too many open streams, or ACP's background limit
	// (guarantees C1, A4). data.reason says which.
	CodeServerBusy int64 = -32000
)

// Error is a JSON-RPC error object. A handler that returns an *Error (or an
// error wrapping one) has it sent exactly as given.
type Error struct {
	Code    int64           `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

func (e *Error) Error() string {
	if len(e.Data) > 0 {
		return fmt.Sprintf("jsonrpc error %d: %s (data: %s)", e.Code, e.Message, e.Data)
	}
	return "jsonrpc error " + strconv.FormatInt(e.Code, 10) + ": " + e.Message
}

// Is matches two errors with the same code, so errors.Is(err,
// jsonrpc.ErrMethodNotFound) holds for any -32601 error, whatever its text.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code
}

// Sentinels for errors.Is. They are compared by code only.
var (
	ErrParse            = &Error{Code: CodeParseError, Message: "Parse error"}
	ErrInvalidRequest   = &Error{Code: CodeInvalidRequest, Message: "Invalid Request"}
	ErrMethodNotFound   = &Error{Code: CodeMethodNotFound, Message: "Method not found"}
	ErrInvalidParams    = &Error{Code: CodeInvalidParams, Message: "Invalid params"}
	ErrInternal         = &Error{Code: CodeInternalError, Message: "Internal error"}
	ErrRequestCancelled = &Error{Code: CodeRequestCancelled, Message: "Request cancelled"}
)

// NewError builds an error object. data, when not nil, is marshalled to JSON;
// a json.RawMessage is used as it is.
func NewError(code int64, message string, data any) *Error {
	e := &Error{Code: code, Message: message}
	if data != nil {
		if raw, ok := data.(json.RawMessage); ok {
			e.Data = raw
		} else if b, err := json.Marshal(data); err == nil {
			e.Data = b
		}
	}
	return e
}

// Errorf builds an error object with a formatted message.
func Errorf(code int64, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// ID is a request id as raw JSON: a string token with its quotes, or a
// number exactly as written (guarantee W5: no float/int conversion, so 1.5, 1e3
// and 12345678901234567890 survive). The zero value means "no id". Two ids are
// the same when their bytes are the same.
type ID string

// Int64ID returns the id for a number.
func Int64ID(n int64) ID { return ID(strconv.FormatInt(n, 10)) }

// StringID returns the id for a string.
func StringID(s string) ID {
	b, _ := json.Marshal(s)
	return ID(b)
}

// NullID is the id of a reply to a message whose id could not be read.
const NullID ID = "null"

// IsZero reports whether the id is absent.
func (id ID) IsZero() bool { return id == "" }

// IsString reports whether the id is a JSON string.
func (id ID) IsString() bool { return len(id) > 0 && id[0] == '"' }

// MarshalJSON writes the raw id.
func (id ID) MarshalJSON() ([]byte, error) {
	if id == "" {
		return []byte("null"), nil
	}
	return []byte(id), nil
}

// UnmarshalJSON keeps the raw token, rejecting anything that is not a
// string, a number or null.
func (id *ID) UnmarshalJSON(b []byte) error {
	if len(b) == 0 || !Valid(b) {
		return errString("invalid id")
	}
	switch c := b[0]; {
	case c == '"' || c == '-' || isDigit(c) || c == 'n':
		*id = ID(b)
		return nil
	}
	return errString("id must be a string or a number")
}
