package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"strconv"
	"sync/atomic"

	"github.com/creachadair/jrpc2"
	"github.com/creachadair/jrpc2/channel"
	"github.com/creachadair/jrpc2/handler"
	sgjsonrpc2 "github.com/sourcegraph/jsonrpc2"

	"github.com/agentwire/agentwire/acp"
	awmcp "github.com/agentwire/agentwire/mcp"
	awserver "github.com/agentwire/agentwire/mcp/server"
	"github.com/agentwire/agentwire/rpc"

	acpsdk "github.com/coder/acp-go-sdk"
	mcpgomcp "github.com/mark3labs/mcp-go/mcp"
	mcpgoserver "github.com/mark3labs/mcp-go/server"
	sdkjsonrpc "github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdkmcp "github.com/modelcontextprotocol/go-sdk/mcp"
)

// A workload is what the client sends: plain JSON-RPC echo, an MCP
// tools/call of an echo tool, or an ACP prompt answered with 10 updates.
type workload string

const (
	wEcho workload = "echo"
	wMCP  workload = "mcp"
	wACP  workload = "acp"
)

// server is one implementation under test: it serves one connection on r
// and w until r ends.
type server struct {
	name  string
	peer  string // what it is, for the report
	work  workload
	serve func(r io.ReadCloser, w io.WriteCloser) error
	// limitMessage is true when the server bounds a message's size; the
	// 20 MiB probe is reported for every server anyway.
	modern bool // MCP: speak 2026-07-28 (per-request _meta), no initialize
}

var servers = []server{
	{name: "raw", peer: "hand-written loop, one write per reply", work: wEcho, serve: serveRaw(false)},
	{name: "raw-coalesce", peer: "hand-written loop, write when input is drained", work: wEcho, serve: serveRaw(true)},
	{name: "agentwire", peer: "agentwire rpc", work: wEcho, serve: serveAgentwire},
	{name: "jrpc2", peer: "creachadair/jrpc2 v1.3.6", work: wEcho, serve: serveJrpc2},
	{name: "sourcegraph", peer: "sourcegraph/jsonrpc2 v0.2.3 (synchronous handler)", work: wEcho, serve: serveSourcegraph},
	{name: "go-sdk-transport", peer: "go-sdk v1.8.0 IOTransport, read/write loop", work: wEcho, serve: serveGoSDKTransport},
	{name: "agentwire-mcp", peer: "agentwire mcp, legacy (initialize)", work: wMCP, serve: serveAgentwireMCP},
	{name: "agentwire-mcp-modern", peer: "agentwire mcp, 2026-07-28 (per-request _meta)", work: wMCP, serve: serveAgentwireMCP, modern: true},
	{name: "go-sdk-mcp", peer: "go-sdk v1.8.0 MCP server, legacy (initialize)", work: wMCP, serve: serveGoSDKMCP},
	{name: "go-sdk-mcp-modern", peer: "go-sdk v1.8.0 MCP server, 2026-07-28", work: wMCP, serve: serveGoSDKMCP, modern: true},
	{name: "mcp-go", peer: "mark3labs/mcp-go v1.2.1, legacy (initialize)", work: wMCP, serve: serveMCPGo},
	{name: "mcp-go-modern", peer: "mark3labs/mcp-go v1.2.1, 2026-07-28", work: wMCP, serve: serveMCPGo, modern: true},
	{name: "agentwire-traced-off", peer: "agentwire rpc + telemetry, tracing off", work: wEcho, serve: serveTracedEcho(tracingOff)},
	{name: "agentwire-traced-drop", peer: "agentwire rpc + telemetry, sampler drops all", work: wEcho, serve: serveTracedEcho(tracingDrop)},
	{name: "agentwire-mcp-traced-off", peer: "agentwire mcp + telemetry, tracing off", work: wMCP, serve: serveTracedMCP(tracingOff)},
	{name: "agentwire-mcp-traced-drop", peer: "agentwire mcp + telemetry, sampler drops all", work: wMCP, serve: serveTracedMCP(tracingDrop)},
	{name: "agentwire-mcp-traced", peer: "agentwire mcp + telemetry, all sampled, metrics on", work: wMCP, serve: serveTracedMCP(tracingOn)},
	{name: "agentwire-acp", peer: "agentwire acp", work: wACP, serve: serveAgentwireACP},
	{name: "acp-go-sdk", peer: "coder/acp-go-sdk v0.13.0", work: wACP, serve: serveACPSDK},
}

func serverNamed(name string) (server, bool) {
	for _, s := range servers {
		if s.name == name {
			return s, true
		}
	}
	return server{}, false
}

// ----- the practical limit: a hand-written loop (the reference of the performance goals in docs/guarantees.md) -----

type rawRequest struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Method  string          `json:"method"`
	Params  json.RawMessage `json:"params"`
}

type rawResponse struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Result  json.RawMessage `json:"result"`
}

