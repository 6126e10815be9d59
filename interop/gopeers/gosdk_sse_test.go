package gopeers_test

// agentwire's host client against the 2024-11-05 HTTP+SSE servers that Go
// MCP servers still ship: go-sdk's SSEHandler and mcp-go's SSEServer,
// reached through the backwards-compatibility procedure (server/discover
// and initialize POSTed to the URL are refused without a JSON-RPC error,
// a GET of the URL opens the event stream, whose first event names the
// endpoint for the messages).

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/agentwire/agentwire/mcp"
	"github.com/agentwire/agentwire/mcp/host"
	mcpgo "github.com/mark3labs/mcp-go/mcp"
	mcpserver "github.com/mark3labs/mcp-go/server"
	gosdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// sseHostOptions collects what the server sends outside a call's answer:
// log messages, other notifications, and sampling requests (answered
// "sampled").
func sseHostOptions(logs, notes chan string) *host.Options {
	return &host.Options{
		Capabilities: map[string]any{"sampling": map[string]any{}},
		OnInput: func(_ context.Context, req mcp.InputRequest) (any, error) {
			return map[string]any{"role": "assistant", "model": "test-model", "content": map[string]any{"type": "text", "text": "sampled"}}, nil
		},
		OnLog:          func(level, _ string, data json.RawMessage) { logs <- level + " " + string(data) },
		OnNotification: func(method string, params json.RawMessage) { notes <- method + " " + string(params) },
	}
}

// waitFor returns the next value from ch, failing the test after 10 s.
func waitFor(t *testing.T, ch chan string, what string) string {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		t.Fatalf("no %s", what)
		return ""
	}
}

