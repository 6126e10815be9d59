package mcp

import (
	"encoding/json"
	"slices"
	"strings"

	"github.com/agentwire/agentwire/jsonrpc"
)

// checkModernMeta checks the required per-request fields (guarantee E1).
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

// cacheable are the results that carry ttlMs and cacheScope (SEP-2549).
var CacheableMethods = []string{MethodToolsList, "prompts/list", "resources/list", "resources/templates/list", "resources/read"}

// LogLevels are the syslog severities of notifications/message, least
// severe first.
var LogLevels = []string{"debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"}

type InitializeParams struct {
	ProtocolVersion string          `json:"protocolVersion"`
	Capabilities    json.RawMessage `json:"capabilities"`
	ClientInfo      json.RawMessage `json:"clientInfo"`
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

// removedInModern are the legacy methods a modern request may not use.
var RemovedInModern = []string{MethodInitialize, MethodPing, "logging/setLevel", "resources/subscribe", "resources/unsubscribe"}

func InvalidParams(format string, args ...any) error {
	return jsonrpc.Errorf(jsonrpc.CodeInvalidParams, format, args...)
}
