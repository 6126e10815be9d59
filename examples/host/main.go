// Command host is the example of docs/host-guide.md: it starts an MCP
// server (any command, stdio) or connects to one (-url), negotiates the
// era, and lists and calls what the server offers.
//
//	go run ./examples/host -- go run ./examples/server
//	go run ./examples/host -url http://127.0.0.1:8080/mcp
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/agentwire/agentwire/client"
	"github.com/agentwire/agentwire/mcp"
	"github.com/agentwire/agentwire/mcp/host"
	"github.com/agentwire/agentwire/mcp/streamable"
	"github.com/agentwire/agentwire/process"
)

func main() {
	url := flag.String("url", "", "a Streamable HTTP server instead of a command")
	flag.Parse()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	opts := &host.Options{
		Info: mcp.Implementation{Name: "example-host", Version: "1"},
		// Answers a server that asks for input (either era).
		Capabilities: map[string]any{"elicitation": map[string]any{}},
		OnInput: func(ctx context.Context, req mcp.InputRequest) (any, error) {
			return map[string]any{"action": "decline"}, nil
		},
		Transport: &client.Options{
			Process: &process.Options{Grace: 2 * time.Second, Stderr: os.Stderr},
			Restart: &client.RestartPolicy{MaxRestarts: 3}, // read-only calls survive a crash
		},
	}
	var sess *host.Session
	var err error
	if *url != "" {
		sess, err = streamable.Connect(ctx, *url, opts, nil)
	} else if flag.NArg() > 0 {
		sess, err = host.StartServer(ctx, process.Command{Path: flag.Arg(0), Args: flag.Args()[1:]}, opts)
	} else {
		log.Fatal("usage: host -- CMD [ARGS...]  or  host -url URL")
	}
	if err != nil {
		log.Fatal(err)
	}
	defer func() {
		res := sess.Close() // stdio: close stdin, wait, SIGTERM, wait, SIGKILL
		fmt.Printf("shutdown: %s\n", res.Outcome)
	}()
	fmt.Printf("server %s %s, era %s (%s), probe %s\n", sess.ServerInfo().Name, sess.ServerInfo().Version, sess.Era(), sess.ProtocolVersion(), sess.Probe())

	tools, err := sess.ListTools(ctx)
	if err != nil {
		log.Fatal(err)
	}
	for _, t := range tools {
		fmt.Printf("tool %s: %s\n", t.Name, t.Description)
	}
	res, err := sess.CallTool(ctx, "forecast", map[string]any{"city": "Oslo", "days": 3},
		host.WithProgress(func(p, total float64, msg string) { fmt.Printf("  progress %v/%v %s\n", p, total, msg) }))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("forecast:", res.Content[0].Text)

	raw, err := sess.Request(ctx, "resources/read", map[string]any{"uri": "weather://stations"}, client.Retryable())
	if err != nil {
		log.Fatal(err)
	}
	var read struct {
		Contents []mcp.ResourceContents `json:"contents"`
	}
	json.Unmarshal(raw, &read)
	fmt.Printf("stations: %q\n", read.Contents[0].Text)

	raw, err = sess.Request(ctx, "prompts/get", map[string]any{"name": "plan_trip", "arguments": map[string]string{"city": "Lima"}})
	if err != nil {
		log.Fatal(err)
	}
	var prompt mcp.PromptResult
	json.Unmarshal(raw, &prompt)
	fmt.Println("prompt:", prompt.Messages[0].Content.Text)
}
