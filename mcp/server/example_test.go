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
	s := server.New(mcp.Implementation{Name: "calc", Version: "1"}, nil)
	type sum struct {
		A int `json:"a"`
		B int `json:"b"`
	}
	server.AddTool(s, mcp.Tool{Name: "add"}, func(ctx context.Context, req *server.ToolRequest, in sum) (*mcp.ToolResult, error) {
		return mcp.TextResult(fmt.Sprint(in.A + in.B)), nil
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
	res, err := sess.CallTool(ctx, "add", map[string]int{"a": 2, "b": 3})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(sess.Era(), res.Content[0].Text)
	// The arguments are checked against the inferred schema first.
	res, _ = sess.CallTool(ctx, "add", map[string]any{"a": "2", "b": 3})
	fmt.Println(res.IsError, res.Content[0].Text)
	// Output:
	// modern 5
	// true invalid arguments for add: argument "a" must be an integer, not a string.
}
