package machine_test

import (
	"context"
	"fmt"

	"github.com/agentwire/agentwire/mcp/streamable"
	"github.com/agentwire/agentwire/oauth/machine"
)

// A service reaching a protected MCP server with its own credentials:
// the server's 401 leads to its authorization server, whose token
// endpoint gives a token for the client_credentials grant.
func ExampleNew() {
	as := newFakeAS(asConfig{grant: "client_credentials", authMethod: "client_secret_basic"})
	defer as.Close()
	mcpServer := newFakeMCP(as)
	defer mcpServer.Close()

	a, err := machine.New(machine.Options{
		ClientID:     "conformance-test-client",
		ClientSecret: "conformance-test-secret",
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx := context.Background()
	sess, err := streamable.Connect(ctx, mcpServer.URL(), nil, &streamable.ClientOptions{Authorizer: a})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer sess.Close()
	res, err := sess.CallTool(ctx, "test-tool", map[string]any{})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(res.Content[0].Text)
	// Output: done
}
