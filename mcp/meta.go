package mcp

import (
	"encoding/json"
	"slices"
	"strings"

	"github.com/agentwire/agentwire/jsonrpc"
)

// The server side's reading of a request, shared by the server and the
// bridge: a 2026-07-28 request's _meta, initialize's params, the versions
// offered, and the methods whose results differ by era.

// CheckModernMeta checks the required per-request fields of a 2026-07-28
// request (guarantee E1) and returns its version: a missing or malformed
// field is -32602, an unknown version -32022 with data.supported and
// data.requested.
func CheckModernMeta(m *RequestMeta) (version string, err error) {
	if m == nil {
		return "", InvalidParams("invalid params: _meta with %q and %q is required", MetaProtocolVersion, MetaClientCapabilities)
	}
	for _, v := range ModernVersions {
		// The common case, without decoding: "2026-07-28" as sent.
		if len(m.ProtocolVersion) == len(v)+2 && string(m.ProtocolVersion[1:len(v)+1]) == v && m.ProtocolVersion[0] == '"' {
			version = v
		}
	}
	if version == "" {
		var ok bool
		if version, ok = jsonrpc.StringValue(m.ProtocolVersion); !ok {
			return "", InvalidParams("invalid params: _meta[%q] must be a string", MetaProtocolVersion)
		}
	}
	if !IsModern(version) {
		return "", jsonrpc.NewError(CodeUnsupportedProtocolVersion, "Unsupported protocol version",
			map[string]any{"supported": ModernVersions, "requested": version})
	}
	if len(m.ClientCapabilities) == 0 || m.ClientCapabilities[0] != '{' {
		return "", InvalidParams("invalid params: _meta[%q] is required and must be an object", MetaClientCapabilities)
	}
	if m.LogLevel != "" && !slices.Contains(LogLevels, m.LogLevel) || m.logLevelInvalid {
		return "", InvalidParams("invalid params: _meta[%q] must be one of %s", MetaLogLevel, strings.Join(LogLevels, ", "))
	}
	if len(m.ClientInfo) > 0 && m.ClientInfo[0] != '{' {
		return "", InvalidParams("invalid params: _meta[%q] must be an object", MetaClientInfo)
	}
	return version, nil
}

// CacheableMethods are the results that carry ttlMs and cacheScope (SEP-2549).
var CacheableMethods = []string{MethodToolsList, "prompts/list", "resources/list", "resources/templates/list", "resources/read"}

// LogLevels are the syslog severities of notifications/message, least
// severe first.
var LogLevels = []string{"debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"}

// InitializeParams are the params of a legacy initialize.
type InitializeParams struct {
	ProtocolVersion string          `json:"protocolVersion"`
	Capabilities    json.RawMessage `json:"capabilities"`
	ClientInfo      json.RawMessage `json:"clientInfo"`
}

// ParseInitialize reads initialize's params; without a protocolVersion
// they are -32602.
func ParseInitialize(raw []byte) (*InitializeParams, error) {
	var p InitializeParams
	if err := json.Unmarshal(raw, &p); err != nil || p.ProtocolVersion == "" {
		return nil, InvalidParams("invalid params: initialize needs protocolVersion, capabilities and clientInfo")
	}
	return &p, nil
}

// LegacyVersionFor is the version a server answers initialize with: the
// requested one when it is a legacy version agentwire speaks, and
// otherwise the latest legacy version (2025-11-25 lifecycle, version
// negotiation).
func LegacyVersionFor(requested string) string {
	if slices.Contains(LegacyVersions, requested) {
		return requested
	}
	return LatestLegacyVersion
}

// SupportedVersions are the protocol versions a server set to eras
// speaks, newest first: what server/discover lists and an unsupported
// version's error names.
func SupportedVersions(eras Eras) []string {
	switch eras {
	case ModernOnly:
		return ModernVersions
	case LegacyOnly:
		return LegacyVersions
	}
	return append(slices.Clone(ModernVersions), LegacyVersions...)
}

// RemovedInModern are the legacy methods a modern request may not use.
var RemovedInModern = []string{MethodInitialize, MethodPing, "logging/setLevel", "resources/subscribe", "resources/unsubscribe"}

// InvalidParams is a -32602 error with a formatted message.
func InvalidParams(format string, args ...any) error {
	return jsonrpc.Errorf(jsonrpc.CodeInvalidParams, format, args...)
}
