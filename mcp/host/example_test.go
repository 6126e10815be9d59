package host_test

import (
	"context"
	"fmt"
	"io"

	"github.com/agentwire/agentwire/mcp"
	"github.com/agentwire/agentwire/mcp/host"
	"github.com/agentwire/agentwire/mcp/server"
	"github.com/agentwire/agentwire/rpc"
)

// A client negotiating with a legacy-only server: the server/discover
// probe is refused as a legacy server refuses it, and the client falls
// back to initialize on the same stream.
func ExampleNewClient() {
	s := server.New(mcp.Implementation{Name: "old", Version: "1"}, &server.Options{Eras: mcp.LegacyOnly})
	toServer, clientOut := io.Pipe()
	clientIn, fromServer := io.Pipe()
	conn := rpc.New(toServer, fromServer, s.Handler(), s.ConnOptions(nil))
	defer conn.Wait()

	sess, err := host.NewClient(context.Background(), clientIn, clientOut, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer sess.Close()
	fmt.Println(sess.Probe(), sess.Era(), sess.ProtocolVersion(), sess.ServerInfo().Name)
	// Output: error legacy 2025-11-25 old
}

// A tool that runs as a task: the client starts it, keeps its id, and
// waits for it; the server asks for a confirmation on the way, which
// OnInput answers.
func ExampleSession_StartTool() {
	s := server.New(mcp.Implementation{Name: "ops", Version: "1"}, nil)
	defer s.Shutdown(context.Background())
	server.AddTool(s, mcp.Tool{Name: "deploy", Execution: &mcp.ToolExecution{TaskSupport: mcp.TaskOptional}},
		func(ctx context.Context, req *server.ToolRequest, in struct {
			Service string `json:"service"`
		}) (*mcp.ToolResult, error) {
			req.SetStatusMessage("building " + in.Service)
			ok, err := req.Elicit(ctx, "go", "Roll out "+in.Service+"?", map[string]any{"type": "object"})
			if err != nil {
				return nil, err
			}
			return mcp.TextResult(in.Service + " rolled out: " + ok.Action), nil
		})
	toServer, clientOut := io.Pipe()
	clientIn, fromServer := io.Pipe()
	conn := rpc.New(toServer, fromServer, s.Handler(), s.ConnOptions(nil))
	defer conn.Wait()

	sess, err := host.NewClient(context.Background(), clientIn, clientOut, &host.Options{
		Capabilities: map[string]any{"elicitation": map[string]any{}},
		OnInput: func(ctx context.Context, req mcp.InputRequest) (any, error) {
			return map[string]any{"action": "accept", "content": map[string]any{}}, nil
		},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer sess.Close()
	task, err := sess.StartTool(context.Background(), "deploy", map[string]string{"service": "api"})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(task.ID() != "", task.Last().Status)
	res, err := task.Wait(context.Background(), nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(res.Content[0].Text)
	// Output:
	// true working
	// api rolled out: accept
}
