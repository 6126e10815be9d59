package middleware

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"time"

	"github.com/agentwire/agentwire/jsonrpc"
	"github.com/agentwire/agentwire/rpc"
)

// LogOptions configures Logging and LogOutbound. The zero value, or a nil
// *LogOptions, logs to slog.Default(): errors at Warn, cancellations at
// Info, successes at Debug.
type LogOptions struct {
	// Logger receives the records. Nil means slog.Default(), read when a
	// record is written (so a program that sets its default logger later
	// is obeyed).
	Logger *slog.Logger
	// Level is the level of a request that succeeded. Nil means
	// slog.LevelDebug: an operator running at Info sees every failure and
	// no line per healthy request; a slog.Leveler such as a
	// *slog.LevelVar changes it while running.
	Level slog.Leveler
	// ErrorLevel is the level of a request answered with an error (or,
	// outbound, a call that failed), and of a handler that panicked. Nil
	// means slog.LevelWarn.
	ErrorLevel slog.Leveler
	// CancelLevel is the level of a request whose context ended before it
	// was answered: cancelled by the peer or by the caller, or the
	// connection shutting down. (A Timeouts limit inside this middleware
	// answers the request with -32001: that is an error, at ErrorLevel.)
	// Nil means slog.LevelInfo.
	CancelLevel slog.Leveler
	// ParamsSize adds params_bytes, the size of the params. Params and
	// results themselves are never logged: they carry what users type and
	// what tools return, secrets included.
	ParamsSize bool
}

// The outcome attribute's values.
const (
	OutcomeOK         = "ok"
	OutcomeError      = "error"
	OutcomeCancelled  = "cancelled"
	OutcomePanic      = "panic"
	OutcomeUnanswered = "unanswered" // the handler returned rpc.ErrNoResponse
)

// logger is LogOptions resolved.
type logger struct {
	l                 *slog.Logger
	ok, fail, cancel  slog.Leveler
	paramsSize        bool
	reqMsg, notifyMsg string
}

func newLogger(o *LogOptions, reqMsg, notifyMsg string) *logger {
	lg := &logger{ok: slog.LevelDebug, fail: slog.LevelWarn, cancel: slog.LevelInfo, reqMsg: reqMsg, notifyMsg: notifyMsg}
	if o != nil {
		lg.l = o.Logger
		lg.paramsSize = o.ParamsSize
		if o.Level != nil {
			lg.ok = o.Level
		}
		if o.ErrorLevel != nil {
			lg.fail = o.ErrorLevel
		}
		if o.CancelLevel != nil {
			lg.cancel = o.CancelLevel
		}
	}
	return lg
}

func (lg *logger) logger() *slog.Logger {
	if lg.l != nil {
		return lg.l
	}
	return slog.Default()
}

// Logging returns a middleware that writes one record per inbound request
// or notification when it ends, through log/slog:
//
//	level=DEBUG msg="rpc request" method=tools/call id=7 tool=search duration=1.2ms outcome=ok
//	level=WARN msg="rpc request" method=tools/call id=8 tool=search duration=3ms outcome=error code=-32602 error="invalid params: ..."
//	level=INFO msg="rpc request" method=tools/call id=9 duration=2s outcome=cancelled cause="rpc: request cancelled by the peer"
//
// Attributes: method; id (as sent, absent for a notification, whose
// message is "rpc notification"); tool, prompt or uri for MCP's tools/call,
// prompts/get and resources/read|subscribe|unsubscribe (Target); duration;
// outcome (OutcomeOK, OutcomeError with code and error, OutcomeCancelled
// with cause, OutcomePanic, OutcomeUnanswered); params_bytes with
// LogOptions.ParamsSize. The code is the one rpc answers with: a
// *jsonrpc.Error's own, -32603 for any other error. A record whose level
// the logger does not enable costs two clock readings and nothing else:
// params are read only for a record that is written.
//
// Put it outermost (first in rpc.Options.Middleware) to see every
// request, refusals and timeouts of inner middleware included.
func Logging(opts *LogOptions) rpc.Middleware {
	lg := newLogger(opts, "rpc request", "rpc notification")
	return func(next rpc.Handler) rpc.Handler {
		return rpc.HandlerFunc(func(ctx context.Context, req *rpc.Request) (res any, err error) {
			start := time.Now()
			returned := false
			defer func() {
				if !returned { // panicking: rpc recovers it, and logs the stack
					lg.inbound(ctx, req, nil, time.Since(start), true)
				}
			}()
			res, err = next.Handle(ctx, req)
			returned = true
			lg.inbound(ctx, req, err, time.Since(start), false)
			return res, err
		})
	}
}

