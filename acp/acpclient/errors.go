package acpclient

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/agentwire/agentwire/acp"
	"github.com/agentwire/agentwire/jsonrpc"
)

// Sentinels callers branch on (errors.Is).
var (
	// ErrAuthRequired matches an *AuthRequiredError: the agent wants
	// authenticate (or a terminal login) before it opens sessions.
	ErrAuthRequired = errors.New("acpclient: authentication required")
	// ErrNotSupported matches a *NotSupportedError: the agent did not
	// advertise what the call needs, so nothing was sent.
	ErrNotSupported = errors.New("acpclient: not supported by the agent")
	// ErrSessionLost is the error of a session whose agent process was
	// restarted or whose connection ended: the agent no longer knows it.
	ErrSessionLost = errors.New("acpclient: session lost")
	// ErrClosed is returned by calls made after Close.
	ErrClosed = errors.New("acpclient: connection closed")
)

// AuthRequiredError is an agent's -32000 without a busy reason (the
// ACP's AuthRequired code): Methods is what the agent offers (the
// initialize result's authMethods).
type AuthRequiredError struct {
	Err     *jsonrpc.Error
	Methods []acp.AuthMethod
}

func (e *AuthRequiredError) Error() string {
	ids := make([]string, len(e.Methods))
	for i, m := range e.Methods {
		ids[i] = m.ID
	}
	msg := "acpclient: authentication required"
	if e.Err != nil && e.Err.Message != "" && !strings.EqualFold(e.Err.Message, "authentication required") {
		msg += ": " + e.Err.Message
	}
	if len(ids) > 0 {
		msg += " (methods: " + strings.Join(ids, ", ") + ")"
	}
	return msg
}

// Unwrap makes the error match ErrAuthRequired and the agent's error.
func (e *AuthRequiredError) Unwrap() []error { return []error{ErrAuthRequired, e.Err} }

// BusyError is an agent refusing for a limit: -32000 or -33000 with
// data.reason (prompt_in_progress, connection_busy, too_many_streams, …).
type BusyError struct {
	Reason string
	Limit  int
	Err    *jsonrpc.Error
}

func (e *BusyError) Error() string {
	s := "acpclient: agent busy: " + strings.ReplaceAll(e.Reason, "_", " ")
	if e.Limit > 0 {
		s += fmt.Sprintf(" (limit %d)", e.Limit)
	}
	return s
}

func (e *BusyError) Unwrap() error { return e.Err }

// NotSupportedError says which capability a call needed: nothing was sent.
type NotSupportedError struct {
	Method     string // the call
	Capability string // what the agent would have to advertise
}

func (e *NotSupportedError) Error() string {
	return fmt.Sprintf("acpclient: %s needs the agent's %s capability, which it did not advertise", e.Method, e.Capability)
}

func (e *NotSupportedError) Unwrap() error { return ErrNotSupported }

// VersionError is an agent answering initialize with a protocol version
// this client does not speak; the connection is closed.
type VersionError struct{ Agent int }

func (e *VersionError) Error() string {
	return fmt.Sprintf("acpclient: the agent speaks ACP version %d; this client speaks %d", e.Agent, acp.ProtocolVersion)
}

// busyReasons are the data.reason values of a refusal for a limit, which
// share -32000 with AuthRequired (agentwire's agent runtime marks them).
var busyReasons = map[string]bool{
	"prompt_in_progress": true, "connection_busy": true, "too_many_streams": true,
	"too_many_terminals": true, "too_many_connections": true, "server_busy": true,
}

// classify turns an agent's error response into the package's errors:
// -32000 is a *BusyError when its data names a limit and an
// *AuthRequiredError otherwise (as Zed reads it); -33000 with a reason is
// a *BusyError. Anything else is returned as it is.
func (c *Conn) classify(err error) error {
	var je *jsonrpc.Error
	if !errors.As(err, &je) {
		return err
	}
	switch je.Code {
	case acp.CodeBusy, acp.CodeResourceLimit:
		var d struct {
			Reason string `json:"reason"`
			Limit  int    `json:"limit"`
		}
		_ = json.Unmarshal(je.Data, &d)
		if busyReasons[d.Reason] || (je.Code == acp.CodeResourceLimit && d.Reason != "") {
			return &BusyError{Reason: d.Reason, Limit: d.Limit, Err: je}
		}
		if je.Code == acp.CodeBusy {
			return &AuthRequiredError{Err: je, Methods: c.AuthMethods()}
		}
	}
	return err
}
