package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"

	awmcp "github.com/agentwire/agentwire/mcp"
	awserver "github.com/agentwire/agentwire/mcp/server"
	awstreamable "github.com/agentwire/agentwire/mcp/streamable"

	mcpgomcp "github.com/mark3labs/mcp-go/mcp"
	mcpgoserver "github.com/mark3labs/mcp-go/server"
	sdkmcp "github.com/modelcontextprotocol/go-sdk/mcp"
)

// An httpServer is one HTTP server implementation, run in a process of
// its own (this binary re-executed with -serve-http NAME, or node for the
// TypeScript SDK). Every one registers the same tool: echo {text} -> text.
type httpServer struct {
	name string
	peer string // what it is, for the report
	// handler builds the endpoint; maxStreams > 0 asks for room for that
	// many idle streams (only agentwire has limits to raise).
	handler func(maxStreams int) (http.Handler, func(net.Listener) error)
	node    bool // the TypeScript SDK server (bench/ts-server.mjs)
}

var httpServers = []httpServer{
	{name: "plain", peer: "hand-written net/http handler, encoding/json", handler: plainHandler},
	{name: "agentwire", peer: "agentwire mcp HTTPHandler.Serve (defaults)", handler: agentwireHandler},
	{name: "agentwire-sessions", peer: "agentwire mcp HTTPHandler.Serve, Sessions (defaults: in-memory events)", handler: agentwireSessionsHandler},
	{name: "go-sdk", peer: "go-sdk v1.8.0 StreamableHTTPHandler, stateful (default)", handler: goSDKHandler(false)},
	{name: "go-sdk-stateless", peer: "go-sdk v1.8.0 StreamableHTTPHandler, Stateless", handler: goSDKHandler(true)},
	{name: "mcp-go", peer: "mark3labs/mcp-go v1.2.1 StreamableHTTPServer, WithStateful(true)", handler: mcpGoHandler(false)},
	{name: "mcp-go-stateless", peer: "mark3labs/mcp-go v1.2.1 StreamableHTTPServer, WithStateLess(true)", handler: mcpGoHandler(true)},
	{name: "ts", peer: "TypeScript SDK @modelcontextprotocol/server 2.4.0 createMcpHandler, Node " + "(see bench/ts-server.mjs)", node: true},
}

func httpServerNamed(name string) (httpServer, bool) {
	for _, s := range httpServers {
		if s.name == name {
			return s, true
		}
	}
	return httpServer{}, false
}

// serveHTTP is the subprocess side: the named server on addr. It prints
// its endpoint's URL on stdout and exits when stdin ends, so that the
// harness never has to find it to stop it.
func serveHTTP(name, addr string, maxStreams int) error {
	s, ok := httpServerNamed(name)
	if !ok || s.handler == nil {
		return errors.New("unknown HTTP server " + name)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	h, serve := s.handler(maxStreams)
	if serve == nil {
		srv := &http.Server{Handler: h, ErrorLog: nil}
		serve = srv.Serve
	}
	fmt.Printf("http://%s/mcp\n", ln.Addr())
	go func() {
		io.Copy(io.Discard, os.Stdin)
		os.Exit(0)
	}()
	return serve(ln)
}

// ----- plain: the reference, a hand-written handler -----

type plainRequest struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
}

type plainCall struct {
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
}

type plainText struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

type plainResult struct {
	Content []plainText `json:"content"`
}

type plainResponse struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Result  any             `json:"result"`
}

// plainHandler does what any MCP server must at least do for a tools/call:
// decode the body, decode the arguments, encode a result. It does not care
// which era the request is in (the _meta is ignored), answers initialize
// and acknowledges notifications, and holds a GET open as an idle event
// stream.
func plainHandler(int) (http.Handler, func(net.Listener) error) {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet {
			w.Header().Set("Content-Type", "text/event-stream")
			w.WriteHeader(http.StatusOK)
			http.NewResponseController(w).Flush()
			<-r.Context().Done()
			return
		}
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		var req plainRequest
		if err := json.Unmarshal(body, &req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if len(req.ID) == 0 {
			w.WriteHeader(http.StatusAccepted)
			return
		}
		var result any
		switch req.Method {
		case "initialize":
			result = map[string]any{"protocolVersion": "2025-11-25", "capabilities": map[string]any{"tools": map[string]any{}}, "serverInfo": map[string]any{"name": "plain", "version": "1"}}
		case "tools/call":
			var call plainCall
			var args echoArgs
			if json.Unmarshal(req.Params, &call) != nil || json.Unmarshal(call.Arguments, &args) != nil {
				http.Error(w, "bad params", http.StatusBadRequest)
				return
			}
			result = plainResult{Content: []plainText{{Type: "text", Text: args.Text}}}
		default:
			result = map[string]any{}
		}
		out, _ := json.Marshal(plainResponse{JSONRPC: "2.0", ID: req.ID, Result: result})
		w.Header().Set("Content-Type", "application/json")
		w.Write(out)
	}), nil
}

