package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"github.com/agentwire/agentwire/mcp"
	"github.com/agentwire/agentwire/mcp/host"
	"github.com/agentwire/agentwire/mcp/streamable"
)

// runCore runs a scenario other than the OAuth ones: connect with the
// capabilities the scenarios ask about, list the tools, then what the
// scenario tests.
func runCore(ctx context.Context, serverURL, scenario string, opts *host.Options) error {
	opts.Capabilities = map[string]any{"elicitation": map[string]any{}, "sampling": map[string]any{}, "roots": map[string]any{"listChanged": true}}
	opts.OnInput = answer
	sess, err := streamable.Connect(ctx, serverURL, opts, nil)
	if err != nil {
		return err
	}
	defer sess.Close()

	tools, err := sess.ListTools(ctx)
	if scenario == "initialize" {
		return nil // the handshake is the scenario; a server without tools may refuse the list
	}
	if err != nil {
		return err
	}
	switch scenario {
	case "tools_call":
		_, err = sess.CallTool(ctx, "add_numbers", map[string]any{"a": 5, "b": 3})
	case "elicitation-sep1034-client-defaults":
		_, err = sess.CallTool(ctx, "test_client_elicitation_defaults", nil)
	case "sse-retry":
		_, err = sess.CallTool(ctx, "test_reconnection", nil)
	case "request-metadata":
		// Connecting (server/discover, retried after the server's -32022)
		// and listing were the scenario.
	case "sep-2322-client-request-state":
		for _, name := range []string{"test_mrtr_echo_state", "test_mrtr_no_state", "test_mrtr_unrelated", "test_mrtr_no_result_type"} {
			if _, err = sess.CallTool(ctx, name, nil); err != nil {
				break
			}
		}
	case "http-standard-headers":
		err = standardHeaders(ctx, sess, tools)
	case "http-custom-headers":
		err = customHeaders(ctx, sess)
	case "http-invalid-tool-headers":
		// ListTools dropped the tools whose annotations are invalid.
		for _, t := range tools {
			if _, err = sess.CallTool(ctx, t.Name, map[string]any{"region": "us-west1"}); err != nil {
				break
			}
		}
	case "json-schema-ref-no-deref":
		// Listing without fetching any $ref was the scenario.
	case "json-schema-2020-12-preservation":
		for _, t := range tools {
			if t.Name == "json_schema_2020_12_tool" {
				_, err = sess.CallTool(ctx, "json_schema_echo", map[string]any{"schema": t.InputSchema})
			}
		}
	default:
		return fmt.Errorf("unknown scenario %q", scenario)
	}
	return err
}

// answer serves what a server asks: a form filled with its defaults (or a
// plain value per type), a canned completion, no roots.
func answer(_ context.Context, req mcp.InputRequest) (any, error) {
	switch req.Method {
	case mcp.MethodElicit:
		var p struct {
			RequestedSchema struct {
				Properties map[string]struct {
					Type    string          `json:"type"`
					Default json.RawMessage `json:"default"`
					Enum    []any           `json:"enum"`
				} `json:"properties"`
			} `json:"requestedSchema"`
		}
		raw, _ := req.Params.(json.RawMessage)
		if err := json.Unmarshal(raw, &p); err != nil {
			return nil, err
		}
		content := map[string]any{}
		for name, prop := range p.RequestedSchema.Properties {
			switch {
			case prop.Default != nil:
				content[name] = prop.Default // SEP-1034: the defaults, types intact
			case len(prop.Enum) > 0:
				content[name] = prop.Enum[0]
			case prop.Type == "boolean":
				content[name] = true
			case prop.Type == "integer" || prop.Type == "number":
				content[name] = 1
			default:
				content[name] = "test"
			}
		}
		return map[string]any{"action": "accept", "content": content}, nil
	case mcp.MethodSample:
		return map[string]any{"role": "assistant", "content": map[string]any{"type": "text", "text": "A test completion."},
			"model": "test-model", "stopReason": "endTurn"}, nil
	case mcp.MethodListRoots:
		return map[string]any{"roots": []any{}}, nil
	}
	return nil, fmt.Errorf("cannot serve %s", req.Method)
}

func standardHeaders(ctx context.Context, sess *host.Session, tools []mcp.Tool) error {
	if len(tools) > 0 {
		if _, err := sess.CallTool(ctx, tools[0].Name, nil); err != nil {
			return err
		}
	}
	resources, err := sess.ListResources(ctx)
	if err != nil {
		return err
	}
	if len(resources) > 0 {
		if _, err := sess.Request(ctx, "resources/read", map[string]any{"uri": resources[0].URI}); err != nil {
			return err
		}
	}
	prompts, err := sess.ListPrompts(ctx)
	if err != nil {
		return err
	}
	if len(prompts) > 0 {
		if _, err := sess.Request(ctx, "prompts/get", map[string]any{"name": prompts[0].Name, "arguments": map[string]any{}}); err != nil {
			return err
		}
	}
	return nil
}

func customHeaders(ctx context.Context, sess *host.Session) error {
	var c struct {
		ToolCalls []struct {
			Name      string          `json:"name"`
			Arguments json.RawMessage `json:"arguments"`
		} `json:"toolCalls"`
	}
	dec := json.NewDecoder(strings.NewReader(os.Getenv("MCP_CONFORMANCE_CONTEXT")))
	if err := dec.Decode(&c); err != nil {
		return fmt.Errorf("MCP_CONFORMANCE_CONTEXT: %w", err)
	}
	for _, call := range c.ToolCalls {
		// The arguments go as they are (null values kept).
		if _, err := sess.CallTool(ctx, call.Name, call.Arguments); err != nil {
			return err
		}
	}
	return nil
}
