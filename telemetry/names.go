package telemetry

import (
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/agentwire/agentwire/acp"
	"github.com/agentwire/agentwire/jsonrpc"
	"github.com/agentwire/agentwire/mcp"
	"github.com/agentwire/agentwire/middleware"
	"go.opentelemetry.io/otel/attribute"
)

// The attribute keys spans and the operation-duration metrics carry. The
// first group is named by the OpenTelemetry semantic conventions (the GenAI
// conventions for MCP, the RPC and JSON-RPC conventions for ACP and plain
// JSON-RPC); the second is agentwire's own, under "agentwire.", for what
// the conventions do not name.
const (
	KeyMCPMethodName          = attribute.Key("mcp.method.name")
	KeyMCPProtocolVersion     = attribute.Key("mcp.protocol.version")
	KeyMCPSessionID           = attribute.Key("mcp.session.id")
	KeyMCPResourceURI         = attribute.Key("mcp.resource.uri")
	KeyJSONRPCRequestID       = attribute.Key("jsonrpc.request.id")
	KeyJSONRPCProtocolVersion = attribute.Key("jsonrpc.protocol.version")
	KeyGenAIToolName          = attribute.Key("gen_ai.tool.name")
	KeyGenAIPromptName        = attribute.Key("gen_ai.prompt.name")
	KeyGenAIOperationName     = attribute.Key("gen_ai.operation.name")
	KeyErrorType              = attribute.Key("error.type")
	KeyRPCResponseStatusCode  = attribute.Key("rpc.response.status_code")
	KeyRPCSystemName          = attribute.Key("rpc.system.name")
	KeyRPCMethod              = attribute.Key("rpc.method")
	KeyRPCMethodOriginal      = attribute.Key("rpc.method_original")
	KeyNetworkTransport       = attribute.Key("network.transport")
	KeyNetworkProtocolName    = attribute.Key("network.protocol.name")
	KeyNetworkProtocolVersion = attribute.Key("network.protocol.version")
	KeyServerAddress          = attribute.Key("server.address")
	KeyServerPort             = attribute.Key("server.port")

	// KeyEra is the MCP era a request is served in: "modern" (its _meta
	// names a 2026-07-28 protocol version, or the HTTP route decided so)
	// or "legacy".
	KeyEra = attribute.Key("agentwire.mcp.era")
	// KeyClientOwner is the verified OAuth identity of the caller on a
	// protected HTTP endpoint: the token's issuer and subject (or
	// "client:" and the client id, for a client acting for itself),
	// joined by a space. The MCP conventions name no attribute for it.
	KeyClientOwner = attribute.Key("agentwire.client.owner")
	// KeyACPSessionID is the ACP session a request names (its
	// params.sessionId).
	KeyACPSessionID = attribute.Key("agentwire.acp.session.id")
	// KeyRelay marks the span of a relay (agentwire tap) between a host
	// and a server.
	KeyRelay = attribute.Key("agentwire.relay")
	// KeyRelayDirection is which side sent the request a relay span is
	// for: "client" or "server".
	KeyRelayDirection = attribute.Key("agentwire.relay.direction")
	// KeyRelayOutcome says how a relay span ended without a response:
	// "abandoned" (pushed out by newer ones past the relay's bound) or
	// "unanswered" (still open at Close).
	KeyRelayOutcome = attribute.Key("agentwire.relay.outcome")
)

// The metric names of the operation durations and requests in flight,
// recorded by ServerMiddleware and ClientMiddleware. MCP uses the MCP
// conventions' names, ACP and plain JSON-RPC the RPC conventions'.
const (
	MetricMCPServerDuration    = "mcp.server.operation.duration"
	MetricMCPClientDuration    = "mcp.client.operation.duration"
	MetricRPCServerDuration    = "rpc.server.call.duration"
	MetricRPCClientDuration    = "rpc.client.call.duration"
	MetricServerActiveRequests = "agentwire.rpc.server.active_requests"
	MetricClientActiveRequests = "agentwire.rpc.client.active_requests"
)

