package acpclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentwire/agentwire/acp"
	"github.com/agentwire/agentwire/internal/wiretest"
	"github.com/agentwire/agentwire/jsonrpc"
	"github.com/agentwire/agentwire/mcp"
	"github.com/agentwire/agentwire/mcp/server"
	"github.com/agentwire/agentwire/rpc"
)

// providerHandler is the part of a Conn's handler that matters here: mcp/*
// go to the provider, anything else is -32601.
type providerHandler struct{ p *mcpProvider }

func (h providerHandler) Handle(ctx context.Context, req *rpc.Request) (any, error) {
	if h.p.handles(req.Method) {
		return h.p.serve(ctx, req)
	}
	if req.IsNotification() {
		return nil, nil
	}
	return nil, jsonrpc.Errorf(jsonrpc.CodeMethodNotFound, "method not found: %s", req.Method)
}

// echoServer has "echo" (logs its text, then returns it) and "wait" (blocks
// until cancelled, and reports that it was on cancelled).
func echoServer(cancelled chan<- struct{}) *server.Server {
	srv := server.New(mcp.Implementation{Name: "tools", Version: "1"}, &server.Options{Logger: wiretest.Quiet})
	type echoIn struct {
		Text string `json:"text"`
	}
	server.AddTool(srv, mcp.Tool{Name: "echo"}, func(ctx context.Context, req *server.ToolRequest, in echoIn) (*mcp.ToolResult, error) {
		req.Log("info", "echo", in.Text)
		return mcp.TextResult(in.Text), nil
	})
	server.AddTool(srv, mcp.Tool{Name: "wait"}, func(ctx context.Context, req *server.ToolRequest, in struct{}) (*mcp.ToolResult, error) {
		<-ctx.Done()
		if cancelled != nil {
			cancelled <- struct{}{}
		}
		return nil, ctx.Err()
	})
	return srv
}

// providerWire runs f against a provider that a session offered srv to, as
// "tools", on raw wire lines; the agent's lines come in, the client's go
// out.
func providerWire(t *testing.T, maxConns int, srv func() *server.Server, f func(w *wiretest.Wire, p *mcpProvider, s *Session, serverID string)) {
	t.Helper()
	var w *wiretest.Wire
	var p *mcpProvider
	handler := func() rpc.Handler {
		p = newMCPProvider(
			func(ctx context.Context, method string, params any) (json.RawMessage, error) {
				return w.Conn.Call(ctx, method, params)
			},
			func(ctx context.Context, method string, params any) error { return w.Conn.Notify(ctx, method, params) },
			maxConns, wiretest.Quiet)
		return providerHandler{p}
	}
	wiretest.InBubble(t, handler, &rpc.Options{Cancel: []rpc.CancelMethod{rpc.ACPCancel}}, func(ww *wiretest.Wire) {
		w = ww
		s := &Session{id: "sess-1"}
		decl := p.declare(s, []ProvidedMCP{{Name: "tools", Server: srv()}})
		if len(decl) != 1 || decl[0].Type != "acp" || decl[0].Name != "tools" || decl[0].ServerID != "agentwire-mcp-1-tools" {
			t.Fatalf("declared %+v, want one {acp tools agentwire-mcp-1-tools}", decl)
		}
		defer p.closeAll()
		f(w, p, s, decl[0].ServerID)
	})
}

func exchange1(t *testing.T, w *wiretest.Wire, line string) string {
	t.Helper()
	got := w.Exchange(line)
	if len(got) != 1 {
		t.Fatalf("sent %s\ngot %d lines, want 1: %q", line, len(got), got)
	}
	return got[0]
}

func wantLine(t *testing.T, got, want string) {
	t.Helper()
	if got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
}

const legacyInit = `{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"agent","version":"1"}}`