// ----- agentwire -----

// agentwireSessionsHandler is agentwireHandler with legacy sessions on
// (Mcp-Session-Id, one long-lived connection per session, resumable
// streams in the in-memory event store).
func agentwireSessionsHandler(maxStreams int) (http.Handler, func(net.Listener) error) {
	return agentwireHandlerWith(maxStreams, &awstreamable.SessionOptions{})
}

func agentwireHandler(maxStreams int) (http.Handler, func(net.Listener) error) {
	return agentwireHandlerWith(maxStreams, nil)
}

func agentwireHandlerWith(maxStreams int, sessions *awstreamable.SessionOptions) (http.Handler, func(net.Listener) error) {
	s := awserver.New(awmcp.Implementation{Name: "bench", Version: "1"}, nil)
	awserver.AddTool(s, awmcp.Tool{Name: "echo"}, func(_ context.Context, _ *awserver.ToolRequest, in echoArgs) (*awmcp.ToolResult, error) {
		return awmcp.TextResult(in.Text), nil
	})
	opts := &awstreamable.Options{Logger: slog.New(slog.DiscardHandler), Sessions: sessions}
	if maxStreams > 0 {
		// The defaults (256 streams, 1024 connections) are the point of
		// a default; the idle-stream runs measure memory, not the caps.
		opts.MaxStreams = maxStreams
		opts.MaxConns = maxStreams + 512
	}
	h := awstreamable.NewHandler(s, opts)
	return h, h.Serve
}

// ----- go-sdk -----

func goSDKHandler(stateless bool) func(int) (http.Handler, func(net.Listener) error) {
	return func(int) (http.Handler, func(net.Listener) error) {
		s := sdkmcp.NewServer(&sdkmcp.Implementation{Name: "bench", Version: "1"}, nil)
		sdkmcp.AddTool(s, &sdkmcp.Tool{Name: "echo"}, func(_ context.Context, _ *sdkmcp.CallToolRequest, in echoArgs) (*sdkmcp.CallToolResult, any, error) {
			return &sdkmcp.CallToolResult{Content: []sdkmcp.Content{&sdkmcp.TextContent{Text: in.Text}}}, nil, nil
		})
		return sdkmcp.NewStreamableHTTPHandler(func(*http.Request) *sdkmcp.Server { return s },
			&sdkmcp.StreamableHTTPOptions{Stateless: stateless, Logger: slog.New(slog.DiscardHandler)}), nil
	}
}

// ----- mcp-go -----

func mcpGoHandler(stateless bool) func(int) (http.Handler, func(net.Listener) error) {
	return func(int) (http.Handler, func(net.Listener) error) {
		s := mcpgoserver.NewMCPServer("bench", "1", mcpgoserver.WithToolCapabilities(false))
		s.AddTool(mcpgomcp.NewTool("echo", mcpgomcp.WithString("text")), func(_ context.Context, req mcpgomcp.CallToolRequest) (*mcpgomcp.CallToolResult, error) {
			return mcpgomcp.NewToolResultText(req.GetString("text", "")), nil
		})
		opt := mcpgoserver.WithStateful(true)
		if stateless {
			opt = mcpgoserver.WithStateLess(true)
		}
		return mcpgoserver.NewStreamableHTTPServer(s, opt, mcpgoserver.WithStreamableHTTPLogger(slog.New(slog.DiscardHandler))), nil
	}
}

// readURL reads the endpoint a server process prints first.
func readURL(r io.Reader) (string, error) {
	line, err := bufio.NewReader(r).ReadString('\n')
	if err != nil {
		return "", fmt.Errorf("reading the server's address: %w", err)
	}
	return line[:len(line)-1], nil
}
