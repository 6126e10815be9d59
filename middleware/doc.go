// Package middleware is ordinary middleware built on rpc's hooks
// (rpc.Middleware, rpc.OutboundMiddleware, Request.OnNotify): structured
// request logging (Logging, LogOutbound), per-method timeouts that reset on
// progress with a maximum (NewTimeout; Timeouts.Outbound bounds the calls
// this side makes by the same Max), and concurrency and rate limits per
// method or per client, inbound and outbound (NewLimit). None of it knows more of a protocol than
// the method and params of a message, and Target, which reads the tool,
// prompt or resource an MCP request names.
//
//	lim := middleware.NewLimit(&middleware.LimitOptions{
//		Methods: map[string]middleware.Limit{"tools/call": {Concurrent: 8, Rate: 20}},
//		Key:     middleware.ByIdentity,
//	})
//	to := middleware.NewTimeout(&middleware.TimeoutOptions{
//		Methods: map[string]middleware.Limits{"tools/call": {Idle: 30 * time.Second, Max: 5 * time.Minute}},
//	})
//	opts := &rpc.Options{Middleware: []rpc.Middleware{
//		middleware.Logging(nil), lim.Middleware(), to.Middleware(),
//	}}
//
// # Where it runs
//
// An rpc.Middleware runs where the handler runs: inline on the connection's
// reading goroutine for a short request (rpc hands input to a new reader
// only once a handler outlives the inline budget, 100 µs), on a goroutine of
// its own for a long one. So none of these ever blocks. A Limiter refuses
// a request over its limit at once instead of waiting for room (a queue is
// rpc's admission, with its own bounds); Timeouts arms one timer and
// waits only for the handler it wraps; Logging writes one record, through
// whatever slog.Handler it is given (which should not block either). An
// rpc.OutboundMiddleware runs on the caller's goroutine, around Conn.Call,
// CallWithID and Notify.
//
// # Composition
//
// rpc.Options.Middleware lists them outermost first (rpc.Chain): the
// first sees a request first and its answer last. The order that reads
// best is tracing, then Logging (so the record shows refusals and timeouts
// as the error codes the peer received), then the Limiter (a refused
// request starts no timer), then Timeouts, nearest the handler. A server
// built on mcp/server or acp passes them in the options it gives rpc
// (server.ConnOptions, acp.ConnOptions keep them); client.Options and the
// host's and ACP client's transports carry Middleware and Outbound through.
//
// Timeouts resets its idle wait from Request.OnNotify; every function
// registered on a request is called, so a middleware inside it that
// listens too (a tracer) does not take Timeouts' place.
//
// # Cost
//
// With no middleware rpc calls the handler directly: nothing here costs
// anything unless it is configured. A Limiter without limits, and a nil
// *Limiter or *Timeouts, return middleware that adds no wrapper at all.
// Configured, each costs one function call per request plus: Logging two
// clock readings (and a record only when its level is enabled, which is
// when params are read); a Limiter one map lookup of the method and, for a
// limited method, one mutex-guarded map lookup per key (no allocation for
// a key already known); Timeouts a context and one timer per timed request
// (six small allocations; notifications are not timed), and one clock
// reading per notification the handler sends. BenchmarkMiddleware measures
// each.
//
// # Limits and their defaults
//
// Every bound has a default, a counter and a log line when it refuses (one
// per burst: the first at once, then at most one per 10 s carrying how
// many were suppressed):
//
//   - Timeouts: DefaultIdle (60 s without progress) and DefaultMax
//     (10 min); TimeoutStats.IdleTimeouts and MaxTimeouts; a timed-out
//     request is answered -32001 "Request timed out", with data
//     {"reason":"timeout","limit_ms":N,"kind":"idle"|"max"}, after its
//     handler returns (Timeouts.Middleware says why it waits).
//   - Limiter: nothing is limited unless configured. A refusal is answered
//     -32000 (LimitOptions.Code), with data
//     {"reason":"rate_limited"|"concurrency_limited","method":M,"limit":N},
//     and counted in LimitStats by reason; a refused notification is
//     dropped and counted. DefaultMaxKeys (10000) bounds the per-key state,
//     the least recently used forgotten (LimitStats.Evicted), so a client
//     inventing keys cannot grow memory.
//
// Every clock is injectable (TimeoutOptions.Clock, LimitOptions.Clock), and
// the tests run the timers in testing/synctest bubbles.
package middleware
