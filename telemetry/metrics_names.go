package telemetry

import (
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// The names of the instruments Metrics makes, all agentwire's own (the
// semantic conventions name none of these). Units follow the
// conventions' rules: "s" and "By" are UCUM, a count's unit is the thing
// counted in braces, and no name repeats its unit or ends in "_total"
// (a Prometheus exposition adds the unit and "_total" itself:
// agentwire.rpc.output.blocked is agentwire_rpc_output_blocked_seconds_total).
// What holds now (a queue, open streams, tasks running) is an
// UpDownCounter, as the conventions advise for values that add up across
// objects; a Prometheus exposition shows it as a gauge.
const (
	// rpc.Conn (ObserveConn); the two responses counters also from
	// client.Client (ObserveClient).
	MetricRPCOutputQueued     = "agentwire.rpc.output.queued_bytes"
	MetricRPCOutputBlocked    = "agentwire.rpc.output.blocked"
	MetricRPCPromotions       = "agentwire.rpc.promotions"
	MetricRPCLateResponses    = "agentwire.rpc.late_responses"
	MetricRPCUnknownResponses = "agentwire.rpc.unknown_responses"
	MetricRPCRefusals         = "agentwire.rpc.refusals"
	MetricRPCBadInput         = "agentwire.rpc.bad_input"
	MetricRPCPanics           = "agentwire.rpc.panics"
	MetricRPCCancellations    = "agentwire.rpc.cancellations"
	MetricRPCQueued           = "agentwire.rpc.queued"
	MetricRPCStreams          = "agentwire.rpc.streams"

	// client.Client (ObserveClient, ObserveSession).
	MetricStdoutViolations = "agentwire.stdio.stdout_violations"
	MetricClientLost       = "agentwire.client.servers_lost"
	MetricClientRestarts   = "agentwire.client.restarts"

	// host.Session (ObserveSession, RecordConnectError): synchronous.
	MetricEraProbes        = "agentwire.mcp.era_probes"
	MetricEraProbeDuration = "agentwire.mcp.era_probe.duration"

	// process.ShutdownResult (RecordShutdown): synchronous.
	MetricShutdowns        = "agentwire.process.shutdowns"
	MetricShutdownDuration = "agentwire.process.shutdown.duration"

	// streamable.Handler (ObserveHTTP).
	MetricHTTPRefusals      = "agentwire.http.refusals"
	MetricHTTPRejections    = "agentwire.http.rejections"
	MetricHTTPConnections   = "agentwire.http.connections"
	MetricHTTPConnsClosed   = "agentwire.http.connections_closed"
	MetricHTTPRequests      = "agentwire.http.active_requests"
	MetricHTTPStreams       = "agentwire.http.streams"
	MetricHTTPBufferedBytes = "agentwire.http.buffered_bytes"
	MetricHTTPSessions      = "agentwire.http.sessions"
	MetricHTTPAcceptErrors  = "agentwire.http.accept_errors"
	MetricHTTPStoreErrors   = "agentwire.http.store_errors"

	// bridge.Bridge (ObserveBridge).
	MetricBridgeSlowClients   = "agentwire.bridge.slow_clients"
	MetricBridgeLostRequests  = "agentwire.bridge.lost_requests"
	MetricBridgeSharedStreams = "agentwire.bridge.shared_streams"
	MetricBridgeSessions      = "agentwire.bridge.sessions"
	MetricBridgeUpstreamSubs  = "agentwire.bridge.upstream_subscriptions"
	MetricBridgeSessionDrops  = "agentwire.bridge.session_drops"
	MetricBridgeRefusals      = "agentwire.bridge.refusals"

	// server.Server's tasks (ObserveServer).
	MetricTasksRunning       = "agentwire.mcp.tasks.running"
	MetricTasksCreated       = "agentwire.mcp.tasks.created"
	MetricTasksEnded         = "agentwire.mcp.tasks.ended"
	MetricTasksRefusals      = "agentwire.mcp.tasks.refusals"
	MetricTasksInputTimeouts = "agentwire.mcp.tasks.input_timeouts"

	// middleware.Limiter (ObserveLimiter) and middleware.Timeouts
	// (ObserveTimeouts).
	MetricLimitRefusals  = "agentwire.limit.refusals"
	MetricLimitDropped   = "agentwire.limit.dropped_notifications"
	MetricLimitKeys      = "agentwire.limit.keys"
	MetricLimitEvictions = "agentwire.limit.evictions"
	MetricTimeouts       = "agentwire.timeout.timeouts"
	MetricTimeoutRunning = "agentwire.timeout.running"
	MetricTimeoutLinger  = "agentwire.timeout.lingering"
)

// The attribute keys of those metrics' series.
const (
	// KeyRefusalReason says which limit refused: rpc's
	// "connection_busy", "too_many_streams" and "message_too_long";
	// HTTP's "max_conns", "max_in_flight", "max_streams",
	// "max_buffered_bytes", "max_body_bytes", "write_timeout",
	// "max_sessions", "max_streams_per_session", "sse_max_sessions",
	// "sse_queue_full"; the bridge's "max_subscriptions"; tasks'
	// "max_running" and "max_listen_tasks"; a Limiter's "rate_limited"
	// and "concurrency_limited".
	KeyRefusalReason = attribute.Key("agentwire.refusal.reason")
	// KeyRejectionReason says why HTTP refused a request that no limit
	// refused: "not_found", "forbidden", "unauthorized",
	// "invalid_token", "insufficient_scope", "verifier_failure",
	// "unknown_session", "replay_gap", "sse_unknown_session",
	// "sse_missing_session", "sse_modern_refused".
	KeyRejectionReason = attribute.Key("agentwire.rejection.reason")
	// KeyViolation is the kind of bad input (rpc.ViolationKind):
	// "parse" (not JSON) or "invalid" (not a valid message).
	KeyViolation = attribute.Key("agentwire.rpc.violation")
	// KeyRestartOutcome is what became of a lost server: "restarted",
	// "failed" (it could not be started, or its handshake failed) or
	// "exhausted" (the policy's restarts were used up).
	KeyRestartOutcome = attribute.Key("agentwire.restart.outcome")
	// KeyProbeOutcome is host.ProbeOutcome: "result", "modern-error",
	// "error", "timeout", "exit", "cached" or "none".
	KeyProbeOutcome = attribute.Key("agentwire.mcp.probe.outcome")
	// KeyShutdownOutcome is process.Outcome, the step of the ladder that
	// ended the server: "exited", "terminated" or "killed".
	KeyShutdownOutcome = attribute.Key("agentwire.shutdown.outcome")
	// KeyConnCloseReason is why HTTP closed a connection: "evicted" (to
	// make room under MaxConns) or "idle".
	KeyConnCloseReason = attribute.Key("agentwire.http.close.reason")
	// KeySessionKind is "streamable" (legacy Streamable HTTP sessions) or
	// "sse" (2024-11-05 HTTP+SSE sessions).
	KeySessionKind = attribute.Key("agentwire.http.session.kind")
	// KeyTaskStatus is the status a task ended in: "completed", "failed"
	// or "cancelled".
	KeyTaskStatus = attribute.Key("agentwire.mcp.task.status")
	// KeyDirection is "inbound" (requests served) or "outbound" (calls
	// sent) for a Limiter's counts.
	KeyDirection = attribute.Key("agentwire.direction")
	// KeyTimeoutKind is which limit of middleware.Timeouts ended a
	// request: "idle" or "max".
	KeyTimeoutKind = attribute.Key("agentwire.timeout.kind")
)

// Bucket boundaries, in seconds, of the synchronous histograms: a probe
// is bounded by ProbeTimeout (5 s) plus a process's start-up allowance,
// a shutdown by two Graces and a kill.
var (
	probeDurationBuckets    = []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30}
	shutdownDurationBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30}
)