func TestAConnectedAgentListsCallsAndDisconnects(t *testing.T) {
	providerWire(t, 0, func() *server.Server { return echoServer(nil) }, func(w *wiretest.Wire, p *mcpProvider, _ *Session, id string) {
		wantLine(t, exchange1(t, w, `{"jsonrpc":"2.0","id":1,"method":"mcp/connect","params":{"serverId":"`+id+`"}}`),
			`{"jsonrpc":"2.0","id":1,"result":{"connectionId":"mcpc-1"}}`)
		initRes := exchange1(t, w, `{"jsonrpc":"2.0","id":2,"method":"mcp/message","params":{"connectionId":"mcpc-1","method":"initialize","params":`+legacyInit+`}}`)
		if !strings.Contains(initRes, `"protocolVersion":"2025-11-25"`) || !strings.Contains(initRes, `"serverInfo":{"name":"tools"`) {
			t.Fatalf("initialize through the envelope: %s", initRes)
		}
		if got := w.Exchange(`{"jsonrpc":"2.0","method":"mcp/message","params":{"connectionId":"mcpc-1","method":"notifications/initialized"}}`); len(got) != 0 {
			t.Fatalf("an inner notification was answered: %q", got)
		}
		list := exchange1(t, w, `{"jsonrpc":"2.0","id":3,"method":"mcp/message","params":{"connectionId":"mcpc-1","method":"tools/list"}}`)
		if !strings.Contains(list, `"name":"echo"`) || !strings.Contains(list, `"name":"wait"`) {
			t.Fatalf("tools/list: %s", list)
		}
		w.Send(`{"jsonrpc":"2.0","id":4,"method":"mcp/message","params":{"connectionId":"mcpc-1","method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"}}}}`)
		got := w.Take()
		if len(got) != 2 {
			t.Fatalf("tools/call: got %q, want the log notification and the result", got)
		}
		// The server's log line for the call reaches the agent first, as
		// an mcp/message notification naming the connection.
		wantLine(t, got[0], `{"jsonrpc":"2.0","method":"mcp/message","params":{"connectionId":"mcpc-1","method":"notifications/message","params":{"data":"hi","level":"info","logger":"echo"}}}`)
		wantLine(t, got[1], `{"jsonrpc":"2.0","id":4,"result":{"content":[{"type":"text","text":"hi"}]}}`)

		// The inner error is the outer error, as the server wrote it.
		e := exchange1(t, w, `{"jsonrpc":"2.0","id":5,"method":"mcp/message","params":{"connectionId":"mcpc-1","method":"no/such"}}`)
		if wiretest.ErrCode(t, e) != jsonrpc.CodeMethodNotFound {
			t.Fatalf("unknown inner method: %s", e)
		}

		wantLine(t, exchange1(t, w, `{"jsonrpc":"2.0","id":6,"method":"mcp/disconnect","params":{"connectionId":"mcpc-1"}}`),
			`{"jsonrpc":"2.0","id":6,"result":{}}`)
		after := exchange1(t, w, `{"jsonrpc":"2.0","id":7,"method":"mcp/message","params":{"connectionId":"mcpc-1","method":"tools/list"}}`)
		if wiretest.ErrCode(t, after) != jsonrpc.CodeInvalidParams || !strings.Contains(after, `mcpc-1`) {
			t.Fatalf("a message after disconnect: %s, want -32602 naming mcpc-1", after)
		}
		again := exchange1(t, w, `{"jsonrpc":"2.0","id":8,"method":"mcp/disconnect","params":{"connectionId":"mcpc-1"}}`)
		if wiretest.ErrCode(t, again) != jsonrpc.CodeInvalidParams {
			t.Fatalf("a second disconnect: %s, want -32602", again)
		}
		if st := p.stats(); st.Connections != 1 || st.Messages != 6 || st.Refused != 0 {
			t.Fatalf("stats %+v, want 1 connection, 6 messages, none refused", st)
		}
	})
}

