package server_test

import (
	"context"
	"fmt"
	"io"

	"github.com/agentwire/agentwire/mcp"
	"github.com/agentwire/agentwire/mcp/host"
	"github.com/agentwire/agentwire/mcp/server"
	"github.com/agentwire/agentwire/rpc"
)

// A server with one typed tool, served on one connection (here in
// memory; ServeStdio serves stdin and stdout), and a client that calls it.
func ExampleAddTool() {
	s := server.New(mcp.Implementation{Name: "weather", Version: "1.0.0"}, nil)
	server.AddTool(s, mcp.Tool{Name: "forecast", Description: "Tomorrow's weather."},
		func(ctx context.Context, req *server.ToolRequest, in struct {
			City string `json:"city"`
		}) (*mcp.ToolResult, error) {
			return mcp.TextResult("sunny in " + in.City), nil
		})

	toServer, clientOut := io.Pipe()
	clientIn, fromServer := io.Pipe()
	conn := rpc.New(toServer, fromServer, s.Handler(), s.ConnOptions(nil))
	defer conn.Wait()

	ctx := context.Background()
	sess, err := host.NewClient(ctx, clientIn, clientOut, nil)
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
	fmt.Println(sess.Era(), res.Content[0].Text)
	// The arguments are checked against the inferred schema first.
	res, _ = sess.CallTool(ctx, "forecast", map[string]any{"city": 7})
	fmt.Println(res.IsError, res.Content[0].Text)
	// Output:
	// modern sunny in Oslo
	// true invalid arguments for forecast: argument "city" must be a string, not an integer.
}
