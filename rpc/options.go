package rpc

import (
	"context"
	"log/slog"
	"time"

	"github.com/agentwire/agentwire/framing"
	"github.com/agentwire/agentwire/jsonrpc"
)

// Defaults of Options (guarantees C1, C3, C4, C5, W4).
const (
	DefaultMaxMessageBytes       = framing.DefaultMaxMessage // 16 MiB
	DefaultMaxConcurrentRequests = 256
	DefaultOutputQueueBytes      = framing.DefaultQueueLimit // 1 MiB
	DefaultWriteChunkBytes       = framing.DefaultWriteChunk // 16 KiB
	DefaultEndOfStreamTimeout    = 5 * time.Second
	DefaultShutdownTimeout       = 5 * time.Second
	DefaultInlineBudget          = 100 * time.Microsecond
	DefaultMaxBatchLength        = 1024
	DefaultMaxStreams            = 256
	DefaultMaxQueuedBytes        = 4 << 20
)

// CancelMethod describes one inbound cancellation notification (guarantee C8).
// Its params carry the id of the request to cancel in "requestId".
type CancelMethod struct {
	// Method is the notification's method, e.g. "notifications/cancelled".
	Method string
	// Silence stops everything else for the request once it is cancelled:
	// no more notifications from its handler and no response (MCP: "the
	// server ... must not send further messages for that request"). When
	// false the handler still answers, and a handler that returns its
	// context's error is answered with -32800 (ACP's $/cancel_request: "the
	// receiver still MUST send exactly one response").
	Silence bool
	// WithReason adds "reason" (the text of the context's cause) when
	// agentwire sends this cancellation for an abandoned call.
	WithReason bool
}

// MCPCancel and ACPCancel are the two cancellation notifications agentwire
// knows. The default Options honour both.
var (
	MCPCancel = CancelMethod{Method: "notifications/cancelled", Silence: true, WithReason: true}
	ACPCancel = CancelMethod{Method: "$/cancel_request"}
)