// metricKind is the instrument an asynchronous metric is.
type metricKind uint8

const (
	kindCounter metricKind = iota // Int64ObservableCounter
	kindSeconds                   // Float64ObservableCounter, in s
	kindNow                       // Int64ObservableUpDownCounter: what holds now
)

// cumulative reports whether a removed source's last value is kept.
func (k metricKind) cumulative() bool { return k != kindNow }

type metricDef struct {
	name, unit, desc string
	kind             metricKind
}

func (d metricDef) make(m metric.Meter) (metric.Observable, error) {
	switch d.kind {
	case kindSeconds:
		return m.Float64ObservableCounter(d.name, metric.WithUnit(d.unit), metric.WithDescription(d.desc))
	case kindNow:
		return m.Int64ObservableUpDownCounter(d.name, metric.WithUnit(d.unit), metric.WithDescription(d.desc))
	}
	return m.Int64ObservableCounter(d.name, metric.WithUnit(d.unit), metric.WithDescription(d.desc))
}

// metricID indexes metricDefs and Metrics.observables.
type metricID uint8

const (
	idRPCOutputQueued metricID = iota
	idRPCOutputBlocked
	idRPCPromotions
	idRPCLateResponses
	idRPCUnknownResponses
	idRPCRefusals
	idRPCBadInput
	idRPCPanics
	idRPCCancellations
	idRPCQueued
	idRPCStreams

	idStdoutViolations
	idClientLost
	idClientRestarts

	idHTTPRefusals
	idHTTPRejections
	idHTTPConnections
	idHTTPConnsClosed
	idHTTPRequests
	idHTTPStreams
	idHTTPBufferedBytes
	idHTTPSessions
	idHTTPAcceptErrors
	idHTTPStoreErrors

	idBridgeSlowClients
	idBridgeLostRequests
	idBridgeSharedStreams
	idBridgeSessions
	idBridgeUpstreamSubs
	idBridgeSessionDrops
	idBridgeRefusals

	idTasksRunning
	idTasksCreated
	idTasksEnded
	idTasksRefusals
	idTasksInputTimeouts

	idLimitRefusals
	idLimitDropped
	idLimitKeys
	idLimitEvictions
	idTimeouts
	idTimeoutRunning
	idTimeoutLinger

	numMetricIDs
)

