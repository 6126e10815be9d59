package streamable_test

import (
	"context"
	"fmt"
	"net/http/httptest"

	"github.com/agentwire/agentwire/mcp"
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
