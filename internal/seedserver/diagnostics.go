package seedserver

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/agentwire/agentwire/mcp"
	"github.com/agentwire/agentwire/mcp/server"
)

// addDiagnostics registers the diagnostic tools the 2026-07-28
// conformance scenario server-stateless looks up by name (in the
// modelcontextprotocol/conformance repository): each shows one stateless-era rule on the wire.
func addDiagnostics(s *server.Server) {
	// A server "MUST NOT rely on capabilities the client has not
	// declared": this one needs sampling and says so with -32021.
	s.AddTool(mcp.Tool{Name: "test_missing_capability", Description: "Needs the client's sampling capability; a client that does not declare it gets -32021."},
		func(_ context.Context, r *server.ToolRequest) (*mcp.ToolResult, error) {
			if err := r.RequireClientCapability("sampling"); err != nil {
				return nil, err
			}
			return mcp.TextResult("the client declares sampling"), nil
		})

	// The response stream carries notifications about the request (here
	// progress, when asked for), never a request of the server's own.
	s.AddTool(mcp.Tool{Name: "test_streaming_elicitation", Description: "Streams only notifications about the request (progress when asked), never a server request."},
		func(_ context.Context, r *server.ToolRequest) (*mcp.ToolResult, error) {
			if err := r.Progress(1, 2, "halfway"); err != nil {
				return nil, err
			}
			return mcp.TextResult("streamed"), nil
		})

	// Logging is per request: a message goes out only when the request's
	// _meta asked for a log level.
	s.AddTool(mcp.Tool{Name: "test_logging_tool", Description: "Logs one info message, which the client receives only if its request set a log level."},
		func(_ context.Context, r *server.ToolRequest) (*mcp.ToolResult, error) {
			sent, err := r.Log("info", "test_logging_tool", "diagnostic log message")
			if err != nil {
				return nil, err
			}
			if sent {
				return mcp.TextResult("logged"), nil
			}
			return mcp.TextResult("not logged: the request set no log level"), nil
		})

	// Arguments annotated with x-mcp-header travel in Mcp-Param- headers
	// too, and the HTTP endpoint checks the two agree (SEP-2243).
	type headerArgs struct {
		Region  string `json:"region"`
		Count   int    `json:"count"`
		Verbose bool   `json:"verbose"`
	}
	server.AddTool(s, mcp.Tool{Name: "test_custom_headers", Description: "Echoes arguments that are mirrored in Mcp-Param-Region, Mcp-Param-Count and Mcp-Param-Verbose headers over HTTP.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{` +
			`"region":{"type":"string","x-mcp-header":"Region"},` +
			`"count":{"type":"integer","x-mcp-header":"Count"},` +
			`"verbose":{"type":"boolean","x-mcp-header":"Verbose"}}}`)},
		func(_ context.Context, _ *server.ToolRequest, in headerArgs) (*mcp.ToolResult, error) {
			return mcp.TextResult(fmt.Sprintf("region=%s count=%d verbose=%t", in.Region, in.Count, in.Verbose)), nil
		})

	// Changes the tool list (adds or removes test_added_tool), so that
	// listen streams and legacy clients are told.
	var mu sync.Mutex
	added := false
	s.AddTool(mcp.Tool{Name: "test_trigger_tool_change", Description: "Adds or removes the tool test_added_tool, changing the tool list."},
		func(context.Context, *server.ToolRequest) (*mcp.ToolResult, error) {
			mu.Lock()
			defer mu.Unlock()
			if added {
				s.RemoveTool("test_added_tool")
				added = false
				return mcp.TextResult("removed test_added_tool"), nil
			}
			s.AddTool(mcp.Tool{Name: "test_added_tool", Description: "Added by test_trigger_tool_change."},
				func(context.Context, *server.ToolRequest) (*mcp.ToolResult, error) {
					return mcp.TextResult("here"), nil
				})
			added = true
			return mcp.TextResult("added test_added_tool"), nil
		})
}
