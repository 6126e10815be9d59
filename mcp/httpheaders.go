package mcp

import (
	"encoding/base64"
	"fmt"
	"strings"
)

// Headers of the Streamable HTTP transport (MCP 2026-07-28, Streamable HTTP:
// https://modelcontextprotocol.io/specification/2026-07-28/basic/transports/streamable-http).
const (
	HeaderProtocolVersion = "MCP-Protocol-Version"
	HeaderMethod          = "Mcp-Method"
	HeaderName            = "Mcp-Name"
	HeaderParamPrefix     = "Mcp-Param-"
	HeaderSessionID       = "Mcp-Session-Id"
)

// DecodeHeaderValue undoes the =?base64?...?= form values that are not
// plain ASCII travel in.
func DecodeHeaderValue(v string) (string, error) {
	inner, ok := strings.CutPrefix(v, "=?base64?")
	if !ok {
		return v, nil
	}
	inner, ok = strings.CutSuffix(inner, "?=")
	if !ok {
		return v, nil
	}
	b, err := base64.StdEncoding.Strict().DecodeString(inner)
	if err != nil {
		return "", fmt.Errorf("invalid base64 value: %v", err)
	}
	return string(b), nil
}

// EncodeHeaderValue returns v as it travels in an Mcp-Name or Mcp-Param-
// header: as it is when it is visible ASCII without surrounding spaces,
// otherwise (or when it looks like the encoded form) base64-encoded.
func EncodeHeaderValue(v string) string {
	plain := !strings.HasPrefix(v, "=?base64?") && v == strings.TrimSpace(v)
	for i := 0; plain && i < len(v); i++ {
		if v[i] < 0x20 || v[i] > 0x7e {
			plain = false
		}
	}
	if plain {
		return v
	}
	return "=?base64?" + base64.StdEncoding.EncodeToString([]byte(v)) + "?="
}