func TestAConnectForAServerNoSessionOffersIsUnavailable(t *testing.T) {
	providerWire(t, 0, func() *server.Server { return echoServer(nil) }, func(w *wiretest.Wire, p *mcpProvider, s *Session, id string) {
		wantLine(t, exchange1(t, w, `{"jsonrpc":"2.0","id":1,"method":"mcp/connect","params":{"serverId":"tools"}}`),
			`{"jsonrpc":"2.0","id":1,"error":{"code":-33001,"message":"MCP server \"tools\" unavailable: no live session of this connection offers it","data":{"serverId":"tools"}}}`)
		bad := exchange1(t, w, `{"jsonrpc":"2.0","id":2,"method":"mcp/connect","params":{}}`)
		if wiretest.ErrCode(t, bad) != jsonrpc.CodeInvalidParams {
			t.Fatalf("a connect without serverId: %s", bad)
		}
		// A closed session's servers are gone, and so are its connections.
		exchange1(t, w, `{"jsonrpc":"2.0","id":3,"method":"mcp/connect","params":{"serverId":"`+id+`"}}`)
		p.closeSession(s)
		if c := wiretest.ErrCode(t, exchange1(t, w, `{"jsonrpc":"2.0","id":4,"method":"mcp/connect","params":{"serverId":"`+id+`"}}`)); c != -33001 {
			t.Fatalf("connect after the session closed: code %d, want -33001", c)
		}
		if c := wiretest.ErrCode(t, exchange1(t, w, `{"jsonrpc":"2.0","id":5,"method":"mcp/message","params":{"connectionId":"mcpc-1","method":"ping"}}`)); c != jsonrpc.CodeInvalidParams {
			t.Fatalf("a message on a closed session's connection: code %d, want -32602", c)
		}
	})
}

func TestAcpIDAndIDAreAliasesOfServerID(t *testing.T) {
	providerWire(t, 0, func() *server.Server { return echoServer(nil) }, func(w *wiretest.Wire, _ *mcpProvider, _ *Session, id string) {
		wantLine(t, exchange1(t, w, `{"jsonrpc":"2.0","id":1,"method":"mcp/connect","params":{"acpId":"`+id+`"}}`),
			`{"jsonrpc":"2.0","id":1,"result":{"connectionId":"mcpc-1"}}`)
		wantLine(t, exchange1(t, w, `{"jsonrpc":"2.0","id":2,"method":"mcp/connect","params":{"id":"`+id+`"}}`),
			`{"jsonrpc":"2.0","id":2,"result":{"connectionId":"mcpc-2"}}`)
	})
}

func TestConnectionsBeyondTheLimitAreRefusedWithTheLimit(t *testing.T) {
	providerWire(t, 2, func() *server.Server { return echoServer(nil) }, func(w *wiretest.Wire, p *mcpProvider, _ *Session, id string) {
		connect := func(n string) string {
			return exchange1(t, w, `{"jsonrpc":"2.0","id":`+n+`,"method":"mcp/connect","params":{"serverId":"`+id+`"}}`)
		}
		connect("1")
		connect("2")
		wantLine(t, connect("3"), `{"jsonrpc":"2.0","id":3,"error":{"code":-33000,"message":"too many MCP connections","data":{"limit":2,"reason":"too_many_connections"}}}`)
		if st := p.stats(); st.Refused != 1 || st.Connections != 2 {
			t.Fatalf("stats %+v, want 2 connections and 1 refused", st)
		}
		// A disconnect gives the place back.
		exchange1(t, w, `{"jsonrpc":"2.0","id":4,"method":"mcp/disconnect","params":{"connectionId":"mcpc-1"}}`)
		wantLine(t, connect("5"), `{"jsonrpc":"2.0","id":5,"result":{"connectionId":"mcpc-3"}}`)
		// The connectionless generation's connection counts too.
		c := exchange1(t, w, `{"jsonrpc":"2.0","id":6,"method":"mcp/message","params":{"serverId":"`+id+`","requestId":"r1","method":"tools/list","params":`+modernMeta+`}}`)
		if wiretest.ErrCode(t, c) != -33000 {
			t.Fatalf("a connectionless request with every place taken: %s, want -33000", c)
		}
	})
}

const modernMeta = `{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}`

