package testserver

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/agentwire/agentwire/internal/seedserver"
	"github.com/agentwire/agentwire/mcp"
	"github.com/agentwire/agentwire/mcp/server"
	"github.com/agentwire/agentwire/stdio"
)

// The modes `agentwire check` is tested against:
//
//	mcp-dies-on-garbage  the example MCP server, which exits 2 on a line that
//	                     is not JSON (as the go-sdk server does)
//	mcp-hangs-on-garbage the same, but it stops reading instead
//	mcp-slow-start       the example MCP server, after 800 ms of start-up
//	mcp-dies-soon        the example MCP server, which exits 1 by itself 300 ms
//	                     after it starts ("fatal: lost the database connection")
//	exit-at-start        writes "Error: MCP_API_KEY is not set" to stderr and exits 1
//	hang-at-start        never reads stdin nor writes anything
//	mcp-tools            an MCP server whose tools record being called, one per
//	                     line, in the "calls" file of AGENTWIRE_TEST_STATE:
//	                     delete_everything (unannotated), write_file (destructive),
//	                     append_note (readOnlyHint false, destructiveHint false),
//	                     lookup (read-only; arguments only a schema-aware filler
//	                     gets right), slow_lookup (read-only; runs until
//	                     cancelled) and ask_user (read-only; asks for input)

// CallsFile is where mcp-tools records its calls, in the state directory.
const CallsFile = "calls"

func serveCheckMode(mode string) (int, bool) {
	switch mode {
	case "mcp-dies-on-garbage", "mcp-hangs-on-garbage":
		pr, pw := io.Pipe()
		go func() {
			br := bufio.NewReaderSize(os.Stdin, 1<<16)
			for {
				line, err := br.ReadBytes('\n')
				if len(line) > 0 && !json.Valid(line) {
					if mode == "mcp-dies-on-garbage" {
						fmt.Fprintln(os.Stderr, "panic: invalid character 't' looking for beginning of value")
						os.Exit(2)
					}
					select {} // stops reading: the server answers nothing more
				}
				if len(line) > 0 {
					pw.Write(line)
				}
				if err != nil {
					pw.Close()
					return
				}
			}
		}()
		conn, err := seedserver.New(seedserver.Options{}).ServeStdio(&stdio.Config{Stdin: pr}, nil)
		if err != nil {
			return 1, true
		}
		conn.Wait()
		return 0, true
	case "mcp-slow-start":
		time.Sleep(800 * time.Millisecond)
		conn, err := seedserver.New(seedserver.Options{}).ServeStdio(nil, nil)
		if err != nil {
			return 1, true
		}
		conn.Wait()
		return 0, true
	case "mcp-dies-soon":
		time.AfterFunc(300*time.Millisecond, func() {
			fmt.Fprintln(os.Stderr, "fatal: lost the database connection")
			os.Exit(1)
		})
		conn, err := seedserver.New(seedserver.Options{}).ServeStdio(nil, nil)
		if err != nil {
			return 1, true
		}
		conn.Wait()
		return 0, true
	case "exit-at-start":
		fmt.Fprintln(os.Stderr, "Error: MCP_API_KEY is not set")
		return 1, true
	case "hang-at-start":
		time.Sleep(time.Hour)
		return 0, true
	case "mcp-tools":
		conn, err := toolsServer().ServeStdio(nil, nil)
		if err != nil {
			return 1, true
		}
		conn.Wait()
		return 0, true
	}
	return 0, false
}

func record(line string) {
	dir := os.Getenv(StateEnv)
	if dir == "" {
		return
	}
	f, err := os.OpenFile(filepath.Join(dir, CallsFile), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err == nil {
		fmt.Fprintln(f, line)
		f.Close()
	}
}

func toolsServer() *server.Server {
	s := server.New(mcp.Implementation{Name: "testserver-tools", Version: "1"}, nil)
	destructive := func(name string) server.ToolHandler {
		return func(context.Context, *server.ToolRequest) (*mcp.ToolResult, error) {
			record(name)
			return mcp.TextResult(name + " done"), nil
		}
	}
	s.AddTool(mcp.Tool{Name: "delete_everything", Description: "Deletes every entity."}, destructive("delete_everything"))
	s.AddTool(mcp.Tool{Name: "write_file", Description: "Writes a file.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: mcp.Hint(false), DestructiveHint: mcp.Hint(true)}}, destructive("write_file"))
	s.AddTool(mcp.Tool{Name: "append_note", Description: "Appends a note.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: mcp.Hint(false), DestructiveHint: mcp.Hint(false)}}, destructive("append_note"))
	ro := &mcp.ToolAnnotations{ReadOnlyHint: mcp.Hint(true)}
	s.AddTool(mcp.Tool{Name: "lookup", Description: "Looks entries up.", Annotations: ro, InputSchema: json.RawMessage(`{
		"type": "object",
		"required": ["kind", "tags", "limit", "filter"],
		"properties": {
			"kind": {"type": ["string", "null"], "enum": ["a", "b"]},
			"tags": {"type": "array", "items": {"type": "string"}, "minItems": 1},
			"limit": {"anyOf": [{"type": "integer", "minimum": 3}, {"type": "string"}]},
			"filter": {"type": "object", "required": ["field"], "properties": {"field": {"type": "string", "minLength": 12}}}
		}}`)},
		func(_ context.Context, req *server.ToolRequest) (*mcp.ToolResult, error) {
			var in struct {
				Kind   string   `json:"kind"`
				Tags   []string `json:"tags"`
				Limit  int      `json:"limit"`
				Filter struct {
					Field string `json:"field"`
				} `json:"filter"`
			}
			if json.Unmarshal(req.Arguments, &in) != nil || (in.Kind != "a" && in.Kind != "b") || len(in.Tags) < 1 ||
				in.Limit < 3 || len(in.Filter.Field) < 12 {
				record("lookup bad " + string(req.Arguments))
				return mcp.ErrorResult("arguments do not match the schema"), nil
			}
			record("lookup ok")
			return mcp.TextResult("found nothing"), nil
		})
	s.AddTool(mcp.Tool{Name: "slow_lookup", Description: "Looks up until cancelled.", Annotations: ro},
		func(ctx context.Context, _ *server.ToolRequest) (*mcp.ToolResult, error) {
			<-ctx.Done()
			record("slow_lookup cancelled")
			return nil, ctx.Err()
		})
	s.AddTool(mcp.Tool{Name: "ask_user", Description: "Asks the user first.", Annotations: ro},
		func(ctx context.Context, req *server.ToolRequest) (*mcp.ToolResult, error) {
			r, err := req.Elicit(ctx, "confirm", "Look it up?", map[string]any{"type": "object", "properties": map[string]any{}})
			if err != nil {
				return nil, err
			}
			return mcp.TextResult("answered " + r.Action), nil
		})
	return s
}