// The values of error.type other than a JSON-RPC error code (which is
// recorded as its decimal string, "-32602").
const (
	// ErrorTypeToolError is a tools/call answered with a result whose
	// isError is true (a tool execution error).
	ErrorTypeToolError = "tool_error"
	// ErrorTypeCancelled is a request whose context was cancelled (by
	// the peer, the caller or the connection's shutdown) before it was
	// answered, or a relayed request the sender cancelled.
	ErrorTypeCancelled = "cancelled"
	// ErrorTypeTimeout is a request whose deadline passed first.
	ErrorTypeTimeout = "timeout"
	// ErrorTypeOther is any other failure without a JSON-RPC code (on the
	// calling side: the connection was lost, the params could not be
	// encoded). It is also, in the metrics, a JSON-RPC code outside the
	// known ones (see the package documentation), and the value of
	// mcp.method.name, rpc.method and mcp.protocol.version that the
	// protocol does not define.
	ErrorTypeOther = "_OTHER"
)

// The bounds on what a peer chooses, in spans and metrics (a method name,
// a tool name, a URI can be as long as a message).
const (
	// MaxSpanValueBytes bounds every string a peer chooses that a span
	// carries, in its name or an attribute: the method, the tool or
	// prompt name, the resource URI, the protocol version, the request
	// id, the ACP session id, an error message (the status description).
	// A longer one is cut at a UTF-8 boundary at or below it.
	MaxSpanValueBytes = 256
	// MaxMetricNameBytes bounds the tool or prompt name in the metrics
	// (cut the same way).
	MaxMetricNameBytes = 128
)

// Bucket boundaries, in seconds, the conventions advise for the duration
// histograms.
var (
	mcpDurationBuckets = []float64{0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 30, 60, 120, 300}
	rpcDurationBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10}
)

// The methods whose params name a target of the span name or a resource.
const (
	methodToolsCall   = "tools/call"
	methodPromptsGet  = "prompts/get"
	methodInitialize  = "initialize"
	operationExecTool = "execute_tool"
	rpcSystemJSONRPC  = "jsonrpc"
	eraModern         = "modern"
	eraLegacy         = "legacy"
)

// hasResourceURI reports whether an MCP method's params.uri names the
// resource (mcp.resource.uri).
func hasResourceURI(method string) bool {
	switch method {
	case "resources/read", "resources/subscribe", "resources/unsubscribe", "notifications/resources/updated":
		return true
	}
	return false
}

// clip returns s cut to at most n bytes at a UTF-8 boundary (a rune
// never split; invalid bytes are cut like any other). The cut is a copy,
// so that a span or a series does not keep a message-sized string alive;
// s itself is returned when it fits.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	i := n
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	if n-i >= utf8.UTFMax {
		i = n // not UTF-8 there: cut at n
	}
	return strings.Clone(s[:i])
}

// sessionDigest is mcp.session.id: the first 16 bytes of the SHA-256 of
// the Mcp-Session-Id, in hex. The raw id is a bearer capability (whoever
// holds it joins an unauthenticated session, and over HTTP+SSE it is in
// the URL), and traces are read by more people than the server trusts
// with its sessions; the digest still tells one session's requests from
// another's, and whoever holds an id can compute it to find its spans.
func sessionDigest(id string) string {
	sum := sha256.Sum256([]byte(id))
	return hex.EncodeToString(sum[:16])
}

// mcpMethods are the methods of MCP, both eras (2024-11-05 to
// 2026-07-28): the mcp package's and the specification's, which include
// the conventions' mcp.method.name values. Any other is _OTHER in the
// metrics.
var mcpMethods = stringSet(
	mcp.MethodDiscover, mcp.MethodInitialize, mcp.MethodInitialized, mcp.MethodPing,
	mcp.MethodToolsList, mcp.MethodToolsCall, mcp.MethodListen, mcp.MethodCancelled,
	mcp.MethodProgress, mcp.MethodAcknowledged, mcp.MethodToolsListChanged,
	mcp.MethodElicit, mcp.MethodSample, mcp.MethodListRoots,
	mcp.MethodTasksGet, mcp.MethodTasksUpdate, mcp.MethodTasksCancel, mcp.MethodTasksResult,
	mcp.MethodTasksList, mcp.MethodTasksNotification, mcp.MethodTasksStatus,
	"resources/list", "resources/templates/list", "resources/read", "resources/subscribe",
	"resources/unsubscribe", "prompts/list", "prompts/get", "completion/complete", "logging/setLevel",
	"notifications/message", "notifications/resources/list_changed", "notifications/resources/updated",
	"notifications/prompts/list_changed", "notifications/roots/list_changed",
	"notifications/elicitation/complete",
)