func TestConnectionlessRequestsAnswerInTheCarrier(t *testing.T) {
	cancelled := make(chan struct{}, 1)
	providerWire(t, 0, func() *server.Server { return echoServer(cancelled) }, func(w *wiretest.Wire, p *mcpProvider, _ *Session, id string) {
		call := `{"name":"echo","arguments":{"text":"hi"},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}`
		res := exchange1(t, w, `{"jsonrpc":"2.0","id":1,"method":"mcp/message","params":{"serverId":"`+id+`","requestId":"r1","method":"tools/call","params":`+call+`}}`)
		if !strings.HasPrefix(res, `{"jsonrpc":"2.0","id":1,"result":{"result":{`) || !strings.Contains(res, `"text":"hi"`) {
			t.Fatalf("a connectionless tools/call: %s, want the result in the carrier", res)
		}
		// An inner error is a successful outer response with the error
		// carrier; an unknown server is the binding's -33001.
		e := exchange1(t, w, `{"jsonrpc":"2.0","id":2,"method":"mcp/message","params":{"serverId":"`+id+`","requestId":"r2","method":"no/such","params":`+modernMeta+`}}`)
		if !strings.HasPrefix(e, `{"jsonrpc":"2.0","id":2,"result":{"error":{"code":-32601,`) {
			t.Fatalf("an inner error: %s, want it in the carrier", e)
		}
		u := exchange1(t, w, `{"jsonrpc":"2.0","id":3,"method":"mcp/message","params":{"serverId":"nope","requestId":"r3","method":"tools/list","params":`+modernMeta+`}}`)
		if wiretest.ErrCode(t, u) != -33001 || !strings.Contains(u, `"serverId":"nope"`) {
			t.Fatalf("an unknown server: %s, want -33001 naming it", u)
		}

		// A pair still active is refused; the first is unaffected, and
		// cancelling it cancels the tool.
		wait := `{"name":"wait","arguments":{},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}`
		if got := w.Exchange(`{"jsonrpc":"2.0","id":4,"method":"mcp/message","params":{"serverId":"` + id + `","requestId":"w","method":"tools/call","params":` + wait + `}}`); len(got) != 0 {
			t.Fatalf("a waiting tool answered: %q", got)
		}
		wantLine(t, exchange1(t, w, `{"jsonrpc":"2.0","id":5,"method":"mcp/message","params":{"serverId":"`+id+`","requestId":"w","method":"tools/list","params":`+modernMeta+`}}`),
			`{"jsonrpc":"2.0","id":5,"error":{"code":-32602,"message":"invalid params: duplicate active MCP request id","data":{"requestId":"w","serverId":"`+id+`"}}}`)
		wantLine(t, exchange1(t, w, `{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":4}}`),
			`{"jsonrpc":"2.0","id":4,"error":{"code":-32800,"message":"Request cancelled"}}`)
		select {
		case <-cancelled:
		default:
			t.Fatal("the tool was not cancelled by the outer cancellation")
		}
		// Answered: the pair is free again.
		again := exchange1(t, w, `{"jsonrpc":"2.0","id":6,"method":"mcp/message","params":{"serverId":"`+id+`","requestId":"w","method":"tools/list","params":`+modernMeta+`}}`)
		if !strings.HasPrefix(again, `{"jsonrpc":"2.0","id":6,"result":{"result":{`) {
			t.Fatalf("the pair after its answer: %s", again)
		}
		if st := p.stats(); st.Connections != 1 {
			t.Fatalf("stats %+v, want one connection for every connectionless request", st)
		}
	})
}

