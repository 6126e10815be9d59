package acpdemo

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/agentwire/agentwire/acp"
	"github.com/agentwire/agentwire/mcp"
)

// mcpPrompt serves the prompt "mcp NAME TOOL {json args}": it calls TOOL on
// the MCP server named NAME that the client offered over the ACP connection
// (a {type:"acp"} entry of the session's mcpServers), and streams the
// tool's text back as one message chunk. rest is what follows "mcp ".
func mcpPrompt(ctx context.Context, t *acp.Turn, rest string) (acp.StopReason, error) {
	name, rest, _ := strings.Cut(strings.TrimSpace(rest), " ")
	tool, args, _ := strings.Cut(strings.TrimSpace(rest), " ")
	if name == "" || tool == "" {
		return "", fmt.Errorf("mcp wants a server name, a tool and JSON arguments, as in: mcp tools echo {\"text\":\"hi\"}")
	}
	var arguments json.RawMessage
	if args = strings.TrimSpace(args); args != "" {
		if !json.Valid([]byte(args)) {
			return "", fmt.Errorf("mcp: the arguments of %s are not JSON: %s", tool, args)
		}
		arguments = json.RawMessage(args)
	}
	serverID := ""
	for _, s := range t.Session.MCPServers() {
		if s.Type == "acp" && s.Name == name {
			serverID = s.ServerID
			break
		}
	}
	if serverID == "" {
		return "", fmt.Errorf("mcp: the session declared no MCP server named %q served over ACP", name)
	}
	mc, err := t.ConnectMCP(ctx, serverID)
	if err != nil {
		return "", err
	}
	defer mc.Close(context.WithoutCancel(ctx))
	// A legacy lifecycle: the provider serves a dual-era server, which
	// takes initialize on a connection and keeps its state for it.
	if _, err := mc.Call(ctx, "initialize", map[string]any{
		"protocolVersion": mcp.LatestLegacyVersion,
		"capabilities":    map[string]any{},
		"clientInfo":      map[string]any{"name": "agentwire-acp-example", "version": "1.0.0"},
	}); err != nil {
		return "", fmt.Errorf("mcp: initialize %s: %w", name, err)
	}
	if err := mc.Notify(ctx, "notifications/initialized", nil); err != nil {
		return "", err
	}
	params := map[string]any{"name": tool}
	if arguments != nil {
		params["arguments"] = arguments
	}
	res, err := mc.Call(ctx, "tools/call", params)
	if err != nil {
		return "", fmt.Errorf("mcp: %s on %s: %w", tool, name, err)
	}
	var r struct {
		Content []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"content"`
		IsError bool `json:"isError"`
	}
	if err := json.Unmarshal(res, &r); err != nil {
		return "", fmt.Errorf("mcp: malformed tools/call result: %w", err)
	}
	var text strings.Builder
	if r.IsError {
		text.WriteString("tool error: ")
	}
	for _, c := range r.Content {
		if c.Type == "text" {
			text.WriteString(c.Text)
		}
	}
	return acp.EndTurn, t.MessageChunk(text.String())
}