func TestHostClientGoSDKSSEServer(t *testing.T) {
	srv := gosdk.NewServer(&gosdk.Implementation{Name: "go-sdk-peer", Version: "1.8.0"}, &gosdk.ServerOptions{
		SubscribeHandler:   func(context.Context, *gosdk.SubscribeRequest) error { return nil },
		UnsubscribeHandler: func(context.Context, *gosdk.UnsubscribeRequest) error { return nil },
	})
	type echoIn struct {
		Text string `json:"text"`
	}
	gosdk.AddTool(srv, &gosdk.Tool{Name: "echo", Description: "Echoes text."},
		func(ctx context.Context, req *gosdk.CallToolRequest, in echoIn) (*gosdk.CallToolResult, any, error) {
			return &gosdk.CallToolResult{Content: []gosdk.Content{&gosdk.TextContent{Text: "echo: " + in.Text}}}, nil, nil
		})
	gosdk.AddTool(srv, &gosdk.Tool{Name: "sample", Description: "Asks the client to sample, and logs."},
		func(ctx context.Context, req *gosdk.CallToolRequest, _ struct{}) (*gosdk.CallToolResult, any, error) {
			req.Session.Log(ctx, &gosdk.LoggingMessageParams{Level: "info", Data: "sampling"})
			res, err := req.Session.CreateMessage(ctx, &gosdk.CreateMessageParams{MaxTokens: 1, Messages: []*gosdk.SamplingMessage{{Role: "user", Content: &gosdk.TextContent{Text: "hi"}}}})
			if err != nil {
				return nil, nil, err
			}
			return &gosdk.CallToolResult{Content: []gosdk.Content{res.Content}}, nil, nil
		})
	srv.AddResource(&gosdk.Resource{URI: "test://doc", Name: "doc", MIMEType: "text/plain"},
		func(context.Context, *gosdk.ReadResourceRequest) (*gosdk.ReadResourceResult, error) {
			return &gosdk.ReadResourceResult{Contents: []*gosdk.ResourceContents{{URI: "test://doc", Text: "v1"}}}, nil
		})
	tr := &transcript{}
	tr.logOnFailure(t)
	web := httptest.NewServer(tapHandler(gosdk.NewSSEHandler(func(*http.Request) *gosdk.Server { return srv }, &gosdk.SSEOptions{}), tr))
	t.Cleanup(web.Close) // after the session's Close, which ends the stream

	logs, notes := make(chan string, 8), make(chan string, 8)
	sess := connectHTTP(t, web.URL+"/sse", sseHostOptions(logs, notes))
	ctx := testCtx(t)
	if sess.Era() != mcp.Legacy || sess.ServerInfo().Name != "go-sdk-peer" {
		t.Fatalf("era %s, server %+v", sess.Era(), sess.ServerInfo())
	}
	if len(tr.find("GET /sse")) != 1 || len(tr.find("<- HTTP 400")) != 2 {
		t.Errorf("the connect did not go discover 400, initialize 400, GET")
	}
	tools, err := sess.ListTools(ctx)
	if err != nil || len(tools) != 2 {
		t.Fatalf("tools %v, %v", tools, err)
	}
	res, err := sess.CallTool(ctx, "echo", map[string]any{"text": "over go-sdk sse"})
	if err != nil || hostText(res) != "echo: over go-sdk sse" {
		t.Fatalf("echo %+v, %v", res, err)
	}

	// A server request and a log message on the stream, in a call.
	if err := sess.SetLogLevel(ctx, "info"); err != nil {
		t.Fatal(err)
	}
	res, err = sess.CallTool(ctx, "sample", nil)
	if err != nil || hostText(res) != "sampled" {
		t.Fatalf("sample %+v, %v", res, err)
	}
	if got := waitFor(t, logs, "log message"); got != `info "sampling"` {
		t.Errorf("log %s", got)
	}

	// Notifications of the session, outside any call.
	if _, err := sess.Request(ctx, "resources/subscribe", map[string]any{"uri": "test://doc"}); err != nil {
		t.Fatal(err)
	}
	if err := srv.ResourceUpdated(ctx, &gosdk.ResourceUpdatedNotificationParams{URI: "test://doc"}); err != nil {
		t.Fatal(err)
	}
	if got := waitFor(t, notes, "resource update"); !strings.HasPrefix(got, "notifications/resources/updated ") || !strings.Contains(got, "test://doc") {
		t.Errorf("got %s", got)
	}
	srv.RemoveTools("echo")
	if got := waitFor(t, notes, "list change"); !strings.HasPrefix(got, "notifications/tools/list_changed") {
		t.Errorf("got %s", got)
	}
	if len(tr.find("-> DELETE")) != 0 {
		t.Errorf("an HTTP+SSE session was sent a DELETE")
	}
}

func TestHostClientMCPGoSSEServer(t *testing.T) {
	m := mcpserver.NewMCPServer("mcp-go-peer", "1.2.1", mcpserver.WithToolCapabilities(true), mcpserver.WithLogging())
	m.AddTool(mcpgo.NewTool("echo", mcpgo.WithDescription("Echoes text."), mcpgo.WithString("text")),
		func(ctx context.Context, req mcpgo.CallToolRequest) (*mcpgo.CallToolResult, error) {
			return mcpgo.NewToolResultText("echo: " + req.GetString("text", "")), nil
		})
	// A short keep-alive: mcp-go's is a ping request on the stream, which
	// the client must answer.
	sse := mcpserver.NewSSEServer(m, mcpserver.WithKeepAlive(true), mcpserver.WithKeepAliveInterval(20*time.Millisecond))
	tr := &transcript{}
	tr.logOnFailure(t)
	web := httptest.NewServer(tapHandler(sse, tr))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		sse.Shutdown(ctx)
		web.Close()
	})

	logs, notes := make(chan string, 8), make(chan string, 64)
	sess := connectHTTP(t, web.URL+"/sse", sseHostOptions(logs, notes))
	ctx := testCtx(t)
	if sess.Era() != mcp.Legacy || sess.ServerInfo().Name != "mcp-go-peer" {
		t.Fatalf("era %s, server %+v", sess.Era(), sess.ServerInfo())
	}
	if len(tr.find("<- HTTP 405")) != 2 || len(tr.find("GET /sse")) != 1 {
		t.Errorf("the connect did not go discover 405, initialize 405, GET")
	}
	res, err := sess.CallTool(ctx, "echo", map[string]any{"text": "over mcp-go sse"})
	if err != nil || hostText(res) != "echo: over mcp-go sse" {
		t.Fatalf("echo %+v, %v", res, err)
	}
	// The keep-alive pings are answered, with an empty result, by POST.
	eventually(t, "an answered keep-alive ping", func() bool {
		for _, l := range tr.find("->", `"result":{}`) {
			if !strings.Contains(l, `"method"`) {
				return true
			}
		}
		return false
	})
	m.SendNotificationToAllClients("notifications/tools/list_changed", nil)
	for {
		if got := waitFor(t, notes, "list change"); strings.HasPrefix(got, "notifications/tools/list_changed") {
			break
		}
	}
	if len(tr.find("-> DELETE")) != 0 {
		t.Errorf("an HTTP+SSE session was sent a DELETE")
	}
}