func TestAMessageWithNeitherConnectionNorServerIsInvalid(t *testing.T) {
	providerWire(t, 0, func() *server.Server { return echoServer(nil) }, func(w *wiretest.Wire, _ *mcpProvider, _ *Session, id string) {
		for _, params := range []string{
			`{"method":"tools/list"}`,
			`{"serverId":"` + id + `","method":"tools/list"}`,
			`{"connectionId":7,"method":"tools/list"}`,
			`{"serverId":"` + id + `","requestId":{},"method":"tools/list"}`,
			`{"connectionId":"mcpc-1"}`,
			`{"connectionId":"mcpc-1","method":"tools/list","params":"text"}`,
		} {
			got := exchange1(t, w, `{"jsonrpc":"2.0","id":1,"method":"mcp/message","params":`+params+`}`)
			if wiretest.ErrCode(t, got) != jsonrpc.CodeInvalidParams {
				t.Errorf("params %s: %s, want -32602", params, got)
			}
		}
	})
}

func TestACancelledMessageCancelsTheInnerRequest(t *testing.T) {
	cancelled := make(chan struct{}, 1)
	providerWire(t, 0, func() *server.Server { return echoServer(cancelled) }, func(w *wiretest.Wire, _ *mcpProvider, _ *Session, id string) {
		exchange1(t, w, `{"jsonrpc":"2.0","id":1,"method":"mcp/connect","params":{"serverId":"`+id+`"}}`)
		exchange1(t, w, `{"jsonrpc":"2.0","id":2,"method":"mcp/message","params":{"connectionId":"mcpc-1","method":"initialize","params":`+legacyInit+`}}`)
		w.Exchange(`{"jsonrpc":"2.0","id":3,"method":"mcp/message","params":{"connectionId":"mcpc-1","method":"tools/call","params":{"name":"wait","arguments":{}}}}`)
		wantLine(t, exchange1(t, w, `{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":3}}`),
			`{"jsonrpc":"2.0","id":3,"error":{"code":-32800,"message":"Request cancelled"}}`)
		select {
		case <-cancelled:
		default:
			t.Fatal("the tool did not see notifications/cancelled")
		}
		// The connection is still usable.
		ping := exchange1(t, w, `{"jsonrpc":"2.0","id":4,"method":"mcp/message","params":{"connectionId":"mcpc-1","method":"ping"}}`)
		wantLine(t, ping, `{"jsonrpc":"2.0","id":4,"result":{}}`)
	})
}

func TestAToolListChangeReachesTheAgentAsANotification(t *testing.T) {
	var srv *server.Server
	providerWire(t, 0, func() *server.Server { srv = echoServer(nil); return srv }, func(w *wiretest.Wire, _ *mcpProvider, _ *Session, id string) {
		exchange1(t, w, `{"jsonrpc":"2.0","id":1,"method":"mcp/connect","params":{"serverId":"`+id+`"}}`)
		exchange1(t, w, `{"jsonrpc":"2.0","id":2,"method":"mcp/message","params":{"connectionId":"mcpc-1","method":"initialize","params":`+legacyInit+`}}`)
		w.Exchange(`{"jsonrpc":"2.0","method":"mcp/message","params":{"connectionId":"mcpc-1","method":"notifications/initialized"}}`)
		srv.AddTool(mcp.Tool{Name: "late", InputSchema: json.RawMessage(`{"type":"object"}`)}, func(context.Context, *server.ToolRequest) (*mcp.ToolResult, error) {
			return mcp.TextResult("late"), nil
		})
		got := w.Take()
		if len(got) != 1 {
			t.Fatalf("after a tool was added: %q, want one notification", got)
		}
		wantLine(t, got[0], `{"jsonrpc":"2.0","method":"mcp/message","params":{"connectionId":"mcpc-1","method":"notifications/tools/list_changed"}}`)
	})
}

func TestMCPMethodsAreUndeclaredUntilASessionOffersAServer(t *testing.T) {
	p := newMCPProvider(nil, nil, 0, wiretest.Quiet)
	for _, m := range []string{"mcp/connect", "mcp/message", "mcp/disconnect"} {
		if p.handles(m) {
			t.Errorf("%s is served by a provider with nothing offered", m)
		}
	}
	p.declare(&Session{id: "s"}, []ProvidedMCP{{Name: "tools", Server: echoServer(nil)}})
	if !p.handles("mcp/connect") || p.handles("session/update") {
		t.Fatal("after an offer: mcp/connect must be served, and nothing else")
	}
	p.closeAll()
}