// serveRaw is bufio.Reader line -> json.Unmarshal into a reused struct ->
// json.Encoder; with coalesce, replies are buffered and written when no
// more input is buffered.
func serveRaw(coalesce bool) func(io.ReadCloser, io.WriteCloser) error {
	return func(r io.ReadCloser, w io.WriteCloser) error {
		br := bufio.NewReaderSize(r, 64<<10)
		var out io.Writer = w
		var bw *bufio.Writer
		if coalesce {
			bw = bufio.NewWriterSize(w, 64<<10)
			out = bw
		}
		enc := json.NewEncoder(out)
		var req rawRequest
		resp := rawResponse{JSONRPC: "2.0"}
		for {
			line, err := br.ReadBytes('\n')
			if err != nil {
				return nil
			}
			req.ID, req.Params = nil, nil
			if json.Unmarshal(line, &req) != nil {
				continue
			}
			resp.ID, resp.Result = req.ID, req.Params
			if err := enc.Encode(&resp); err != nil {
				return err
			}
			if coalesce && br.Buffered() == 0 {
				if err := bw.Flush(); err != nil {
					return err
				}
			}
		}
	}
}

// ----- JSON-RPC libraries -----

func serveAgentwire(r io.ReadCloser, w io.WriteCloser) error {
	h := rpc.Methods{"echo": func(_ context.Context, req *rpc.Request) (any, error) {
		return json.RawMessage(req.Params), nil
	}}
	return rpc.New(r, w, h, nil).Wait()
}

func serveJrpc2(r io.ReadCloser, w io.WriteCloser) error {
	srv := jrpc2.NewServer(handler.Map{
		"echo": handler.New(func(_ context.Context, req *jrpc2.Request) (json.RawMessage, error) {
			return json.RawMessage(req.ParamString()), nil
		}),
	}, nil)
	return srv.Start(channel.Line(r, w)).Wait()
}

type rwc struct {
	io.ReadCloser
	w io.WriteCloser
}

func (c rwc) Write(p []byte) (int, error) { return c.w.Write(p) }
func (c rwc) Close() error                { c.ReadCloser.Close(); return c.w.Close() }

func serveSourcegraph(r io.ReadCloser, w io.WriteCloser) error {
	h := sgjsonrpc2.HandlerWithError(func(_ context.Context, _ *sgjsonrpc2.Conn, req *sgjsonrpc2.Request) (any, error) {
		if req.Params == nil {
			return nil, nil
		}
		return *req.Params, nil
	})
	conn := sgjsonrpc2.NewConn(context.Background(), sgjsonrpc2.NewPlainObjectStream(rwc{r, w}), h)
	<-conn.DisconnectNotify()
	return nil
}

