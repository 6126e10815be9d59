package telemetry

import (
	"go.opentelemetry.io/otel/attribute"

	"github.com/agentwire/agentwire/client"
	"github.com/agentwire/agentwire/mcp/bridge"
	"github.com/agentwire/agentwire/mcp/server"
	"github.com/agentwire/agentwire/mcp/streamable"
	"github.com/agentwire/agentwire/middleware"
	"github.com/agentwire/agentwire/rpc"
)

// The attribute values of the series, made once.
var (
	reasonConnBusy       = KeyRefusalReason.String("connection_busy")
	reasonTooManyStreams = KeyRefusalReason.String("too_many_streams")
	reasonMessageTooLong = KeyRefusalReason.String("message_too_long")
	violationParse       = KeyViolation.String(rpc.ViolationParse.String())
	violationInvalid     = KeyViolation.String(rpc.ViolationInvalid.String())

	restartRestarted = KeyRestartOutcome.String("restarted")
	restartFailed    = KeyRestartOutcome.String("failed")
	restartExhausted = KeyRestartOutcome.String("exhausted")

	reasonMaxConns       = KeyRefusalReason.String("max_conns")
	reasonMaxInFlight    = KeyRefusalReason.String("max_in_flight")
	reasonMaxStreams     = KeyRefusalReason.String("max_streams")
	reasonMaxBuffered    = KeyRefusalReason.String("max_buffered_bytes")
	reasonMaxBody        = KeyRefusalReason.String("max_body_bytes")
	reasonWriteTimeout   = KeyRefusalReason.String("write_timeout")
	reasonMaxSessions    = KeyRefusalReason.String("max_sessions")
	reasonSessionStreams = KeyRefusalReason.String("max_streams_per_session")
	reasonSSESessions    = KeyRefusalReason.String("sse_max_sessions")
	reasonSSEQueueFull   = KeyRefusalReason.String("sse_queue_full")

	rejectNotFound          = KeyRejectionReason.String("not_found")
	rejectForbidden         = KeyRejectionReason.String("forbidden")
	rejectUnauthorized      = KeyRejectionReason.String("unauthorized")
	rejectInvalidToken      = KeyRejectionReason.String("invalid_token")
	rejectInsufficientScope = KeyRejectionReason.String("insufficient_scope")
	rejectVerifierFailure   = KeyRejectionReason.String("verifier_failure")
	rejectUnknownSession    = KeyRejectionReason.String("unknown_session")
	rejectReplayGap         = KeyRejectionReason.String("replay_gap")
	rejectSSEUnknown        = KeyRejectionReason.String("sse_unknown_session")
	rejectSSEMissing        = KeyRejectionReason.String("sse_missing_session")
	rejectSSEModern         = KeyRejectionReason.String("sse_modern_refused")

	closeEvicted      = KeyConnCloseReason.String("evicted")
	closeIdle         = KeyConnCloseReason.String("idle")
	sessionStreamable = KeySessionKind.String("streamable")
	sessionSSE        = KeySessionKind.String("sse")

	reasonMaxSubscriptions = KeyRefusalReason.String("max_subscriptions")

	taskCompleted        = KeyTaskStatus.String("completed")
	taskFailed           = KeyTaskStatus.String("failed")
	taskCancelled        = KeyTaskStatus.String("cancelled")
	reasonMaxRunning     = KeyRefusalReason.String("max_running")
	reasonMaxListenTasks = KeyRefusalReason.String("max_listen_tasks")

	reasonRateLimited        = KeyRefusalReason.String("rate_limited")
	reasonConcurrencyLimited = KeyRefusalReason.String("concurrency_limited")
	directionInbound         = KeyDirection.String("inbound")
	directionOutbound        = KeyDirection.String("outbound")
	timeoutIdle              = KeyTimeoutKind.String("idle")
	timeoutMax               = KeyTimeoutKind.String("max")
	timeoutOutbound          = KeyTimeoutKind.String("outbound_max")
)

func emitConnStats(e *emitter, s rpc.Stats) {
	e.addInt(idRPCOutputQueued, s.OutputQueued)
	e.add(idRPCOutputBlocked, s.BlockedOnOutput.Seconds())
	e.addInt(idRPCPromotions, s.Promotions)
	e.addInt(idRPCLateResponses, s.LateResponses)
	e.addInt(idRPCUnknownResponses, s.UnknownResponses)
	e.addInt(idRPCRefusals, s.Rejected, reasonConnBusy)
	e.addInt(idRPCRefusals, s.StreamsRefused, reasonTooManyStreams)
	e.addInt(idRPCRefusals, s.TooLong, reasonMessageTooLong)
	e.addInt(idRPCBadInput, s.ParseErrors, violationParse)
	e.addInt(idRPCBadInput, s.InvalidMessages, violationInvalid)
	e.addInt(idRPCPanics, s.Panics)
	e.addInt(idRPCCancellations, s.Cancelled)
	e.addInt(idRPCQueued, s.Queued)
	e.addInt(idRPCStreams, s.Streams)
}

