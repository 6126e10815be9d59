//go:build unix

package host_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/agentwire/agentwire/client"
	"github.com/agentwire/agentwire/mcp"
	"github.com/agentwire/agentwire/mcp/host"
	"github.com/agentwire/agentwire/mcp/internal/mcptest"
)

// The defect: params that encode as null (a nil json.RawMessage, an empty
// one, a nil map or pointer) went out as "params":null, which JSON-RPC
// does not allow and TypeScript SDK servers drop without an answer. The
// rpc layer checked only for an untyped nil. Every call and notification
// the client sends with such params now leaves them out.
func TestRegressionParamsNullIsNeverWritten(t *testing.T) {
	c, err := client.Start(mcptest.ServerCommand(t, "recorder"), &client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	values := []any{nil, json.RawMessage(nil), json.RawMessage{}, json.RawMessage("null"), []byte(nil),
		map[string]any(nil), (*struct{ X int })(nil), []int(nil)}
	for i, v := range values {
		if _, err := c.Call(ctx, "echo", v); err != nil {
			t.Errorf("call %d (%T): %v", i, v, err)
		}
		if err := c.Notify(ctx, "notifications/note", v); err != nil {
			t.Errorf("notify %d (%T): %v", i, v, err)
		}
	}
	lines := mcptest.ReceivedLines(t, c.Process(), 2*len(values))
	if len(lines) != 2*len(values) {
		t.Fatalf("the server received %d lines, want %d:\n%s", len(lines), 2*len(values), strings.Join(lines, "\n"))
	}
	mcptest.NoParamsNull(t, lines)
	for _, l := range lines {
		if strings.Contains(l, `"params"`) {
			t.Errorf("params that encode as null were sent: %s", l)
		}
	}
}

// The same through an MCP session: Request with params that are nil in
// any form sends none, in both eras (the modern era adds _meta).
func TestRegressionSessionRequestWithNilParams(t *testing.T) {
	for _, mode := range []mcp.Eras{mcp.LegacyOnly, mcp.ModernOnly} {
		t.Run(fmt.Sprint(mode), func(t *testing.T) {
			sess, rec := mcptest.RecordedSession(t, mcp.BothEras, &host.Options{Eras: mode})
			for _, v := range []any{nil, json.RawMessage(nil), map[string]any(nil)} {
				if _, err := sess.Request(t.Context(), "tools/list", v); err != nil {
					t.Errorf("tools/list with %T: %v", v, err)
				}
			}
			mcptest.NoParamsNull(t, rec.Received())
		})
	}
}
