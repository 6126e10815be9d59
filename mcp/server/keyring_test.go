package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/agentwire/agentwire/internal/wiretest"
	"github.com/agentwire/agentwire/jsonrpc"
	"github.com/agentwire/agentwire/mcp"
	"github.com/agentwire/agentwire/mcp/internal/mcptest"
	"github.com/agentwire/agentwire/mcp/server"
)

// ring is a KeyRing a test rotates.
type ring struct {
	mu       sync.Mutex
	current  []byte
	previous [][]byte
	err      error
}

func (r *ring) StateKeys(context.Context) ([]byte, [][]byte, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.current, r.previous, r.err
}

func (r *ring) set(cur []byte, prev [][]byte, err error) {
	r.mu.Lock()
	r.current, r.previous, r.err = cur, prev, err
	r.mu.Unlock()
}

// Issue 18 (a shared requestState key ring): a retry sealed under the key
// before a rotation still verifies while that key is in the ring's
// previous keys, and not once it has left the ring; a ring that cannot
// give a key makes the round a clear -32603, never a crash.
func TestRequestStateSurvivesOneRotationOfTheKeyRing(t *testing.T) {
	keyA, keyB := bytes.Repeat([]byte{'a'}, 32), bytes.Repeat([]byte{'b'}, 32)
	r := &ring{current: keyA}
	runMCP(t, &server.Options{StateKeys: r}, func(w *wiretest.Wire, s *server.Server) {
		s.AddTool(mcp.Tool{Name: "two"}, func(ctx context.Context, req *server.ToolRequest) (*mcp.ToolResult, error) {
			if st := req.State(); st != nil {
				return mcp.TextResult("state " + string(st)), nil
			}
			req.SetState([]byte("round-1"))
			_, err := req.Ask(ctx, map[string]mcp.InputRequest{"q": {Method: mcp.MethodElicit, Params: map[string]any{"message": "?"}}})
			return nil, err
		})
		first := mcptest.One(t, w.Exchange(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"two","arguments":{},`+mcptest.Meta+`}}`))
		var res struct {
			Result struct {
				RequestState string `json:"requestState"`
			} `json:"result"`
		}
		if json.Unmarshal([]byte(first), &res); res.Result.RequestState == "" {
			t.Fatalf("no requestState: %s", first)
		}
		retry := func(id string) string {
			return mcptest.One(t, w.Exchange(`{"jsonrpc":"2.0","id":`+id+`,"method":"tools/call","params":{"name":"two","arguments":{},"requestState":"`+res.Result.RequestState+`","inputResponses":{"q":{"action":"accept"}},`+mcptest.Meta+`}}`))
		}
		r.set(keyB, [][]byte{keyA}, nil) // rotated: A verifies still
		if got := retry("2"); !strings.Contains(got, "state round-1") {
			t.Fatalf("after one rotation: %s", got)
		}
		r.set(keyB, nil, nil) // A has left the ring
		if c := wiretest.ErrCode(t, retry("3")); c != jsonrpc.CodeInvalidParams {
			t.Fatalf("after A left the ring: code %d", c)
		}
		r.set(nil, nil, errors.New("redis: connection refused"))
		got := mcptest.One(t, w.Exchange(`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"two","arguments":{},`+mcptest.Meta+`}}`))
		if c := wiretest.ErrCode(t, got); c != jsonrpc.CodeInternalError || strings.Contains(got, "redis") {
			t.Fatalf("a ring without a key: %s", got)
		}
	})
}
