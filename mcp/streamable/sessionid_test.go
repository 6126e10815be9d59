package streamable_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/agentwire/agentwire/mcp"
	"github.com/agentwire/agentwire/mcp/server"
	"github.com/agentwire/agentwire/mcp/streamable"
)

// A legacy session's handlers find its Mcp-Session-Id in their context
// (streamable.SessionIDFrom); a stateless request finds none.
func TestSessionIDFromNamesTheSessionOfAHandler(t *testing.T) {
	h, ss := sessionHandler(t, nil, nil)
	ss.AddTool(mcp.Tool{Name: "whoami"}, func(ctx context.Context, _ *server.ToolRequest) (*mcp.ToolResult, error) {
		return mcp.TextResult("session=" + streamable.SessionIDFrom(ctx)), nil
	})
	sid := openSession(t, h, "2025-11-25", nil)
	rec := serve(h, legacyRequest(t.Context(), http.MethodPost, callBody(2, "whoami", ""), sid, "2025-11-25", nil))
	if body := rec.Body(); !strings.Contains(body, `"text":"session=`+sid+`"`) {
		t.Errorf("in a session the tool saw %s, want session=%s", body, sid)
	}
	if got := streamable.SessionIDFrom(t.Context()); got != "" {
		t.Errorf("outside any session SessionIDFrom = %q", got)
	}
}

// Without sessions, a request is stateless: no session id.
func TestSessionIDFromIsEmptyForAStatelessRequest(t *testing.T) {
	s := newSessionServer()
	s.AddTool(mcp.Tool{Name: "whoami"}, func(ctx context.Context, _ *server.ToolRequest) (*mcp.ToolResult, error) {
		return mcp.TextResult("session=" + streamable.SessionIDFrom(ctx)), nil
	})
	h := streamable.NewHandler(s.Server, nil)
	defer h.Shutdown(context.Background())
	rec := serve(h, legacyRequest(t.Context(), http.MethodPost, callBody(2, "whoami", ""), "", "2025-11-25", nil))
	if body := rec.Body(); !strings.Contains(body, `"text":"session="`) {
		t.Errorf("a stateless request's tool saw %s, want an empty session", body)
	}
}
