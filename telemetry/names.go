package telemetry

import (
	"strconv"

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
	// encoded).
	ErrorTypeOther = "_OTHER"
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