// Options configures a Conn. The zero value, or a nil *Options, means the
// documented defaults.
type Options struct {
	// MaxMessageBytes bounds one inbound line. A longer line is skipped
	// without being buffered and answered with -32600 (id null). Default 16 MiB.
	MaxMessageBytes int
	// MaxConcurrentRequests bounds the ordinary handlers running at once
	// (inline or not). A request that finds every slot taken waits in the
	// admission queue while reading goes on, so cancellations and responses
	// are always read. Barriers run in a lane of their own (one at a time)
	// and detached streams count against MaxStreams instead. Default 256.
	MaxConcurrentRequests int
	// MaxQueuedRequests bounds the requests waiting for a slot or held
	// behind a running barrier. A request that finds the queue full is
	// answered with BusyError at once; a notification that needs a handler
	// waits for a place (it has no reply to refuse with), pausing input.
	// Default: MaxConcurrentRequests.
	MaxQueuedRequests int
	// MaxQueuedBytes bounds the params bytes of the queued requests; a
	// single larger request still fits an empty queue. Default 4 MiB.
	MaxQueuedBytes int
	// MaxStreams bounds the handlers that called Request.Detach to become
	// long-lived streams (MCP's subscriptions/listen). Beyond it Detach
	// returns ErrTooManyStreams. Default 256.
	MaxStreams int
	// RejectWhenBusy answers a request that finds every slot taken with
	// BusyError at once instead of queueing it (ACP). Notifications still
	// queue.
	RejectWhenBusy bool
	// BusyError is the answer to a request refused for want of a slot or a
	// place in the queue. Default: -32000 "server busy" with data
	// {"reason":"connection_busy","limit":N}.
	BusyError *jsonrpc.Error
	// OutputQueueBytes bounds encoded output waiting to be written (guarantee
	// C3). Default 1 MiB.
	OutputQueueBytes int
	// WriteChunkBytes is the largest single write (guarantee C5). Default 16 KiB.
	WriteChunkBytes int
	// EndOfStreamTimeout is the grace admitted handlers get after input
	// EOF before their contexts are cancelled (guarantee C4). Default 5 s.
	EndOfStreamTimeout time.Duration
	// ShutdownTimeout bounds the wait for cancelled handlers and is the
	// no-progress deadline of the final output drain (guarantees C4, C5).
	// Default 5 s.
	ShutdownTimeout time.Duration
	// InlineBudget is how long a handler may run on the reading goroutine
	// before a new reader takes over input, leaving the handler to finish
	// where it is. Short handlers thus cost no goroutine hand-off, and slow
	// ones still run concurrently (guarantee C1). A negative value starts every
	// handler on its own goroutine. Default 100 µs.
	InlineBudget time.Duration
	// IsBarrier marks methods whose handler must finish before any later
	// request or notification is dispatched (guarantee C2), such as legacy MCP
	// "initialize" or ACP's control requests. Responses and cancellations
	// are still read while a barrier runs. Nil means no barriers.
	IsBarrier func(method string) bool
	// Admit, if set, is called for every request and notification in
	// receive order, on the reading goroutine, after its id is registered
	// and before its handler can start. A protocol uses it to reserve
	// resources in the order messages arrived (ACP reserves a session's
	// prompt before the prompt's handler runs, so a cancel right behind it
	// finds it). A returned error answers the request at once (a
	// *jsonrpc.Error as it is) and the handler never runs. Keep it short,
	// and do not call back into the connection from it: for a message held
	// behind a running barrier it runs under the connection's lock.
	Admit func(req *Request) error
	// RejectBatches answers every JSON array with one -32600 (id null), as
	// MCP >= 2025-06-18 and ACP require (guarantee W6). Default: batches accepted.
	RejectBatches bool
	// MaxBatchLength bounds the elements of one batch, so that a 16 MiB
	// line of tiny elements cannot make the batch reply unbounded. A longer
	// batch gets one -32600. Default 1024.
	MaxBatchLength int
	// AllowNullID accepts requests with "id": null (plain JSON-RPC 2.0
	// allows them; MCP and ACP do not). Default: answered with -32600.
	AllowNullID bool
	// Cancel lists the cancellation notifications honoured. Nil means
	// MCPCancel and ACPCancel; an empty, non-nil slice disables
	// cancellation by notification.
	Cancel []CancelMethod
	// OutboundCancel is sent when the context of a Call ends before its
	// response arrives ({"requestId": id}). Nil sends nothing.
	OutboundCancel *CancelMethod
	// QuietOnBadInput stops the connection from answering bad lines (the
	// client side of MCP must never write responses to a server). They are
	// still counted, logged and reported to OnViolation.
	QuietOnBadInput bool
	// Logger receives diagnostics. Nil means slog.Default(), which writes
	// to standard error (guarantee C9); library code never writes to stdout.
	Logger *slog.Logger
	// FatalViolations ends the connection (Wait returns an error matching
	// ErrProtocolViolation) at the first line that is not a valid message or
	// response to an unknown call: the strict mode of a client. Default: bad
	// input is counted, logged and survived.
	FatalViolations bool
	// Context, if set, is the parent of every handler's context: when it
	// ends, running handlers see their contexts end with its cause (the
	// connection itself goes on until its input ends or it is closed). An
	// HTTP transport passes the request's context, so a client that goes
	// away cancels its request. Default context.Background().
	Context context.Context
	// OnViolation, if set, is called (on the reading goroutine; keep it
	// short) for every line that is not a valid message, every response
	// with an unknown id and every late response.
	OnViolation func(Violation)
	// Middleware wraps the connection's handler, the first outermost
	// (Chain): request logging, timeouts, limits, tracing. Nil: the handler
	// is called directly, at no cost.
	Middleware []Middleware
	// Outbound wraps every Call, CallWithID and Notify of the connection,
	// the first outermost: what this side sends, logged, limited or traced.
	// Nil: nothing is added to a call.
	Outbound []OutboundMiddleware
}

