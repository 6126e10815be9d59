package rpc

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"unsafe"

	"github.com/agentwire/agentwire/framing"
	"github.com/agentwire/agentwire/jsonrpc"
)

// The message seam. A Conn runs over one of two kinds of transport:
//
//	a byte stream   New(r, w, ...): newline-delimited lines (framing's
//	                LineReader in, framing.Output out: a bounded queue whose
//	                replies to a burst leave in one write)
//	whole messages  NewMessages(r, w, ...): a MessageReader hands over one
//	                message at a time, a MessageWriter takes one Outbound
//	                at a time; there is no framing, no line buffer and no
//	                copy. With a nil MessageReader the transport pushes
//	                messages itself (Receive, ReceiveDecoded) on its own
//	                goroutines, and a request's handler runs on the
//	                goroutine that pushed it: an HTTP POST is served on
//	                the goroutine net/http gave it.
//
// Everything above the seam — admission, barriers, cancellation, the order
// of a request's notifications and its response, shutdown — is the same
// code on both.

// MessageReader is the input of a connection over whole messages.
type MessageReader interface {
	// ReadMessage returns the next message: one JSON value (an object,
	// or an array for a batch), without framing. The connection owns the
	// returned slice from then on and never writes to it. io.EOF is the end
	// of input (the end-of-stream grace follows, guarantee C4); any other
	// error ends the connection as a read error. If the reader is also an
	// io.Closer, the connection closes it at shutdown to unblock a read.
	ReadMessage() ([]byte, error)
}

// MessageWriter is the output of a connection over whole messages.
type MessageWriter interface {
	// WriteMessage sends one message. The connection calls it from one
	// goroutine at a time, in the order it has ordered its messages (a
	// request's notifications before its response, guarantee W8), and waits
	// for it: a writer that blocks is the connection's backpressure, so a
	// writer bounds its own waiting (agentwire's HTTP transport gives every
	// write a no-progress deadline). m and the bytes it refers to are valid
	// only during the call. An error ends output for good (guarantees C5,
	// C6): nothing is written after it and the connection shuts down. If
	// the writer is also an io.Closer, the connection closes it last.
	WriteMessage(m *Outbound) error
}

// Outbound is one message a connection sends over a MessageWriter, with
// what a transport routes on already known: the kind, the id, the method,
// and the error of an error response, so that a transport can choose (say)
// an HTTP status before anything is encoded and never decodes its own
// output.
type Outbound struct {
	// Kind is KindResult, KindError, KindNotification, KindRequest, or
	// KindBatch for the reply to a batch.
	Kind jsonrpc.Kind
	// ID is the id of a response or of a request; empty otherwise (and for
	// an error response to a message whose id was unreadable: "id":null).
	ID jsonrpc.ID
	// Method is the method of a request or notification.
	Method string
	// Error is the error of an error response.
	Error *jsonrpc.Error
	// Params is the params of a request or notification; nil when absent.
	Params json.RawMessage
	// Related is the id of the inbound request this message belongs to: the
	// request a response answers (the same as ID), or the running request
	// on whose behalf a notification or request is sent (Request.Notify,
	// or Conn.Call and Conn.Notify with a context derived from the
	// handler's). Empty for a message sent outside any request. A
	// transport with several output streams (Streamable HTTP sessions)
	// routes on it: a request's progress belongs on that request's stream.
	Related jsonrpc.ID

	// parts are the message's pieces, viewed as strings (16 bytes a
	// header rather than 24): the Outbound lives inside every Conn, which
	// is kept in a small size class. Nothing writes to the bytes.
	parts [5]string
	n     int
}

func (m *Outbound) part(i int) []byte {
	return unsafe.Slice(unsafe.StringData(m.parts[i]), len(m.parts[i]))
}

// Len is the length of the encoded message.
func (m *Outbound) Len() int {
	n := 0
	for _, p := range m.parts[:m.n] {
		n += len(p)
	}
	return n
}

// AppendTo appends the encoded message (without a newline) to dst.
func (m *Outbound) AppendTo(dst []byte) []byte {
	for _, p := range m.parts[:m.n] {
		dst = append(dst, p...)
	}
	return dst
}

// WriteTo writes the encoded message (without a newline) to w, in the
// pieces it is made of: the raw result of a response is not copied.
func (m *Outbound) WriteTo(w io.Writer) (int64, error) {
	var total int64
	for i := range m.n {
		p := m.part(i)
		if len(p) == 0 {
			continue
		}
		n, err := w.Write(p)
		total += int64(n)
		if err != nil {
			return total, err
		}
	}
	return total, nil
}

// head is what a connection knows of a message it sends, besides its bytes.
type head struct {
	kind    jsonrpc.Kind
	id      jsonrpc.ID
	method  string
	err     *jsonrpc.Error
	params  []byte
	related jsonrpc.ID
}

func resultHead(id jsonrpc.ID) head { return head{kind: jsonrpc.KindResult, id: id, related: id} }

func errorHead(id jsonrpc.ID, e *jsonrpc.Error) head {
	if id == jsonrpc.NullID {
		id = ""
	}
	return head{kind: jsonrpc.KindError, id: id, err: e, related: id}
}

// errMessageTooLong is what a MessageReader's over-long message counts as:
// the same refusal as an over-long line.
var errMessageTooLong = fmt.Errorf("rpc: message too long: %w", framing.ErrLineTooLong)

// ErrNotPushed is returned by Receive, ReceiveDecoded and EndInput on a
// connection that reads its own input (New, or NewMessages with a reader).
var ErrNotPushed = errors.New("rpc: the connection reads its own input")

// ErrInputEnded is returned by Receive and ReceiveDecoded after EndInput or
// once shutdown has begun: the message was not processed.
var ErrInputEnded = errors.New("rpc: input has ended")

// stringBytes views s as bytes without copying, for strings that point into
// a message copy nothing writes to (ids); the bytes are only read.
func stringBytes(s string) []byte {
	if s == "" {
		return nil
	}
	return unsafe.Slice(unsafe.StringData(s), len(s))
}