func emitClientStats(e *emitter, s client.Stats) {
	e.addInt(idStdoutViolations, s.Violations)
	e.addInt(idRPCLateResponses, s.LateResponses)
	e.addInt(idRPCUnknownResponses, s.UnknownResponses)
	e.addInt(idClientLost, int64(s.Lost))
	e.addInt(idClientRestarts, int64(s.Restarts), restartRestarted)
	e.addInt(idClientRestarts, int64(s.RestartsFailed), restartFailed)
	e.addInt(idClientRestarts, int64(s.RestartsExhausted), restartExhausted)
	// The connection to the server: what waits for it, and the time our
	// writers waited because it did not read.
	e.addInt(idRPCOutputQueued, s.OutputQueued)
	e.add(idRPCOutputBlocked, s.BlockedOnOutput.Seconds())
	e.addInt(idRPCPromotions, s.Promotions)
}

// ObserveHTTP observes a Streamable HTTP handler's Stats: what its limits
// refused (agentwire.http.refusals), the requests it refused otherwise
// (agentwire.http.rejections: 404, 403, 401, 400), and what it holds now
// (connections, requests, streams, buffered bytes, sessions).
func (m *Metrics) ObserveHTTP(h *streamable.Handler, attrs ...attribute.KeyValue) (stop func()) {
	if h == nil {
		return func() {}
	}
	return m.observe(attrs, func(e *emitter) { emitHTTPStats(e, h.Stats()) })
}

func emitHTTPStats(e *emitter, s streamable.Stats) {
	e.addInt(idHTTPRefusals, s.ConnsRefused, reasonMaxConns)
	e.addInt(idHTTPRefusals, s.Busy, reasonMaxInFlight)
	e.addInt(idHTTPRefusals, s.StreamsRefused, reasonMaxStreams)
	e.addInt(idHTTPRefusals, s.OverBudget, reasonMaxBuffered)
	e.addInt(idHTTPRefusals, s.TooLarge, reasonMaxBody)
	e.addInt(idHTTPRefusals, s.WriteTimeouts, reasonWriteTimeout)
	e.addInt(idHTTPRefusals, s.SessionsRefused, reasonMaxSessions)
	e.addInt(idHTTPRefusals, s.SessionStreamsRefused, reasonSessionStreams)
	e.addInt(idHTTPRefusals, s.SSE.SessionsRefused, reasonSSESessions)
	e.addInt(idHTTPRefusals, s.SSE.QueueFull, reasonSSEQueueFull)

	e.addInt(idHTTPRejections, s.NotFound, rejectNotFound)
	e.addInt(idHTTPRejections, s.Forbidden, rejectForbidden)
	e.addInt(idHTTPRejections, s.Unauthorized, rejectUnauthorized)
	e.addInt(idHTTPRejections, s.InvalidTokens, rejectInvalidToken)
	e.addInt(idHTTPRejections, s.InsufficientScope, rejectInsufficientScope)
	e.addInt(idHTTPRejections, s.VerifierFailures, rejectVerifierFailure)
	e.addInt(idHTTPRejections, s.UnknownSessions, rejectUnknownSession)
	e.addInt(idHTTPRejections, s.ReplayGaps, rejectReplayGap)
	e.addInt(idHTTPRejections, s.SSE.UnknownSessions, rejectSSEUnknown)
	e.addInt(idHTTPRejections, s.SSE.MissingSessions, rejectSSEMissing)
	e.addInt(idHTTPRejections, s.SSE.ModernRefused, rejectSSEModern)

	e.addInt(idHTTPConnections, int64(s.Conns))
	e.addInt(idHTTPConnsClosed, s.ConnsEvicted, closeEvicted)
	e.addInt(idHTTPConnsClosed, s.IdleClosed, closeIdle)
	e.addInt(idHTTPRequests, int64(s.InFlight))
	e.addInt(idHTTPStreams, int64(s.Streams))
	e.addInt(idHTTPBufferedBytes, s.BufferedBytes)
	e.addInt(idHTTPSessions, int64(s.Sessions), sessionStreamable)
	e.addInt(idHTTPSessions, int64(s.SSE.Sessions), sessionSSE)
	e.addInt(idHTTPAcceptErrors, s.AcceptErrors)
	e.addInt(idHTTPStoreErrors, s.StoreErrors)
}

