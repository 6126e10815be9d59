package acpclient_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"

	"github.com/agentwire/agentwire/acp"
	"github.com/agentwire/agentwire/acp/acpclient"
)

// A client drives an agent (here one of package acp, in memory; Start
// launches a subprocess the same way), streams its chunks and prints the
// stop reason.
func Example() {
	agent := &acp.Agent{
		Info: acp.Implementation{Name: "greeter", Version: "1"},
		Prompt: func(ctx context.Context, t *acp.Turn) (acp.StopReason, error) {
			t.MessageChunk("hello, ")
			t.MessageChunk(t.Prompt[0].Text)
			return acp.EndTurn, nil
		},
	}
	quiet := slog.New(slog.DiscardHandler)
	conn, err := acpclient.Pipe(agent, &acp.Options{Logger: quiet}, &acpclient.Options{
		Logger: quiet,
		Updates: acpclient.UpdateFunc(func(_ context.Context, u *acpclient.Update) error {
			fmt.Print(u.Text()) // in the order the agent sent them
			return nil
		}),
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer conn.Close()
	fmt.Println("agent:", conn.AgentInfo().Name)

	dir, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(dir)
	s, err := conn.NewSession(context.Background(), acpclient.SessionConfig{Cwd: dir})
	if err != nil {
		fmt.Println(err)
		return
	}
	reason, err := s.Prompt(context.Background(), acp.TextBlock("world"))
	fmt.Println()
	fmt.Println(reason, err)
	// Output:
	// agent: greeter
	// hello, world
	// end_turn <nil>
}

// A permission policy that allows reads and refuses everything else.
func ExamplePermissionFunc() {
	policy := acpclient.PermissionFunc(func(ctx context.Context, s *acpclient.Session, r *acpclient.PermissionRequest) (acpclient.PermissionOutcome, error) {
		if r.ToolCall.Kind == "read" {
			return acpclient.AllowOnce.RequestPermission(ctx, s, r)
		}
		return acpclient.DenyAll.RequestPermission(ctx, s, r)
	})
	_ = &acpclient.Options{Permissions: policy}
	fmt.Println("ok")
	// Output: ok
}
