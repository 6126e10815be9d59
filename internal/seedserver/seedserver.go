// Package seedserver is `agentwire serve mcp`: the example MCP server with
// demonstration tools, each of which shows one thing a stdio host must
// cope with (a stray print to stdout, a crash, a slow tool that must stop
// when cancelled).
package seedserver

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/agentwire/agentwire/internal/fixtures"
	"github.com/agentwire/agentwire/mcp"
	"github.com/agentwire/agentwire/mcp/server"
)

// Version is the server's version in serverInfo.
const Version = "1.0.0"

// Options selects the server's behaviour.
type Options struct {
	Server server.Options
	// Stderr receives the notes tools write (slow_report's cancellation
	// note, crash's last words). Nil means os.Stderr.
	Stderr io.Writer
	// Exit ends the process (crash). Nil means os.Exit.
	Exit func(code int)
	// Fixtures names extra fixtures to add: "conformance" (the tools,
	// resources and prompts of the MCP conformance suite) or "".
	Fixtures string
	// OmitCrash leaves out crash, the tool that ends the process: a
	// server on a network must not let any client stop it. (chatty's
	// print to stdout harms only a stdio stream, so it stays.)
	OmitCrash bool
}

type echoArgs struct {
	Text string `json:"text" description:"the text to echo"`
}

type searchArgs struct {
	Query string `json:"query" description:"what to look for"`
}

type reportArgs struct {
	Steps   int `json:"steps" description:"how many steps the report takes"`
	DelayMS int `json:"delay_ms,omitempty" description:"milliseconds per step (default 100)"`
}

// New returns the example server.
func New(opts Options) *server.Server {
	stderr := opts.Stderr
	if stderr == nil {
		stderr = os.Stderr
	}
	exit := opts.Exit
	if exit == nil {
		exit = os.Exit
	}
	s := server.New(mcp.Implementation{Name: "agentwire-seed", Version: Version}, &opts.Server)

	server.AddTool(s, mcp.Tool{Name: "echo", Description: "Echoes its text."},
		func(_ context.Context, _ *server.ToolRequest, in echoArgs) (*mcp.ToolResult, error) {
			return mcp.TextResult(in.Text), nil
		})

	server.AddTool(s, mcp.Tool{Name: "search", Description: "Searches a small fixed catalogue. Read-only: safe to retry.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: mcp.Hint(true), IdempotentHint: mcp.Hint(true),
			DestructiveHint: mcp.Hint(false), OpenWorldHint: mcp.Hint(false)}},
		func(_ context.Context, _ *server.ToolRequest, in searchArgs) (*mcp.ToolResult, error) {
			var hits []string
			for _, item := range catalogue {
				if strings.Contains(strings.ToLower(item), strings.ToLower(in.Query)) {
					hits = append(hits, item)
				}
			}
			return &mcp.ToolResult{
				Content:           []mcp.Content{mcp.Text(fmt.Sprintf("%d results for %q: %s", len(hits), in.Query, strings.Join(hits, "; ")))},
				StructuredContent: map[string]any{"query": in.Query, "results": append([]string{}, hits...)},
			}, nil
		})

	server.AddTool(s, mcp.Tool{Name: "slow_report", Description: "Writes a report step by step; reports progress when asked and stops when cancelled."},
		func(ctx context.Context, req *server.ToolRequest, in reportArgs) (*mcp.ToolResult, error) {
			if in.Steps <= 0 {
				return mcp.ErrorResult("steps must be positive"), nil
			}
			delay := time.Duration(in.DelayMS) * time.Millisecond
			if in.DelayMS <= 0 {
				delay = 100 * time.Millisecond
			}
			t := time.NewTimer(delay)
			defer t.Stop()
			for step := 1; step <= in.Steps; step++ {
				select {
				case <-ctx.Done():
					// Tools must check for cancellation : say
					// where we stopped, on stderr, and answer nothing.
					fmt.Fprintf(stderr, "slow_report: cancelled at step %d of %d\n", step, in.Steps)
					return nil, ctx.Err()
				case <-t.C:
				}
				t.Reset(delay)
				if err := req.Progress(float64(step), float64(in.Steps), fmt.Sprintf("step %d of %d", step, in.Steps)); err != nil {
					return nil, err
				}
			}
			return mcp.TextResult(fmt.Sprintf("report finished after %d steps", in.Steps)), nil
		})

	s.AddTool(mcp.Tool{Name: "chatty", Description: "Looks things up, and leaves a debug print to stdout behind."},
		func(context.Context, *server.ToolRequest) (*mcp.ToolResult, error) {
			// The classic mistake of a stdio server: a print to stdout. With the
			// stdout guard it lands on stderr; without it, it corrupts
			// the protocol stream and the client must cope.
			fmt.Println("DEBUG: looking things up...")
			return mcp.TextResult("looked it up"), nil
		})

	if !opts.OmitCrash {
		s.AddTool(mcp.Tool{Name: "crash", Description: "Exits the server with status 3 in the middle of the call."},
			func(context.Context, *server.ToolRequest) (*mcp.ToolResult, error) {
				fmt.Fprintln(stderr, "crash: exiting with status 3 in the middle of a call")
				exit(3)
				return nil, nil
			})
	}
	addDiagnostics(s)
	if opts.Fixtures == "conformance" {
		fixtures.Conformance(s)
	}
	return s
}

var catalogue = []string{
	"Go concurrency patterns",
	"JSON-RPC 2.0 specification",
	"Model Context Protocol: stdio transport",
	"Agent Client Protocol overview",
	"Streamable HTTP and server-sent events",
}