func serveGoSDKTransport(r io.ReadCloser, w io.WriteCloser) error {
	ctx := context.Background()
	conn, err := (&sdkmcp.IOTransport{Reader: r, Writer: w}).Connect(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	for {
		msg, err := conn.Read(ctx)
		if err != nil {
			return nil
		}
		req, ok := msg.(*sdkjsonrpc.Request)
		if !ok || !req.ID.IsValid() {
			continue
		}
		if err := conn.Write(ctx, &sdkjsonrpc.Response{ID: req.ID, Result: req.Params}); err != nil {
			return err
		}
	}
}

// ----- MCP servers: one tool, echo {text} -> text -----

type echoArgs struct {
	Text string `json:"text"`
}

func serveAgentwireMCP(r io.ReadCloser, w io.WriteCloser) error {
	s := awserver.New(awmcp.Implementation{Name: "bench", Version: "1"}, nil)
	awserver.AddTool(s, awmcp.Tool{Name: "echo"}, func(_ context.Context, _ *awserver.ToolRequest, in echoArgs) (*awmcp.ToolResult, error) {
		return awmcp.TextResult(in.Text), nil
	})
	return rpc.New(r, w, s.Handler(), s.ConnOptions(nil)).Wait()
}

func serveGoSDKMCP(r io.ReadCloser, w io.WriteCloser) error {
	s := sdkmcp.NewServer(&sdkmcp.Implementation{Name: "bench", Version: "1"}, nil)
	sdkmcp.AddTool(s, &sdkmcp.Tool{Name: "echo"}, func(_ context.Context, _ *sdkmcp.CallToolRequest, in echoArgs) (*sdkmcp.CallToolResult, any, error) {
		return &sdkmcp.CallToolResult{Content: []sdkmcp.Content{&sdkmcp.TextContent{Text: in.Text}}}, nil, nil
	})
	err := s.Run(context.Background(), &sdkmcp.IOTransport{Reader: r, Writer: w})
	if errors.Is(err, io.EOF) {
		return nil
	}
	return err
}

func serveMCPGo(r io.ReadCloser, w io.WriteCloser) error {
	s := mcpgoserver.NewMCPServer("bench", "1", mcpgoserver.WithToolCapabilities(false))
	s.AddTool(mcpgomcp.NewTool("echo", mcpgomcp.WithString("text")), func(_ context.Context, req mcpgomcp.CallToolRequest) (*mcpgomcp.CallToolResult, error) {
		return mcpgomcp.NewToolResultText(req.GetString("text", "")), nil
	})
	return mcpgoserver.NewStdioServer(s).Listen(context.Background(), r, w)
}

// ----- ACP agents: a prompt is answered with 10 message chunks -----

const acpUpdates = 10

func serveAgentwireACP(r io.ReadCloser, w io.WriteCloser) error {
	agent := &acp.Agent{
		Info: acp.Implementation{Name: "bench", Version: "1"},
		Prompt: func(_ context.Context, turn *acp.Turn) (acp.StopReason, error) {
			for range acpUpdates {
				if err := turn.MessageChunk("chunk"); err != nil {
					return "", err
				}
			}
			return acp.EndTurn, nil
		},
	}
	h, o := acp.ConnOptions(agent, nil, nil)
	return rpc.New(r, w, h, o).Wait()
}

// sdkAgent is the acp-go-sdk agent: every method the interface requires,
// only Initialize, NewSession and Prompt doing anything.
type sdkAgent struct {
	conn     *acpsdk.AgentSideConnection
	sessions atomic.Int64
}

func (a *sdkAgent) Authenticate(context.Context, acpsdk.AuthenticateRequest) (acpsdk.AuthenticateResponse, error) {
	return acpsdk.AuthenticateResponse{}, nil
}
func (a *sdkAgent) Initialize(context.Context, acpsdk.InitializeRequest) (acpsdk.InitializeResponse, error) {
	return acpsdk.InitializeResponse{ProtocolVersion: acpsdk.ProtocolVersionNumber}, nil
}
func (a *sdkAgent) Cancel(context.Context, acpsdk.CancelNotification) error { return nil }
func (a *sdkAgent) CloseSession(context.Context, acpsdk.CloseSessionRequest) (acpsdk.CloseSessionResponse, error) {
	return acpsdk.CloseSessionResponse{}, nil
}
func (a *sdkAgent) ListSessions(context.Context, acpsdk.ListSessionsRequest) (acpsdk.ListSessionsResponse, error) {
	return acpsdk.ListSessionsResponse{}, nil
}
func (a *sdkAgent) NewSession(context.Context, acpsdk.NewSessionRequest) (acpsdk.NewSessionResponse, error) {
	return acpsdk.NewSessionResponse{SessionId: acpsdk.SessionId("s" + strconv.FormatInt(a.sessions.Add(1), 10))}, nil
}
func (a *sdkAgent) Prompt(ctx context.Context, p acpsdk.PromptRequest) (acpsdk.PromptResponse, error) {
	for range acpUpdates {
		if err := a.conn.SessionUpdate(ctx, acpsdk.SessionNotification{SessionId: p.SessionId, Update: acpsdk.UpdateAgentMessageText("chunk")}); err != nil {
			return acpsdk.PromptResponse{}, err
		}
	}
	return acpsdk.PromptResponse{StopReason: acpsdk.StopReasonEndTurn}, nil
}
func (a *sdkAgent) ResumeSession(context.Context, acpsdk.ResumeSessionRequest) (acpsdk.ResumeSessionResponse, error) {
	return acpsdk.ResumeSessionResponse{}, nil
}
func (a *sdkAgent) SetSessionConfigOption(context.Context, acpsdk.SetSessionConfigOptionRequest) (acpsdk.SetSessionConfigOptionResponse, error) {
	return acpsdk.SetSessionConfigOptionResponse{}, nil
}
func (a *sdkAgent) SetSessionMode(context.Context, acpsdk.SetSessionModeRequest) (acpsdk.SetSessionModeResponse, error) {
	return acpsdk.SetSessionModeResponse{}, nil
}
func (a *sdkAgent) LoadSession(context.Context, acpsdk.LoadSessionRequest) (acpsdk.LoadSessionResponse, error) {
	return acpsdk.LoadSessionResponse{}, nil
}
func (a *sdkAgent) UnstableDidChangeDocument(context.Context, acpsdk.UnstableDidChangeDocumentNotification) error {
	return nil
}
func (a *sdkAgent) UnstableDidCloseDocument(context.Context, acpsdk.UnstableDidCloseDocumentNotification) error {
	return nil
}
func (a *sdkAgent) UnstableDidFocusDocument(context.Context, acpsdk.UnstableDidFocusDocumentNotification) error {
	return nil
}
func (a *sdkAgent) UnstableDidOpenDocument(context.Context, acpsdk.UnstableDidOpenDocumentNotification) error {
	return nil
}
func (a *sdkAgent) UnstableDidSaveDocument(context.Context, acpsdk.UnstableDidSaveDocumentNotification) error {
	return nil
}

func serveACPSDK(r io.ReadCloser, w io.WriteCloser) error {
	a := &sdkAgent{}
	a.conn = acpsdk.NewAgentSideConnection(a, w, r)
	<-a.conn.Done()
	return nil
}

// serveStdio is the subprocess side: the named server on stdin/stdout.
func serveStdio(name string) error {
	s, ok := serverNamed(name)
	if !ok {
		return errors.New("unknown server " + name)
	}
	return s.serve(os.Stdin, os.Stdout)
}