// A 2025-11-25 session with go-sdk's stateful Streamable HTTP server: the
// client opens the session's standalone GET stream once connected, and a
// list change or resource update sent outside any call comes there.
func TestHostClientGoSDKStatefulStreamableServerGETStream(t *testing.T) {
	srv := gosdk.NewServer(&gosdk.Implementation{Name: "go-sdk-peer", Version: "1.8.0"}, &gosdk.ServerOptions{
		SubscribeHandler:   func(context.Context, *gosdk.SubscribeRequest) error { return nil },
		UnsubscribeHandler: func(context.Context, *gosdk.UnsubscribeRequest) error { return nil },
	})
	gosdk.AddTool(srv, &gosdk.Tool{Name: "echo", Description: "Echoes text."},
		func(ctx context.Context, req *gosdk.CallToolRequest, _ struct{}) (*gosdk.CallToolResult, any, error) {
			return &gosdk.CallToolResult{Content: []gosdk.Content{&gosdk.TextContent{Text: "echo"}}}, nil, nil
		})
	srv.AddResource(&gosdk.Resource{URI: "test://doc", Name: "doc", MIMEType: "text/plain"},
		func(context.Context, *gosdk.ReadResourceRequest) (*gosdk.ReadResourceResult, error) {
			return &gosdk.ReadResourceResult{Contents: []*gosdk.ResourceContents{{URI: "test://doc", Text: "v1"}}}, nil
		})
	tr := &transcript{}
	tr.logOnFailure(t)
	h := gosdk.NewStreamableHTTPHandler(func(*http.Request) *gosdk.Server { return srv },
		&gosdk.StreamableHTTPOptions{EventStore: gosdk.NewMemoryEventStore(nil), SessionTimeout: time.Minute})
	web := httptest.NewServer(tapHandler(h, tr))
	t.Cleanup(web.Close)

	logs, notes := make(chan string, 8), make(chan string, 8)
	opts := sseHostOptions(logs, notes)
	opts.Eras = mcp.LegacyOnly // go-sdk would speak 2026-07-28, statelessly
	sess := connectHTTP(t, web.URL, opts)
	ctx := testCtx(t)
	if sess.Era() != mcp.Legacy {
		t.Fatalf("era %s", sess.Era())
	}
	if len(tr.find("-> GET /")) != 1 {
		t.Errorf("no standalone GET stream")
	}
	if _, err := sess.Request(ctx, "resources/subscribe", map[string]any{"uri": "test://doc"}); err != nil {
		t.Fatal(err)
	}
	if err := srv.ResourceUpdated(ctx, &gosdk.ResourceUpdatedNotificationParams{URI: "test://doc"}); err != nil {
		t.Fatal(err)
	}
	if got := waitFor(t, notes, "resource update"); !strings.HasPrefix(got, "notifications/resources/updated ") {
		t.Errorf("got %s", got)
	}
	srv.RemoveTools("echo")
	if got := waitFor(t, notes, "list change"); !strings.HasPrefix(got, "notifications/tools/list_changed") {
		t.Errorf("got %s", got)
	}
}