func TestProvidedServersNeedANameAndAServerEach(t *testing.T) {
	srv := echoServer(nil)
	for _, bad := range [][]ProvidedMCP{
		{{Name: "", Server: srv}},
		{{Name: "tools"}},
		{{Name: "tools", Server: srv}, {Name: "tools", Server: srv}},
	} {
		if err := validateProvided(bad); err == nil {
			t.Errorf("%+v was accepted", bad)
		}
	}
	if err := validateProvided([]ProvidedMCP{{Name: "a", Server: srv}, {Name: "b", Server: srv}}); err != nil {
		t.Fatal(err)
	}
}

func TestAConnectionlessRequestsNotificationsGoBackWithItsPair(t *testing.T) {
	providerWire(t, 0, func() *server.Server { return echoServer(nil) }, func(w *wiretest.Wire, _ *mcpProvider, _ *Session, id string) {
		call := `{"name":"echo","arguments":{"text":"hi"},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/logLevel":"info"}}`
		w.Send(`{"jsonrpc":"2.0","id":1,"method":"mcp/message","params":{"serverId":"` + id + `","requestId":7,"method":"tools/call","params":` + call + `}}`)
		got := w.Take()
		if len(got) != 2 {
			t.Fatalf("got %q, want the log notification and the carrier", got)
		}
		wantLine(t, got[0], `{"jsonrpc":"2.0","method":"mcp/message","params":{"method":"notifications/message","params":{"data":"hi","level":"info","logger":"echo"},"requestId":7,"serverId":"`+id+`"}}`)
		if !strings.HasPrefix(got[1], `{"jsonrpc":"2.0","id":1,"result":{"result":{`) {
			t.Fatalf("the carrier: %s", got[1])
		}
	})
}

// mcpAgent's prompt "call NAME TEXT" reaches the client's server NAME over
// the ACP connection: initialize, tools/call echo with TEXT (whose log line
// must reach it as a notification), tools/list, close; it answers with what
// it saw.
func mcpAgent() *acp.Agent {
	return &acp.Agent{
		Info:         acp.Implementation{Name: "mcp-agent", Version: "1"},
		MCPOverACP:   true,
		Capabilities: map[string]any{"mcpCapabilities": map[string]any{"acp": true}},
		Prompt: func(ctx context.Context, t *acp.Turn) (acp.StopReason, error) {
			f := strings.Fields(t.Prompt[0].Text)
			serverID := ""
			for _, s := range t.Session.MCPServers() {
				if s.Type == "acp" && s.Name == f[1] {
					serverID = s.ServerID
				}
			}
			mc, err := t.ConnectMCP(ctx, serverID)
			if err != nil {
				return "", err
			}
			defer mc.Close(context.WithoutCancel(ctx))
			notes := make(chan string, 8)
			mc.OnNotification(func(method string, params json.RawMessage) { notes <- method + " " + string(params) })
			if _, err := mc.Call(ctx, "initialize", json.RawMessage(legacyInit)); err != nil {
				return "", err
			}
			if err := mc.Notify(ctx, "notifications/initialized", nil); err != nil {
				return "", err
			}
			res, err := mc.Call(ctx, "tools/call", map[string]any{"name": "echo", "arguments": map[string]any{"text": f[2]}})
			if err != nil {
				return "", err
			}
			var note string
			select {
			case note = <-notes:
			case <-ctx.Done():
				return "", ctx.Err()
			}
			list, err := mc.Call(ctx, "tools/list", nil)
			if err != nil {
				return "", err
			}
			_, unknown := mc.Call(ctx, "no/such", nil)
			return acp.EndTurn, t.MessageChunk(fmt.Sprintf("result %s\nnote %s\nlist has echo %v\nunknown %v",
				res, note, strings.Contains(string(list), `"name":"echo"`), unknown))
		},
	}
}

