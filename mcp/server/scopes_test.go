package server_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/agentwire/agentwire/internal/wiretest"
	"github.com/agentwire/agentwire/mcp"
	"github.com/agentwire/agentwire/mcp/internal/mcptest"
	"github.com/agentwire/agentwire/mcp/server"
)

// The scopes a request needs: its method's (Options.MethodScopes), and
// for tools/call its tool's (mcp.Tool.Scopes), which are declared with the
// tool and copied, not shared.
func TestRequiredScopesPerMethodAndTool(t *testing.T) {
	methods := map[string][]string{"tools/call": {"tools:call"}, "resources/read": {"files:read"}}
	s := server.New(mcp.Implementation{Name: "s", Version: "1"}, &server.Options{MethodScopes: methods})
	methods["tools/call"] = []string{"changed"} // New keeps its own copy
	scopes := []string{"files:write"}
	s.AddTool(mcp.Tool{Name: "write", Scopes: scopes}, func(context.Context, *server.ToolRequest) (*mcp.ToolResult, error) { return nil, nil })
	scopes[0] = "changed" // so does AddTool
	s.AddTool(mcp.Tool{Name: "plain"}, func(context.Context, *server.ToolRequest) (*mcp.ToolResult, error) { return nil, nil })
	cases := []struct {
		method, name string
		want         []string
	}{
		{"tools/call", "write", []string{"tools:call", "files:write"}},
		{"tools/call", "plain", []string{"tools:call"}},
		{"tools/call", "unknown", []string{"tools:call"}},
		{"resources/read", "file:///a", []string{"files:read"}},
		{"tools/list", "", nil},
	}
	for _, tc := range cases {
		if got := s.RequiredScopes(tc.method, tc.name); !slices.Equal(got, tc.want) {
			t.Errorf("RequiredScopes(%q, %q) = %q, want %q", tc.method, tc.name, got, tc.want)
		}
	}
	// Appending the tool's scopes does not write into the method's.
	s.RequiredScopes("tools/call", "write")
	if got := s.RequiredScopes("tools/call", "plain"); !slices.Equal(got, []string{"tools:call"}) {
		t.Errorf("after a tool's: %q", got)
	}
	// A tool's scopes alone, without method scopes.
	bare := server.New(mcp.Implementation{Name: "s", Version: "1"}, nil)
	bare.AddTool(mcp.Tool{Name: "write", Scopes: []string{"files:write"}}, func(context.Context, *server.ToolRequest) (*mcp.ToolResult, error) { return nil, nil })
	if got := bare.RequiredScopes("tools/call", "write"); !slices.Equal(got, []string{"files:write"}) {
		t.Errorf("a tool's scopes alone: %q", got)
	}
}

// A tool's scopes are never on the wire.
func TestToolScopesAreNotListed(t *testing.T) {
	b, err := json.Marshal(mcp.Tool{Name: "write", Scopes: []string{"files:write"}})
	if err != nil || strings.Contains(string(b), "files:write") || strings.Contains(string(b), "copes") {
		t.Errorf("encoded tool %s (%v)", b, err)
	}
	runMCP(t, nil, func(w *wiretest.Wire, s *server.Server) {
		s.AddTool(mcp.Tool{Name: "write", Scopes: []string{"files:write"}}, func(context.Context, *server.ToolRequest) (*mcp.ToolResult, error) { return nil, nil })
		got := mcptest.One(t, w.Exchange(`{"jsonrpc":"2.0","id":5,"method":"tools/list","params":{`+mcptest.Meta+`}}`))
		if !strings.Contains(got, `"name":"write"`) || strings.Contains(got, "files:write") {
			t.Errorf("tools/list: %s", got)
		}
	})
}