// LogOutbound returns an outbound middleware that writes one record per
// call or notification this side sends, when it ends: the same attributes
// as Logging, under the messages "rpc call" and "rpc notify". A call's
// error is OutcomeError with the peer's code when the peer answered with
// one (or a Limiter refused it), OutcomeCancelled when the caller's
// context ended first, and OutcomeError without a code otherwise (the
// connection lost, params that cannot be encoded). The target of an MCP
// call is read from params encoded once more (jsonrpc.RawValue: no cost
// for a json.RawMessage) only when the record is written.
func LogOutbound(opts *LogOptions) rpc.OutboundMiddleware {
	lg := newLogger(opts, "rpc call", "rpc notify")
	return func(next rpc.Invoker) rpc.Invoker {
		return func(ctx context.Context, call *rpc.OutboundCall) (res json.RawMessage, err error) {
			start := time.Now()
			returned := false
			defer func() {
				if !returned {
					lg.outbound(ctx, call, nil, time.Since(start), true)
				}
			}()
			res, err = next(ctx, call)
			returned = true
			lg.outbound(ctx, call, err, time.Since(start), false)
			return res, err
		}
	}
}

// outcome is how a request ended, as a record tells it.
type outcome struct {
	name    string
	level   slog.Leveler
	code    int64
	hasCode bool
	text    string // the error, or the cancellation's cause
}

func (lg *logger) inboundOutcome(ctx context.Context, req *rpc.Request, err error) outcome {
	if err == nil {
		return outcome{name: OutcomeOK, level: lg.ok}
	}
	if ctx.Err() != nil {
		return outcome{name: OutcomeCancelled, level: lg.cancel, text: context.Cause(ctx).Error()}
	}
	if errors.Is(err, rpc.ErrNoResponse) {
		return outcome{name: OutcomeUnanswered, level: lg.cancel}
	}
	o := outcome{name: OutcomeError, level: lg.fail, text: err.Error()}
	if req.IsNotification() {
		return o // nothing is answered
	}
	var je *jsonrpc.Error
	switch {
	case errors.As(err, &je):
		o.code = je.Code
		if je == err {
			o.text = je.Message
		}
	case errors.Is(err, rpc.ErrTooManyStreams):
		o.code = jsonrpc.CodeServerBusy
	default:
		o.code = jsonrpc.CodeInternalError
	}
	o.hasCode = true
	return o
}

func (lg *logger) inbound(ctx context.Context, req *rpc.Request, err error, d time.Duration, panicked bool) {
	var o outcome
	if panicked {
		o = outcome{name: OutcomePanic, level: lg.fail, code: jsonrpc.CodeInternalError, hasCode: !req.IsNotification()}
	} else {
		o = lg.inboundOutcome(ctx, req, err)
	}
	l := lg.logger()
	level := o.level.Level()
	if !l.Enabled(ctx, level) {
		return
	}
	msg := lg.reqMsg
	if req.IsNotification() {
		msg = lg.notifyMsg
	}
	lg.write(ctx, l, level, msg, req.Method, req.ID, req.Params, d, o)
}

func (lg *logger) outbound(ctx context.Context, call *rpc.OutboundCall, err error, d time.Duration, panicked bool) {
	var o outcome
	var je *jsonrpc.Error
	switch {
	case panicked:
		o = outcome{name: OutcomePanic, level: lg.fail}
	case err == nil:
		o = outcome{name: OutcomeOK, level: lg.ok}
	case errors.As(err, &je):
		o = outcome{name: OutcomeError, level: lg.fail, code: je.Code, hasCode: true, text: err.Error()}
		if je == err {
			o.text = je.Message
		}
	case ctx.Err() != nil:
		o = outcome{name: OutcomeCancelled, level: lg.cancel, text: context.Cause(ctx).Error()}
	default:
		o = outcome{name: OutcomeError, level: lg.fail, text: err.Error()}
	}
	l := lg.logger()
	level := o.level.Level()
	if !l.Enabled(ctx, level) {
		return
	}
	msg := lg.reqMsg
	if call.Notification {
		msg = lg.notifyMsg
	}
	var params []byte
	if hasTarget(call.Method) || lg.paramsSize {
		params, _ = jsonrpc.RawValue(call.Params)
		if string(params) == "null" {
			params = nil
		}
	}
	lg.write(ctx, l, level, msg, call.Method, call.ID, params, d, o)
}

// hasTarget reports whether method names a target Target reads.
func hasTarget(method string) bool {
	switch method {
	case "tools/call", "prompts/get", "resources/read", "resources/subscribe", "resources/unsubscribe":
		return true
	}
	return false
}

func (lg *logger) write(ctx context.Context, l *slog.Logger, level slog.Level, msg, method string, id jsonrpc.ID,
	params []byte, d time.Duration, o outcome) {
	var buf [10]slog.Attr
	a := append(buf[:0], slog.String("method", method))
	if id != "" {
		a = append(a, slog.String("id", string(id)))
	}
	if name, uri := Target(method, params); name != "" {
		a = append(a, slog.String(targetKey(method), name))
	} else if uri != "" {
		a = append(a, slog.String("uri", uri))
	}
	if lg.paramsSize {
		a = append(a, slog.Int("params_bytes", len(params)))
	}
	a = append(a, slog.Duration("duration", d), slog.String("outcome", o.name))
	if o.hasCode {
		a = append(a, slog.Int64("code", o.code))
	}
	switch {
	case o.name == OutcomeCancelled:
		a = append(a, slog.String("cause", o.text))
	case o.text != "":
		a = append(a, slog.String("error", o.text))
	}
	l.LogAttrs(ctx, level, msg, a...)
}