func TestAgentReachesAClientProvidedMCPServer(t *testing.T) {
	c, err := Pipe(mcpAgent(), &acp.Options{Logger: wiretest.Quiet}, &Options{Logger: wiretest.Quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second) // a hang fails instead of blocking the run
	defer cancel()
	var mu sync.Mutex
	var text strings.Builder
	s, err := c.NewSession(ctx, SessionConfig{
		Cwd:        t.TempDir(),
		ProvideMCP: []ProvidedMCP{{Name: "tools", Server: echoServer(nil)}},
		Updates: UpdateFunc(func(_ context.Context, u *Update) error {
			mu.Lock()
			text.WriteString(u.Text())
			mu.Unlock()
			return nil
		}),
	})
	if err != nil {
		t.Fatal(err)
	}
	stop, err := s.Prompt(ctx, acp.TextBlock("call tools hi"))
	if err != nil || stop != acp.EndTurn {
		t.Fatalf("Prompt = %q, %v", stop, err)
	}
	mu.Lock()
	got := text.String()
	mu.Unlock()
	want := `result {"content":[{"type":"text","text":"hi"}]}
note notifications/message {"data":"hi","level":"info","logger":"echo"}
list has echo true
unknown jsonrpc error -32601: Method not found: no/such`
	if !strings.HasPrefix(got, want[:strings.LastIndex(want, "unknown")]) || !strings.Contains(got, "unknown jsonrpc error -32601") {
		t.Fatalf("the agent saw:\n%s\nwant:\n%s", got, want)
	}
	if st := c.Stats().MCP; st.Connections != 1 || st.Refused != 0 {
		t.Fatalf("MCP stats %+v, want one connection", st)
	}
	// The session's close ends what it offered.
	if err := s.Close(ctx); err != nil {
		t.Fatal(err)
	}
	c.mcp.mu.Lock()
	left, live := len(c.mcp.servers), c.mcp.live
	c.mcp.mu.Unlock()
	if left != 0 || live != 0 {
		t.Fatalf("after the session closed: %d servers offered, %d connections live", left, live)
	}
}

func TestAServersRequestIsAskedOfTheAgentAndAnsweredBack(t *testing.T) {
	providerWire(t, 0, func() *server.Server { return echoServer(nil) }, func(w *wiretest.Wire, p *mcpProvider, _ *Session, id string) {
		exchange1(t, w, `{"jsonrpc":"2.0","id":1,"method":"mcp/connect","params":{"serverId":"`+id+`"}}`)
		p.mu.Lock()
		mc := p.conns["mcpc-1"]
		p.mu.Unlock()
		ask := func(want string, answer string) (json.RawMessage, error) {
			var res json.RawMessage
			var err error
			done := make(chan struct{})
			go func() {
				defer close(done)
				// What the server's side of the connection sends, as a
				// tool asking for the client's roots would.
				res, err = mc.rc.Call(context.Background(), "roots/list", nil)
			}()
			got := w.Take()
			if len(got) != 1 {
				t.Fatalf("got %q, want the request to the agent", got)
			}
			wantLine(t, got[0], want)
			w.Send(answer)
			<-done
			return res, err
		}
		res, err := ask(`{"jsonrpc":"2.0","id":1,"method":"mcp/message","params":{"connectionId":"mcpc-1","method":"roots/list"}}`,
			`{"jsonrpc":"2.0","id":1,"result":{"roots":[]}}`)
		if err != nil || string(res) != `{"roots":[]}` {
			t.Fatalf("the agent's answer came back as %s, %v", res, err)
		}
		_, err = ask(`{"jsonrpc":"2.0","id":2,"method":"mcp/message","params":{"connectionId":"mcpc-1","method":"roots/list"}}`,
			`{"jsonrpc":"2.0","id":2,"error":{"code":-32601,"message":"no roots here"}}`)
		var je *jsonrpc.Error
		if !errors.As(err, &je) || je.Code != -32601 || je.Message != "no roots here" {
			t.Fatalf("the agent's error came back as %v", err)
		}
	})
}