// ViolationKind classifies a Violation.
type ViolationKind uint8

const (
	ViolationParse           ViolationKind = iota + 1 // not JSON
	ViolationInvalid                                  // JSON, not a valid message
	ViolationTooLong                                  // over MaxMessageBytes
	ViolationUnknownResponse                          // response to no call of ours
	ViolationLateResponse                             // response to a call already abandoned
)

var violationNames = [...]string{"", "parse", "invalid", "too_long", "unknown_response", "late_response"}

func (k ViolationKind) String() string {
	if int(k) < len(violationNames) {
		return violationNames[k]
	}
	return "violation"
}

// Violation describes one piece of bad input.
type Violation struct {
	Kind ViolationKind
	// Line holds up to the first 256 bytes of the offending line.
	Line []byte
	Err  error
}

// settings is Options with every default filled in. A connection only
// reads them, so that connections made from one Prepared share them.
type settings struct {
	Options
	// outbound is Options.Outbound composed once; nil without any.
	outbound Invoker
}

// Prepared is a set of Options resolved once, for a transport that makes a
// connection per exchange with the same options (one per HTTP request):
// its connections share the resolved options instead of each copying and
// resolving its own, which on that path was a tenth of a connection's
// memory and of the work of making it. A Prepared is never changed; it is
// safe for concurrent use.
type Prepared struct {
	s *settings
}

// Prepare resolves opts (nil: the defaults) for connections made later
// with Prepared.NewMessages. opts is copied, but what it points to (the
// Cancel slice, BusyError, the functions) is shared by every connection
// and must not be changed afterwards.
func Prepare(opts *Options) *Prepared { return &Prepared{s: resolve(opts)} }

// busyError is the answer to a request refused for want of a slot. The
// default is made when it is needed, not per connection: a connection of
// one HTTP request would pay for encoding it every time.
func (s *settings) busyError() *jsonrpc.Error {
	if s.BusyError != nil {
		return s.BusyError
	}
	return jsonrpc.NewError(jsonrpc.CodeServerBusy, "server busy: too many requests in flight",
		map[string]any{"reason": "connection_busy", "limit": s.MaxConcurrentRequests})
}

func resolve(o *Options) *settings {
	s := new(settings)
	if o != nil {
		s.Options = *o
	}
	if s.MaxMessageBytes <= 0 {
		s.MaxMessageBytes = DefaultMaxMessageBytes
	}
	if s.MaxConcurrentRequests <= 0 {
		s.MaxConcurrentRequests = DefaultMaxConcurrentRequests
	}
	if s.MaxQueuedRequests <= 0 {
		s.MaxQueuedRequests = s.MaxConcurrentRequests
	}
	if s.MaxQueuedBytes <= 0 {
		s.MaxQueuedBytes = DefaultMaxQueuedBytes
	}
	if s.MaxStreams <= 0 {
		s.MaxStreams = DefaultMaxStreams
	}
	if s.OutputQueueBytes <= 0 {
		s.OutputQueueBytes = DefaultOutputQueueBytes
	}
	if s.WriteChunkBytes <= 0 {
		s.WriteChunkBytes = DefaultWriteChunkBytes
	}
	if s.EndOfStreamTimeout <= 0 {
		s.EndOfStreamTimeout = DefaultEndOfStreamTimeout
	}
	if s.ShutdownTimeout <= 0 {
		s.ShutdownTimeout = DefaultShutdownTimeout
	}
	if s.InlineBudget == 0 {
		s.InlineBudget = DefaultInlineBudget
	}
	if s.MaxBatchLength <= 0 {
		s.MaxBatchLength = DefaultMaxBatchLength
	}
	if s.Cancel == nil {
		s.Cancel = []CancelMethod{MCPCancel, ACPCancel}
	}
	s.outbound = outboundChain(s.Outbound)
	if s.Logger == nil {
		s.Logger = slog.Default()
	}
	return s
}