// ObserveBridge observes a bridge's Stats: requests it gave up on (a slow
// client, the server lost), the listen streams and legacy sessions it
// relays to, and what its limits refused.
func (m *Metrics) ObserveBridge(b *bridge.Bridge, attrs ...attribute.KeyValue) (stop func()) {
	if b == nil {
		return func() {}
	}
	return m.observe(attrs, func(e *emitter) { emitBridgeStats(e, b.Stats()) })
}

func emitBridgeStats(e *emitter, s bridge.Stats) {
	e.addInt(idBridgeSlowClients, s.SlowClients)
	e.addInt(idBridgeLostRequests, s.ServerLost)
	e.addInt(idBridgeSharedStreams, int64(s.SharedStreams))
	e.addInt(idBridgeSessions, int64(s.Sessions))
	e.addInt(idBridgeUpstreamSubs, int64(s.UpstreamSubscriptions))
	e.addInt(idBridgeSessionDrops, s.SessionDrops)
	e.addInt(idBridgeRefusals, s.SubscriptionsRefused, reasonMaxSubscriptions)
}

// ObserveServer observes an MCP server's tasks (Server.TaskStats): the
// handlers running now, the tasks created and ended by status, and what
// the task limits refused.
func (m *Metrics) ObserveServer(s *server.Server, attrs ...attribute.KeyValue) (stop func()) {
	if s == nil {
		return func() {}
	}
	return m.observe(attrs, func(e *emitter) { emitTaskStats(e, s.TaskStats()) })
}

func emitTaskStats(e *emitter, s server.TaskStats) {
	e.addInt(idTasksRunning, s.Running)
	e.addInt(idTasksCreated, s.Created)
	e.addInt(idTasksEnded, s.Completed, taskCompleted)
	e.addInt(idTasksEnded, s.Failed, taskFailed)
	e.addInt(idTasksEnded, s.Cancelled, taskCancelled)
	e.addInt(idTasksRefusals, s.Refused, reasonMaxRunning)
	e.addInt(idTasksRefusals, s.ListenRefused, reasonMaxListenTasks)
	e.addInt(idTasksInputTimeouts, s.InputTimeouts)
}

// ObserveLimiter observes a middleware.Limiter's Stats: refusals by
// reason and direction, dropped notifications, and its per-key states.
func (m *Metrics) ObserveLimiter(l *middleware.Limiter, attrs ...attribute.KeyValue) (stop func()) {
	if l == nil {
		return func() {}
	}
	return m.observe(attrs, func(e *emitter) { emitLimitStats(e, l.Stats()) })
}

func emitLimitStats(e *emitter, s middleware.LimitStats) {
	for _, d := range [...]struct {
		c   middleware.LimitCounts
		dir attribute.KeyValue
	}{{s.Inbound, directionInbound}, {s.Outbound, directionOutbound}} {
		e.addInt(idLimitRefusals, d.c.RateLimited, reasonRateLimited, d.dir)
		e.addInt(idLimitRefusals, d.c.ConcurrencyLimited, reasonConcurrencyLimited, d.dir)
		e.addInt(idLimitDropped, d.c.Dropped, d.dir)
	}
	e.addInt(idLimitKeys, int64(s.Keys))
	e.addInt(idLimitEvictions, s.Evicted)
}

// ObserveTimeouts observes a middleware.Timeouts' Stats: requests ended
// by each limit, those running under one, and those whose handler
// outlives its timeout.
func (m *Metrics) ObserveTimeouts(t *middleware.Timeouts, attrs ...attribute.KeyValue) (stop func()) {
	if t == nil {
		return func() {}
	}
	return m.observe(attrs, func(e *emitter) { emitTimeoutStats(e, t.Stats()) })
}

func emitTimeoutStats(e *emitter, s middleware.TimeoutStats) {
	e.addInt(idTimeouts, s.IdleTimeouts, timeoutIdle)
	e.addInt(idTimeouts, s.MaxTimeouts, timeoutMax)
	e.addInt(idTimeouts, s.OutboundTimeouts, timeoutOutbound)
	e.addInt(idTimeoutRunning, s.Running)
	e.addInt(idTimeoutLinger, s.Lingering)
}
