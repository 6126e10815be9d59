package streamable_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/agentwire/agentwire/mcp"
	"github.com/agentwire/agentwire/mcp/auth"
	"github.com/agentwire/agentwire/mcp/server"
	"github.com/agentwire/agentwire/mcp/streamable"
)

// A server with one tool, served over Streamable HTTP, and a client that
// negotiates the era over HTTP and calls the tool.
func ExampleNewHandler() {
	srv := server.New(mcp.Implementation{Name: "weather", Version: "1.0.0"}, nil)
	server.AddTool(srv, mcp.Tool{Name: "forecast", Description: "Tomorrow's weather."},
		func(ctx context.Context, req *server.ToolRequest, in struct {
			City string `json:"city"`
		}) (*mcp.ToolResult, error) {
			return mcp.TextResult("sunny in " + in.City), nil
		})
	h := streamable.NewHandler(srv, nil)
	web := httptest.NewServer(h) // or http.ListenAndServe("127.0.0.1:8080", h)
	defer web.Close()
	defer h.Shutdown(context.Background())

	ctx := context.Background()
	sess, err := streamable.Connect(ctx, web.URL+"/mcp", nil, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer sess.Close()
	res, err := sess.CallTool(ctx, "forecast", map[string]string{"city": "Oslo"})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(sess.Era(), sess.ProtocolVersion(), res.Content[0].Text)
	// Output: modern 2026-07-28 sunny in Oslo
}

// A server that protects itself: every request needs a token the
// verifier accepts, with files:read; the delete tool needs files:write
// too. The verified identity is in the tool handler's context.
func ExampleProtection() {
	srv := server.New(mcp.Implementation{Name: "files", Version: "1.0.0"}, nil)
	server.AddTool(srv, mcp.Tool{Name: "whoami", Description: "Says who is calling."},
		func(ctx context.Context, req *server.ToolRequest, _ struct{}) (*mcp.ToolResult, error) {
			return mcp.TextResult("hello " + auth.IdentityFrom(ctx).Subject), nil
		})
	server.AddTool(srv, mcp.Tool{Name: "delete", Description: "Deletes a file.", Scopes: []string{"files:write"}},
		func(ctx context.Context, req *server.ToolRequest, in struct {
			Path string `json:"path"`
		}) (*mcp.ToolResult, error) {
			return mcp.TextResult("deleted " + in.Path), nil
		})
	// A real verifier checks a JWT access token against the issuer's keys,
	// or asks the authorization server (introspection).
	verifier := auth.VerifierFunc(func(ctx context.Context, token string) (*auth.Identity, error) {
		if token != "alice-token" {
			return nil, fmt.Errorf("%w: unknown token", auth.ErrInvalidToken)
		}
		return &auth.Identity{Subject: "alice", Scopes: []string{"files:read"}}, nil
	})
	h := streamable.NewHandler(srv, &streamable.Options{Protect: &streamable.Protection{
		Verifier: verifier,
		Metadata: auth.ProtectedResourceMetadata{
			Resource:             "https://files.example.com/mcp", // the endpoint's public URL
			AuthorizationServers: []string{"https://auth.example.com"},
			ScopesSupported:      []string{"files:read", "files:write"},
		},
		Scopes: []string{"files:read"},
	}})
	web := httptest.NewServer(h)
	defer web.Close()
	defer h.Shutdown(context.Background())

	// Without a token: 401, and where to learn how to get one.
	resp, err := http.Post(web.URL+"/mcp", "application/json", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
	if err != nil {
		fmt.Println(err)
		return
	}
	resp.Body.Close()
	fmt.Println(resp.StatusCode, resp.Header.Get("WWW-Authenticate"))

	ctx := context.Background()
	sess, err := streamable.Connect(ctx, web.URL+"/mcp", nil, &streamable.ClientOptions{Token: "alice-token"})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer sess.Close()
	res, err := sess.CallTool(ctx, "whoami", map[string]any{})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(res.Content[0].Text)
	_, err = sess.CallTool(ctx, "delete", map[string]string{"path": "notes.txt"})
	fmt.Println(err)
	// Output:
	// 401 Bearer resource_metadata="https://files.example.com/.well-known/oauth-protected-resource/mcp", scope="files:read"
	// hello alice
	// mcp: HTTP 403 Forbidden: jsonrpc error -32600: Forbidden: insufficient scope: the request needs files:read files:write (WWW-Authenticate: Bearer error="insufficient_scope", scope="files:read files:write", resource_metadata="https://files.example.com/.well-known/oauth-protected-resource/mcp")
}