var metricDefs = [numMetricIDs]metricDef{
	idRPCOutputQueued:     {MetricRPCOutputQueued, "By", "Bytes waiting in connections' output queues, behind the block being written.", kindNow},
	idRPCOutputBlocked:    {MetricRPCOutputBlocked, "s", "Time writers and readers waited for room in a full output queue (backpressure), summed over them.", kindSeconds},
	idRPCPromotions:       {MetricRPCPromotions, "{handler}", "Handlers that outlived the inline budget and were handed off the read loop to a goroutine of their own.", kindCounter},
	idRPCLateResponses:    {MetricRPCLateResponses, "{response}", "Responses that arrived after their call was abandoned (cancelled or timed out).", kindCounter},
	idRPCUnknownResponses: {MetricRPCUnknownResponses, "{response}", "Responses matching no call.", kindCounter},
	idRPCRefusals:         {MetricRPCRefusals, "{refusal}", "Requests and lines a connection's limits refused, by reason.", kindCounter},
	idRPCBadInput:         {MetricRPCBadInput, "{message}", "Lines that were not JSON or not a valid JSON-RPC message.", kindCounter},
	idRPCPanics:           {MetricRPCPanics, "{panic}", "Handler panics recovered (answered -32603).", kindCounter},
	idRPCCancellations:    {MetricRPCCancellations, "{request}", "Requests cancelled by the peer.", kindCounter},
	idRPCQueued:           {MetricRPCQueued, "{request}", "Requests that waited in the admission queue for a handler slot.", kindCounter},
	idRPCStreams:          {MetricRPCStreams, "{stream}", "Handlers detached as long-lived streams.", kindCounter},

	idStdoutViolations: {MetricStdoutViolations, "{line}", "Lines on a server's stdout that were not JSON-RPC messages (stdout pollution), over every process the client ran.", kindCounter},
	idClientLost:       {MetricClientLost, "{server}", "Connections to a server that ended before the client closed: the server exited, crashed or closed its stdout.", kindCounter},
	idClientRestarts:   {MetricClientRestarts, "{restart}", "What became of lost servers: restarted, a restart that failed, or the restarts used up.", kindCounter},

	idHTTPRefusals:      {MetricHTTPRefusals, "{refusal}", "Connections and requests an HTTP endpoint's limits refused, by reason.", kindCounter},
	idHTTPRejections:    {MetricHTTPRejections, "{request}", "HTTP requests refused for what they asked or who asked (404, 403, 401, 400), by reason.", kindCounter},
	idHTTPConnections:   {MetricHTTPConnections, "{connection}", "Connections open on the endpoint's listeners.", kindNow},
	idHTTPConnsClosed:   {MetricHTTPConnsClosed, "{connection}", "Connections the endpoint closed: evicted to make room under MaxConns, or idle.", kindCounter},
	idHTTPRequests:      {MetricHTTPRequests, "{request}", "HTTP requests being served (MaxInFlight).", kindNow},
	idHTTPStreams:       {MetricHTTPStreams, "{stream}", "Open listen streams and sessions' GET streams (MaxStreams).", kindNow},
	idHTTPBufferedBytes: {MetricHTTPBufferedBytes, "By", "Request bytes held by requests being served (MaxBufferedBytes).", kindNow},
	idHTTPSessions:      {MetricHTTPSessions, "{session}", "Live sessions, by kind.", kindNow},
	idHTTPAcceptErrors:  {MetricHTTPAcceptErrors, "{error}", "Failed accepts (EMFILE, ENFILE, ...), each followed by a pause.", kindCounter},
	idHTTPStoreErrors:   {MetricHTTPStoreErrors, "{error}", "Failed calls to the EventStore or the SessionStore.", kindCounter},

	idBridgeSlowClients:   {MetricBridgeSlowClients, "{request}", "Requests cancelled because their client fell 256 notifications behind.", kindCounter},
	idBridgeLostRequests:  {MetricBridgeLostRequests, "{request}", "Requests that failed because the server behind the bridge was lost under them.", kindCounter},
	idBridgeSharedStreams: {MetricBridgeSharedStreams, "{stream}", "Listen streams open on the server, each shared by every client with the same filter.", kindNow},
	idBridgeSessions:      {MetricBridgeSessions, "{session}", "Initialized legacy sessions the server's changes are relayed to.", kindNow},
	idBridgeUpstreamSubs:  {MetricBridgeUpstreamSubs, "{subscription}", "URIs a legacy server is subscribed to on behalf of sessions.", kindNow},
	idBridgeSessionDrops:  {MetricBridgeSessionDrops, "{notification}", "Notifications not relayed to a session that fell behind.", kindCounter},
	idBridgeRefusals:      {MetricBridgeRefusals, "{refusal}", "Requests the bridge's limits refused, by reason.", kindCounter},

	idTasksRunning:       {MetricTasksRunning, "{task}", "Task handlers running in this process now (working or waiting for input).", kindNow},
	idTasksCreated:       {MetricTasksCreated, "{task}", "Tasks created here.", kindCounter},
	idTasksEnded:         {MetricTasksEnded, "{task}", "Tasks run here that ended, by status.", kindCounter},
	idTasksRefusals:      {MetricTasksRefusals, "{refusal}", "Tasks and task listen streams refused by a limit, by reason.", kindCounter},
	idTasksInputTimeouts: {MetricTasksInputTimeouts, "{request}", "Input requests of tasks that waited InputTimeout in vain.", kindCounter},

	idLimitRefusals:  {MetricLimitRefusals, "{request}", "Requests and calls a Limiter refused, by reason and direction.", kindCounter},
	idLimitDropped:   {MetricLimitDropped, "{notification}", "Notifications a Limiter dropped, by direction.", kindCounter},
	idLimitKeys:      {MetricLimitKeys, "{key}", "Per-key states a Limiter holds.", kindNow},
	idLimitEvictions: {MetricLimitEvictions, "{key}", "Per-key states a Limiter forgot to stay within MaxKeys.", kindCounter},
	idTimeouts:       {MetricTimeouts, "{request}", "Requests ended by a Timeouts limit, by kind.", kindCounter},
	idTimeoutRunning: {MetricTimeoutRunning, "{request}", "Requests running under a Timeouts limit now.", kindNow},
	idTimeoutLinger:  {MetricTimeoutLinger, "{request}", "Timed-out requests whose handler has not returned yet.", kindNow},
}
