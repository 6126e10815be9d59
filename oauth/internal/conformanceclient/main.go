// Command conformanceclient runs the client scenarios of the official MCP
// conformance suite with agentwire's MCP client over Streamable HTTP, all
// of them, so that a run of a whole requirement set needs one command:
//
//	conformance client --command "conformanceclient" --scenario tools_call
//	conformance client --command "conformanceclient" --requirements 2026-07-28
//
// The suite passes the scenario server's URL as the last argument, the
// scenario in MCP_CONFORMANCE_SCENARIO, the protocol version in
// MCP_CONFORMANCE_PROTOCOL_VERSION and scenario data in
// MCP_CONFORMANCE_CONTEXT (tool calls to make; pre-registered
// credentials, client credentials, keys and assertions). Each scenario is
// the ordinary use of the client API a host would make; nothing here works
// around the client.
//
// The OAuth scenarios (auth/*) are authorized by package authcode (the
// extensions for a client acting for itself by package machine). The
// suite's authorization server approves at once, answering the
// authorization request with a redirect to the callback; the user agent
// here requests the authorization URL and returns where that redirect
// points. Each connects, lists the tools and calls test-tool; the
// scenarios that a client must refuse end with an error, and a non-zero
// exit. The other scenarios (core.go) use the client unauthorized, with
// the capabilities and the answers to server requests they test.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/agentwire/agentwire/mcp"
	"github.com/agentwire/agentwire/mcp/host"
	"github.com/agentwire/agentwire/mcp/streamable"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "conformanceclient:", err)
		os.Exit(1)
	}
}

func run() error {
	if len(os.Args) < 2 {
		return fmt.Errorf("usage: conformanceclient URL")
	}
	serverURL := os.Args[len(os.Args)-1]
	scenario := os.Getenv("MCP_CONFORMANCE_SCENARIO")
	version := os.Getenv("MCP_CONFORMANCE_PROTOCOL_VERSION")
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Second)
	defer cancel()

	opts := &host.Options{
		Info: mcp.Implementation{Name: "agentwire-conformance-client", Version: "1.0.0"},
		Eras: mcp.LegacyOnly,
	}
	switch {
	case mcp.IsModern(version):
		opts.Eras = mcp.ModernOnly
	case version != "":
		opts.LegacyVersion = version
	}
	if strings.HasPrefix(scenario, "auth/") {
		return runAuth(ctx, serverURL, scenario, opts)
	}
	return runCore(ctx, serverURL, scenario, opts)
}

// runAuth runs an OAuth scenario: connect authorized as the scenario
// says, list the tools, call test-tool.
func runAuth(ctx context.Context, serverURL, scenario string, opts *host.Options) error {
	var sc scenarioContext
	if raw := os.Getenv("MCP_CONFORMANCE_CONTEXT"); raw != "" {
		if err := json.Unmarshal([]byte(raw), &sc); err != nil {
			return fmt.Errorf("MCP_CONFORMANCE_CONTEXT: %w", err)
		}
	}
	authorizer, err := newAuthorizer(scenario, sc)
	if err != nil {
		return err
	}
	sess, err := streamable.Connect(ctx, serverURL, opts, &streamable.ClientOptions{Authorizer: authorizer})
	if err != nil {
		return err
	}
	defer sess.Close()
	if _, err := sess.ListTools(ctx); err != nil {
		return err
	}
	_, err = sess.CallTool(ctx, "test-tool", map[string]any{})
	return err
}