// acpMethods are the methods of ACP the acp package names.
var acpMethods = stringSet(
	acp.MethodInitialize, acp.MethodAuthenticate, acp.MethodSessionNew, acp.MethodSessionLoad,
	acp.MethodSessionResume, acp.MethodSetMode, acp.MethodSetConfigOption, acp.MethodSessionClose,
	acp.MethodPrompt, acp.MethodCancel, acp.MethodUpdate, acp.MethodRequestPermission,
	acp.MethodCancelRequest, acp.MethodMCPConnect, acp.MethodMCPMessage, acp.MethodMCPDisconnect,
	acp.MethodReadTextFile, acp.MethodWriteTextFile, acp.MethodTerminalCreate, acp.MethodTerminalOutput,
	acp.MethodTerminalWait, acp.MethodTerminalKill, acp.MethodTerminalRelease, acp.MethodLogout,
	acp.MethodSessionList, acp.MethodSessionDelete,
)

func stringSet(methods ...string) map[string]bool {
	m := make(map[string]bool, len(methods))
	for _, s := range methods {
		m[s] = true
	}
	return m
}

// knownCodes are the JSON-RPC error codes the metrics record by their
// number: JSON-RPC's own, and those MCP, ACP and agentwire define
// (-32000 busy or ACP's auth required, -32001 a request timeout or an
// unknown HTTP session, -32002 resource not found, -32020..-32022 MCP
// 2026-07-28's, -32042 URL elicitation required, -32800 request
// cancelled, -33000 and -33001 ACP's resource limit and agentwire's
// bridge unavailable). Any other is _OTHER there: a peer chooses the codes
// it answers with.
var knownCodes = codeSet(
	jsonrpc.CodeParseError, jsonrpc.CodeInvalidRequest, jsonrpc.CodeMethodNotFound,
	jsonrpc.CodeInvalidParams, jsonrpc.CodeInternalError, jsonrpc.CodeRequestCancelled,
	jsonrpc.CodeServerBusy, middleware.CodeRequestTimeout, acp.CodeResourceNotFound,
	mcp.CodeHeaderMismatch, mcp.CodeMissingRequiredClientCapability, mcp.CodeUnsupportedProtocolVersion,
	-32042, acp.CodeResourceLimit, acp.CodeBridgeUnavailable,
)

func codeSet(codes ...int64) map[string]bool {
	m := make(map[string]bool, len(codes))
	for _, c := range codes {
		m[strconv.FormatInt(c, 10)] = true
	}
	return m
}

// spanName is the conventions' span name: "{mcp.method.name} {target}"
// for MCP with a tool or prompt name, the method otherwise (the RPC
// conventions' name for JSON-RPC, which has no service).
func spanName(method, target string) string {
	if target == "" {
		return method
	}
	return method + " " + target
}

// codeString is a JSON-RPC error code as error.type and
// rpc.response.status_code record it, without an allocation for the
// standard codes.
func codeString(code int64) string {
	switch code {
	case -32700:
		return "-32700"
	case -32600:
		return "-32600"
	case -32601:
		return "-32601"
	case -32602:
		return "-32602"
	case -32603:
		return "-32603"
	case -32800:
		return "-32800"
	case -32000:
		return "-32000"
	case -32002:
		return "-32002"
	case -32042:
		return "-32042"
	}
	return strconv.FormatInt(code, 10)
}

// mcpVersions are the protocol versions agentwire speaks, both eras: any
// other is _OTHER in the metrics.
var mcpVersions = stringSet(append(slices.Clone(mcp.ModernVersions), mcp.LegacyVersions...)...)
