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
