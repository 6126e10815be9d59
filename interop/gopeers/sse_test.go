package gopeers_test

// go-sdk's and mcp-go's 2024-11-05 HTTP+SSE clients against an agentwire
// server with Options.SSE: the GET on /sse opens the session and its one
// event stream, whose first event names where to POST (/messages?
// sessionId=...); every answer and server message travels on that stream.
// (agentwire's client against go-sdk's and mcp-go's HTTP+SSE servers is in
// gosdk_sse_test.go.)

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/agentwire/agentwire/mcp"
	"github.com/agentwire/agentwire/mcp/streamable"
	mcpclient "github.com/mark3labs/mcp-go/client"
	mcpgo "github.com/mark3labs/mcp-go/mcp"
	gosdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// sseOn is Options with the HTTP+SSE transport on, at its defaults.
func sseOn() streamable.Options {
	return streamable.Options{SSE: &streamable.SSEOptions{}}
}

// go-sdk's SSEClientTransport against agentwire's HTTP+SSE server. go-sdk
// v1.8.0 asks server/discover first; the session is legacy only, so the
// server answers -32022 naming only legacy versions, and go-sdk falls back
// to initialize at 2025-11-25. Then, over the one stream: tools/list and
// tools/call; the list change after a tool is added; a debug log line
// only once logging/setLevel asked for debug (the level is the
// session's); resources/updated after resources/subscribe; the tool's
// elicitation/create answered by the client with a POST; and Close ends
// the session on the server, without a DELETE.
func TestGoSDKSSEClientAgentwireSSEServer(t *testing.T) {
	ps := newPeerServer(t, sseOn(), nil)
	ctx := testCtx(t)
	notes := newGoSDKNotes()
	c := gosdk.NewClient(&gosdk.Implementation{Name: "go-sdk-client", Version: "1.8.0"}, notes.options())
	cs, err := c.Connect(ctx, &gosdk.SSEClientTransport{Endpoint: ps.base + "/sse"}, nil)
	if err != nil {
		t.Fatalf("Connect: %v", err)
	}
	closed := false
	t.Cleanup(func() {
		if !closed {
			cs.Close()
		}
	})
	if v := cs.InitializeResult().ProtocolVersion; v != mcp.LatestLegacyVersion {
		t.Fatalf("protocolVersion %q, want %q", v, mcp.LatestLegacyVersion)
	}
	if got := ps.tr.find("-> POST /messages?sessionId=", `"method":"server/discover"`); len(got) != 1 {
		t.Errorf("server/discover POSTs %q, want go-sdk's one", got)
	}
	refused := ps.tr.find("<-GET", `"code":-32022`)
	var answer struct {
		Error struct {
			Data struct {
				Supported []string `json:"supported"`
			} `json:"data"`
		} `json:"error"`
	}
	if len(refused) == 1 {
		json.Unmarshal([]byte(strings.TrimPrefix(refused[0], "<-GET ")), &answer)
	}
	if sup := answer.Error.Data.Supported; len(sup) == 0 || slices.ContainsFunc(sup, mcp.IsModern) {
		t.Errorf("server/discover answered %q, want -32022 naming only legacy versions", refused)
	}
	if st := ps.h.SSEStats(); st.Sessions != 1 || st.SessionsOpened != 1 || st.ModernRefused != 1 {
		t.Errorf("SSEStats %+v, want one session, opened once, with one modern request refused", st)
	}

	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatalf("ListTools: %v", err)
	}
	var names []string
	for _, tool := range tools.Tools {
		names = append(names, tool.Name)
	}
	for _, want := range []string{"echo", "interop_log", "interop_elicit"} {
		if !slices.Contains(names, want) {
			t.Errorf("tools %v: no %s", names, want)
		}
	}
	res, err := cs.CallTool(ctx, &gosdk.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "over sse"}})
	if err != nil || gosdkText(res) != "echo: over sse" {
		t.Fatalf("echo: %v, %v", res, err)
	}

	ps.addTool("added_live")
	recv(t, notes.listChanged, "tools/list_changed")

	// The session's log level: info until set, so a debug line is not
	// sent; then debug.
	if res, err := cs.CallTool(ctx, &gosdk.CallToolParams{Name: "interop_log"}); err != nil || gosdkText(res) != "logged: false" {
		t.Fatalf("interop_log at the default level: %v, %v; want it not sent", res, err)
	}
	if err := cs.SetLoggingLevel(ctx, &gosdk.SetLoggingLevelParams{Level: "debug"}); err != nil {
		t.Fatalf("SetLoggingLevel: %v", err)
	}
	if res, err := cs.CallTool(ctx, &gosdk.CallToolParams{Name: "interop_log"}); err != nil || gosdkText(res) != "logged: true" {
		t.Fatalf("interop_log at debug: %v, %v; want it sent", res, err)
	}
	if got := recv(t, notes.logs, "the log message"); got != "debug a debug line" {
		t.Errorf("log message %q, want %q", got, "debug a debug line")
	}

	if err := cs.Subscribe(ctx, &gosdk.SubscribeParams{URI: docURI}); err != nil {
		t.Fatalf("Subscribe: %v", err)
	}
	ps.srv.ResourceUpdated(docURI)
	if uri := recv(t, notes.updated, "resources/updated"); uri != docURI {
		t.Errorf("resources/updated for %q, want %q", uri, docURI)
	}

	// A server request in a call, answered by POST.
	res, err = cs.CallTool(ctx, &gosdk.CallToolParams{Name: "interop_elicit"})
	if err != nil || gosdkText(res) != "accept: hello gopher" {
		t.Fatalf("interop_elicit: %v, %v; want the client's answer", res, err)
	}
	if len(ps.tr.find("<-GET", `"method":"elicitation/create"`)) != 1 {
		t.Errorf("elicitation/create did not come on the stream")
	}
	if len(ps.tr.find("-> POST /messages?sessionId=", `"action":"accept"`)) != 1 {
		t.Errorf("the answer to elicitation/create was not POSTed")
	}
	// Every POST was accepted with 202 and an empty body.
	if posts, accepted := len(ps.tr.find("-> POST /messages")), len(ps.tr.find("<- POST 202")); posts != accepted {
		t.Errorf("%d POSTs, %d answered 202", posts, accepted)
	}

	closed = true
	if err := cs.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	eventually(t, "the session ended", func() bool { return ps.h.SSEStats().Sessions == 0 })
	if len(ps.tr.find("-> DELETE")) != 0 {
		t.Errorf("an HTTP+SSE session was sent a DELETE")
	}
}

