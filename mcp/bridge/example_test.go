package bridge_test

import (
	"context"
	"fmt"
	"io"
	"net/http/httptest"

	"github.com/agentwire/agentwire/mcp"
	"github.com/agentwire/agentwire/mcp/bridge"
	"github.com/agentwire/agentwire/mcp/host"
	"github.com/agentwire/agentwire/mcp/server"
	"github.com/agentwire/agentwire/mcp/streamable"
	"github.com/agentwire/agentwire/rpc"
)

// A legacy server (here in memory; usually a subprocess, host.StartServer)
// served over Streamable HTTP to a modern client: the bridge answers
// server/discover for it and translates the calls.
func ExampleNew() {
	s := server.New(mcp.Implementation{Name: "old", Version: "1"}, &server.Options{Eras: mcp.LegacyOnly})
	s.AddTool(mcp.Tool{Name: "hello"}, func(context.Context, *server.ToolRequest) (*mcp.ToolResult, error) {
		return mcp.TextResult("hello"), nil
	})
	toServer, clientOut := io.Pipe()
	clientIn, fromServer := io.Pipe()
	conn := rpc.New(toServer, fromServer, s.Handler(), s.ConnOptions(nil))
	defer conn.Wait()
	ctx := context.Background()
	upstream, err := host.NewClient(ctx, clientIn, clientOut, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer upstream.Close()

	h := streamable.NewHandler(bridge.New(upstream), nil)
	web := httptest.NewServer(h)
	defer web.Close()
	defer h.Shutdown(context.Background())

	sess, err := streamable.Connect(ctx, web.URL+"/mcp", &host.Options{Eras: mcp.ModernOnly}, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer sess.Close()
	res, err := sess.CallTool(ctx, "hello", nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(upstream.Era(), sess.Era(), res.Content[0].Text)
	// Output: legacy modern hello
}
