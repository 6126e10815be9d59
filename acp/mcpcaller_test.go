package acp

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/agentwire/agentwire/internal/wiretest"
	"github.com/agentwire/agentwire/rpc"
)

const callerInit = `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{}}}`

const callerSession = `{"jsonrpc":"2.0","id":"n1","method":"session/new","params":{"cwd":"/tmp","mcpServers":[` +
	`{"name":"fs","command":"/bin/true","args":[],"env":[]},{"type":"acp","name":"tools","serverId":"srv-1"}]}}`

func callerPrompt(id int, text string) string {
	return `{"jsonrpc":"2.0","id":"p` + string(rune('0'+id)) + `","method":"session/prompt","params":{"sessionId":"sess-1","prompt":[{"type":"text","text":"` + text + `"}]}}`
}

type note struct {
	method string
	params string
}

// callerAgent's prompt "connect SERVERID" opens a connection, lists tools,
// notifies, waits for one server notification and closes; whatever fails
// is streamed back as the chunk.
func callerAgent(notes chan<- note) *Agent {
	return &Agent{
		Info:       Implementation{Name: "caller", Version: "1"},
		MCPOverACP: true,
		Prompt: func(ctx context.Context, t *Turn) (StopReason, error) {
			serverID, _ := strings.CutPrefix(t.Prompt[0].Text, "connect ")
			mc, err := t.ConnectMCP(ctx, serverID)
			if err != nil {
				return EndTurn, t.MessageChunk("connect: " + err.Error())
			}
			mc.OnNotification(func(method string, params json.RawMessage) { notes <- note{method, string(params)} })
			res, err := mc.Call(ctx, "tools/list", nil)
			if err != nil {
				return EndTurn, t.MessageChunk("call: " + err.Error())
			}
			if err := mc.Notify(ctx, "notifications/initialized", nil); err != nil {
				return EndTurn, t.MessageChunk("notify: " + err.Error())
			}
			if err := mc.Close(ctx); err != nil {
				return EndTurn, t.MessageChunk("close: " + err.Error())
			}
			if err := mc.Close(ctx); err != nil {
				return EndTurn, t.MessageChunk("second close: " + err.Error())
			}
			return EndTurn, t.MessageChunk("listed " + string(res) + " on " + mc.ID())
		},
	}
}

func take1(t *testing.T, w *wiretest.Wire, lines ...string) string {
	t.Helper()
	got := w.Exchange(lines...)
	if len(got) != 1 {
		t.Fatalf("sent %q\ngot %q, want one line", lines, got)
	}
	return got[0]
}

func TestConnectMCPCarriesTheConnectionOverTheACPConnection(t *testing.T) {
	notes := make(chan note, 4)
	h, o := ConnOptions(callerAgent(notes), nil, nil)
	c := h.(*handler).c
	wiretest.Run(t, h, o, func(w *wiretest.Wire) {
		w.Exchange(callerInit, callerSession)
		if got := take1(t, w, callerPrompt(1, "connect srv-1")); got != `{"jsonrpc":"2.0","id":1,"method":"mcp/connect","params":{"serverId":"srv-1"}}` {
			t.Fatalf("connect: %s", got)
		}
		if got := take1(t, w, `{"jsonrpc":"2.0","id":1,"result":{"connectionId":"mcpc-9"}}`); got != `{"jsonrpc":"2.0","id":2,"method":"mcp/message","params":{"connectionId":"mcpc-9","method":"tools/list"}}` {
			t.Fatalf("call: %s", got)
		}
		// A server notification for the connection reaches its handler;
		// one for a connection nobody holds is not taken.
		if !c.deliverMCPNotification(&rpc.Request{Method: MethodMCPMessage,
			Params: json.RawMessage(`{"connectionId":"mcpc-9","method":"notifications/tools/list_changed"}`)}) {
			t.Fatal("the notification for mcpc-9 was not taken")
		}
		if got := <-notes; got.method != "notifications/tools/list_changed" || got.params != "" {
			t.Fatalf("notification %+v", got)
		}
		if c.deliverMCPNotification(&rpc.Request{Method: MethodMCPMessage,
			Params: json.RawMessage(`{"connectionId":"mcp-1","method":"notifications/tools/list_changed"}`)}) {
			t.Fatal("a notification for another connection was taken")
		}
		w.Send(`{"jsonrpc":"2.0","id":2,"result":{"tools":[]}}`)
		got := w.Take()
		want := []string{
			`{"jsonrpc":"2.0","method":"mcp/message","params":{"connectionId":"mcpc-9","method":"notifications/initialized"}}`,
			`{"jsonrpc":"2.0","id":3,"method":"mcp/disconnect","params":{"connectionId":"mcpc-9"}}`,
		}
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Fatalf("notify and close:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
		// Closed once: the second Close sends nothing.
		w.Send(`{"jsonrpc":"2.0","id":3,"result":{}}`)
		got = w.Take()
		if len(got) != 2 || !strings.Contains(got[0], `listed {\"tools\":[]} on mcpc-9`) || got[1] != `{"jsonrpc":"2.0","id":"p1","result":{"stopReason":"end_turn"}}` {
			t.Fatalf("the end of the turn: %q", got)
		}
		// After Close the connection takes no notification.
		if c.deliverMCPNotification(&rpc.Request{Method: MethodMCPMessage,
			Params: json.RawMessage(`{"connectionId":"mcpc-9","method":"notifications/tools/list_changed"}`)}) {
			t.Fatal("a closed connection took a notification")
		}
	})
}

func TestConnectMCPRefusesAServerTheSessionDidNotDeclareOverACP(t *testing.T) {
	h, o := ConnOptions(callerAgent(nil), nil, nil)
	wiretest.Run(t, h, o, func(w *wiretest.Wire) {
		w.Exchange(callerInit, callerSession)
		// "fs" is declared, but as a stdio server: the agent reaches that
		// one itself.
		for i, id := range []string{"srv-2", "fs", ""} {
			w.Send(callerPrompt(i+1, "connect "+id))
			got := w.Take()
			if len(got) != 2 || !strings.Contains(got[0], `"text":"connect: acp: the session declared no MCP server over ACP with that serverId`) {
				t.Fatalf("serverId %q: %q, want a local refusal and nothing sent", id, got)
			}
		}
	})
	s := &Session{mcpServers: []json.RawMessage{json.RawMessage(`{"type":"acp","name":"tools","serverId":"srv-1"}`)}}
	if _, err := (&Turn{Session: s}).ConnectMCP(context.Background(), "srv-2"); !errors.Is(err, ErrMCPNotDeclared) {
		t.Fatalf("err = %v, want ErrMCPNotDeclared", err)
	}
}

func TestMCPServersDecodesTheDeclaredEntries(t *testing.T) {
	s := &Session{mcpServers: []json.RawMessage{
		json.RawMessage(`{"name":"fs","command":"/bin/true","args":["-x"],"env":[]}`),
		json.RawMessage(`{"type":"acp","name":"tools","serverId":"srv-1"}`),
		json.RawMessage(`"not an object"`),
	}}
	got := s.MCPServers()
	if len(got) != 2 || got[0].Command != "/bin/true" || got[0].Args[0] != "-x" || got[1].Type != "acp" || got[1].ServerID != "srv-1" {
		t.Fatalf("MCPServers() = %+v", got)
	}
}