// mcp-go's NewSSEMCPClient against agentwire's HTTP+SSE server. Start
// waits for the endpoint event; Initialize probes server/discover, gets
// -32022 and falls back to initialize; then CallTool; OnNotification
// hears the list change, resources/updated after Subscribe, and the log
// message after SetLevel; Close ends the session on the server.
func TestMCPGoSSEClientAgentwireSSEServer(t *testing.T) {
	ps := newPeerServer(t, sseOn(), nil)
	ctx := testCtx(t)
	c, err := mcpclient.NewSSEMCPClient(ps.base + "/sse")
	if err != nil {
		t.Fatal(err)
	}
	notes := make(chan mcpgo.JSONRPCNotification, 16)
	c.OnNotification(func(n mcpgo.JSONRPCNotification) { notes <- n })
	if err := c.Start(ctx); err != nil {
		t.Fatalf("Start: %v", err)
	}
	closed := false
	t.Cleanup(func() {
		if !closed {
			c.Close()
		}
	})
	if ep := mcpclient.GetEndpoint(c); ep == nil || ep.Path != "/messages" || ep.Query().Get("sessionId") == "" {
		t.Fatalf("endpoint %v, want /messages?sessionId=...", ep)
	}
	res := initialize(t, ctx, c)
	if res.ProtocolVersion != mcp.LatestLegacyVersion {
		t.Fatalf("protocolVersion %q, want %q", res.ProtocolVersion, mcp.LatestLegacyVersion)
	}
	if len(ps.tr.find("<-GET", `"code":-32022`)) != 1 || len(ps.tr.find("-> POST", `"method":"initialize"`)) != 1 {
		t.Errorf("the connect did not go server/discover -32022, initialize")
	}
	out, err := c.CallTool(ctx, mcpgo.CallToolRequest{Params: mcpgo.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "over sse"}}})
	if err != nil || textOf(out.Content) != "echo: over sse" {
		t.Fatalf("echo: %v, %v", out, err)
	}

	ps.addTool("added_live")
	nextMCPGoNote(t, notes, mcpgo.MethodNotificationToolsListChanged)

	if err := c.Subscribe(ctx, mcpgo.SubscribeRequest{Params: mcpgo.SubscribeParams{URI: docURI}}); err != nil {
		t.Fatalf("Subscribe: %v", err)
	}
	ps.srv.ResourceUpdated(docURI)
	n := nextMCPGoNote(t, notes, mcpgo.MethodNotificationResourceUpdated)
	if uri, _ := n.Params.AdditionalFields["uri"].(string); uri != docURI {
		t.Errorf("resources/updated params %s, want uri %q", mustJSON(t, n.Params), docURI)
	}

	if err := c.SetLevel(ctx, mcpgo.SetLevelRequest{Params: mcpgo.SetLevelParams{Level: mcpgo.LoggingLevelDebug}}); err != nil {
		t.Fatalf("SetLevel: %v", err)
	}
	out, err = c.CallTool(ctx, mcpgo.CallToolRequest{Params: mcpgo.CallToolParams{Name: "interop_log"}})
	if err != nil || textOf(out.Content) != "logged: true" {
		t.Fatalf("interop_log at debug: %v, %v; want it sent", out, err)
	}
	logged := nextMCPGoNote(t, notes, "notifications/message")
	if got := fmt.Sprintf("%v %v", logged.Params.AdditionalFields["level"], logged.Params.AdditionalFields["data"]); got != "debug a debug line" {
		t.Errorf("log message %q, want %q", got, "debug a debug line")
	}
	if st := ps.h.SSEStats(); st.Sessions != 1 {
		t.Errorf("SSEStats %+v, want one session", st)
	}

	closed = true
	if err := c.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	eventually(t, "the session ended", func() bool { return ps.h.SSEStats().Sessions == 0 })
}

// nextMCPGoNote is the next notification mcp-go's client hands over with
// the method, those of other methods skipped.
func nextMCPGoNote(t *testing.T, notes chan mcpgo.JSONRPCNotification, method string) mcpgo.JSONRPCNotification {
	t.Helper()
	for {
		n := recv(t, notes, method)
		if n.Method == method {
			return n
		}
	}
}
