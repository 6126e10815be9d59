// Package acpdemo is `agentwire serve acp`: an example ACP agent, and the
// agent the client runtime's tests drive. Its prompts:
//
//	slow N          N agent_message_chunk updates 50 ms apart
//	permission      asks session/request_permission, then reports the choice
//	plan            a plan of 3 entries, then the same plan updated
//	tools           a tool_call (pending), then in_progress, then completed with a diff
//	thought         an agent_thought_chunk, then a message chunk
//	read PATH       fs/read_text_file, the content echoed back
//	write PATH TEXT fs/write_text_file
//	run CMD ARGS... terminal/create, a tool_call showing the terminal,
//	                wait_for_exit, output, release; the output and exit status echoed
//	flood N         N chunks, as fast as the connection takes them
//	updates N       N chunks "u1".."uN" (the benchmark's turn)
//	echo-blocks     the types of the prompt's blocks ("blocks: text,image")
//	mcp NAME TOOL {json}  a tool of an MCP server the client offers over ACP
//
// Anything else is echoed back as one chunk. A failed client call is
// reported as a chunk "error: ...", not as a failed turn. Modes: ask and
// code; config options: model (select) and verbose (boolean: the echo is
// preceded by a thought chunk). Sessions it made can be loaded again
// (session/load replays a two-message history) or resumed.
package acpdemo

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/agentwire/agentwire/acp"
	"github.com/agentwire/agentwire/jsonrpc"
)

// DemoTokenMethod is the demo agent's one authentication method.
const DemoTokenMethod = "demo-token"

// maxCount bounds the N of slow, flood and updates.
const maxCount = 10_000_000

// maxRemembered bounds the sessions the agent remembers for session/load;
// later ones still work but cannot be loaded.
const maxRemembered = 4096

// New returns the example agent.
func New() *acp.Agent {
	made := &sessions{ids: map[string]bool{}}
	return &acp.Agent{
		Info: acp.Implementation{Name: "agentwire-acp-example", Version: "1.0.0"},
		Capabilities: map[string]any{
			"promptCapabilities": map[string]any{"image": true, "audio": false, "embeddedContext": true},
			"mcpCapabilities":    map[string]any{"http": false, "sse": false},
		},
		AuthMethods: []acp.AuthMethod{{ID: DemoTokenMethod, Name: "Demo token"}},
		MCPOverACP:  true,
		Modes: []acp.SessionMode{
			{ID: "ask", Name: "Ask", Description: "Answer questions"},
			{ID: "code", Name: "Code", Description: "Write code"},
		},
		ConfigOptions: []acp.ConfigOption{
			{ID: "model", Name: "Model", Category: "model", CurrentValue: "fast",
				Options: []acp.ConfigChoice{{Value: "fast", Name: "Fast"}, {Value: "smart", Name: "Smart"}}},
			{ID: "verbose", Name: "Verbose", Type: "boolean", CurrentValue: "false"},
		},
		NewSession: func(_ context.Context, s *acp.Session) error {
			made.add(s.ID)
			return nil
		},
		LoadSession: func(_ context.Context, s *acp.Session, replay func(any) error) (bool, error) {
			if !made.has(s.ID) {
				return false, nil
			}
			for _, m := range [][2]string{{acp.UpdateUserMessageChunk, "hello"}, {acp.UpdateAgentMessageChunk, "hello (from the history)"}} {
				if err := replay(struct {
					SessionUpdate string `json:"sessionUpdate"`
					acp.ContentChunk
				}{m[0], acp.ContentChunk{Content: acp.TextBlock(m[1])}}); err != nil {
					return false, err
				}
			}
			return true, nil
		},
		Prompt: prompt,
	}
}

// NewRequireAuth is New with RequireAuth: sessions and prompts get
// "Authentication required" until authenticate with "demo-token".
func NewRequireAuth() *acp.Agent {
	a := New()
	a.RequireAuth = true
	a.Authenticate = func(_ context.Context, methodID string) error {
		if methodID != DemoTokenMethod {
			return jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "invalid params: unknown auth method %q", methodID)
		}
		return nil
	}
	return a
}

// sessions are the ids of the sessions the agent made, for session/load.
type sessions struct {
	mu  sync.Mutex
	ids map[string]bool
}

func (s *sessions) add(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.ids) < maxRemembered {
		s.ids[id] = true
	}
}

func (s *sessions) has(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ids[id]
}

func prompt(ctx context.Context, t *acp.Turn) (acp.StopReason, error) {
	var text strings.Builder
	for _, b := range t.Prompt {
		if b.Type == "text" {
			text.WriteString(b.Text)
		}
	}
	s := strings.TrimSpace(text.String())
	cmd, rest, _ := strings.Cut(s, " ")
	rest = strings.TrimSpace(rest)
	switch cmd {
	case "slow":
		n, err := count(cmd, rest)
		if err != nil {
			return "", err
		}
		return slow(ctx, t, n)
	case "flood", "updates":
		n, err := count(cmd, rest)
		if err != nil {
			return "", err
		}
		for i := 1; i <= n; i++ {
			if ctx.Err() != nil {
				return acp.Cancelled, nil
			}
			chunk := "u" + strconv.Itoa(i)
			if cmd == "flood" {
				chunk = "flood " + strconv.Itoa(i) + "\n"
			}
			if err := t.MessageChunk(chunk); err != nil {
				return "", err
			}
		}
		return acp.EndTurn, nil
	case "permission":
		if rest == "" {
			return permission(ctx, t)
		}
	case "plan":
		return plan(t)
	case "tools":
		return tools(t)
	case "thought":
		if err := t.ThoughtChunk("thinking about " + strconv.Quote(rest)); err != nil {
			return "", err
		}
		return acp.EndTurn, t.MessageChunk("thought about it")
	case "read":
		if rest == "" {
			return acp.EndTurn, t.MessageChunk("error: read wants a path")
		}
		content, err := t.ReadTextFile(ctx, rest, 0, 0)
		if err != nil {
			return acp.EndTurn, t.MessageChunk("error: " + err.Error())
		}
		return acp.EndTurn, t.MessageChunk(content)
	case "write":
		path, content, ok := strings.Cut(rest, " ")
		if !ok || path == "" {
			return acp.EndTurn, t.MessageChunk("error: write wants a path and a text")
		}
		if err := t.WriteTextFile(ctx, path, content); err != nil {
			return acp.EndTurn, t.MessageChunk("error: " + err.Error())
		}
		return acp.EndTurn, t.MessageChunk(fmt.Sprintf("wrote %d bytes to %s", len(content), path))
	case "run":
		return run(ctx, t, strings.Fields(rest))
	case "echo-blocks":
		types := make([]string, len(t.Prompt))
		for i, b := range t.Prompt {
			types[i] = b.Type
		}
		return acp.EndTurn, t.MessageChunk("blocks: " + strings.Join(types, ","))
	case "mcp":
		return mcpPrompt(ctx, t, rest)
	}
	if t.Session.Config("verbose") == "true" {
		if err := t.ThoughtChunk(fmt.Sprintf("echoing %d characters", len(s))); err != nil {
			return "", err
		}
	}
	return acp.EndTurn, t.MessageChunk(s)
}

func count(cmd, n string) (int, error) {
	v, err := strconv.Atoi(n)
	if err != nil || v < 0 || v > maxCount {
		return 0, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "invalid params: %s wants a number of chunks from 0 to %d, got %q", cmd, maxCount, n)
	}
	return v, nil
}

func slow(ctx context.Context, t *acp.Turn, steps int) (acp.StopReason, error) {
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for i := 1; i <= steps; i++ {
		select {
		case <-ctx.Done():
			return acp.Cancelled, ctx.Err()
		case <-tick.C:
		}
		if err := t.MessageChunk(fmt.Sprintf("chunk %d of %d (mode %s)\n", i, steps, t.Session.Mode())); err != nil {
			return "", err
		}
	}
	return acp.EndTurn, nil
}

func permission(ctx context.Context, t *acp.Turn) (acp.StopReason, error) {
	choice, err := t.RequestPermission(ctx,
		acp.ToolCall{ToolCallID: "call-1", Title: "Write a file", Kind: "edit", Status: "pending"},
		[]acp.PermissionOption{
			{OptionID: "allow", Name: "Allow once", Kind: "allow_once"},
			{OptionID: "reject", Name: "Reject", Kind: "reject_once"},
		})
	if err != nil {
		return "", err
	}
	if choice == "" {
		choice = "cancelled"
	}
	return acp.EndTurn, t.MessageChunk("permission: " + choice)
}

func plan(t *acp.Turn) (acp.StopReason, error) {
	entries := []acp.PlanEntry{
		{Content: "Read the code", Priority: "high", Status: "pending"},
		{Content: "Change it", Priority: "medium", Status: "pending"},
		{Content: "Run the tests", Priority: "low", Status: "pending"},
	}
	if err := t.Plan(acp.Plan{Entries: entries}); err != nil {
		return "", err
	}
	entries[0].Status, entries[1].Status = "completed", "in_progress"
	if err := t.Plan(acp.Plan{Entries: entries}); err != nil {
		return "", err
	}
	return acp.EndTurn, t.MessageChunk("planned")
}

func tools(t *acp.Turn) (acp.StopReason, error) {
	path := strings.TrimSuffix(t.Session.Cwd, "/") + "/hello.txt"
	old := "hello"
	steps := []func() error{
		func() error {
			return t.ToolCall(acp.ToolCall{ToolCallID: "tool-1", Title: "Edit hello.txt", Kind: "edit", Status: "pending",
				Locations: []acp.ToolCallLocation{{Path: path}}})
		},
		func() error { return t.UpdateToolCall(acp.ToolCall{ToolCallID: "tool-1", Status: "in_progress"}) },
		func() error {
			return t.UpdateToolCall(acp.ToolCall{ToolCallID: "tool-1", Status: "completed",
				Content: []acp.ToolCallContent{{Type: "diff", Path: path, OldText: &old, NewText: "hello, world"}}})
		},
		func() error { return t.MessageChunk("edited hello.txt") },
	}
	for _, step := range steps {
		if err := step(); err != nil {
			return "", err
		}
	}
	return acp.EndTurn, nil
}

func run(ctx context.Context, t *acp.Turn, argv []string) (acp.StopReason, error) {
	if len(argv) == 0 {
		return acp.EndTurn, t.MessageChunk("error: run wants a command")
	}
	term, err := t.CreateTerminal(ctx, acp.TerminalRequest{Command: argv[0], Args: argv[1:], Cwd: t.Session.Cwd})
	if err != nil {
		return acp.EndTurn, t.MessageChunk("error: " + err.Error())
	}
	// Released whatever happens, on a context of its own: a cancelled turn
	// must not leave the client's process behind.
	defer func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = term.Release(rctx)
	}()
	if err := t.ToolCall(acp.ToolCall{ToolCallID: "run-1", Title: "$ " + strings.Join(argv, " "), Kind: "execute",
		Status: "in_progress", Content: []acp.ToolCallContent{{Type: "terminal", TerminalID: term.ID()}}}); err != nil {
		return "", err
	}
	exit, err := term.WaitForExit(ctx)
	if err == nil {
		var out acp.TerminalOutput
		if out, err = term.Output(ctx); err == nil {
			status, result := "completed", "exit code "
			switch {
			case exit.ExitCode != nil:
				result += strconv.Itoa(*exit.ExitCode)
				if *exit.ExitCode != 0 {
					status = "failed"
				}
			case exit.Signal != nil:
				status, result = "failed", "killed by "+*exit.Signal
			default:
				result = "ended"
			}
			if err := t.UpdateToolCall(acp.ToolCall{ToolCallID: "run-1", Status: status}); err != nil {
				return "", err
			}
			return acp.EndTurn, t.MessageChunk(out.Output + result)
		}
	}
	if ctx.Err() != nil {
		return acp.Cancelled, nil
	}
	if uerr := t.UpdateToolCall(acp.ToolCall{ToolCallID: "run-1", Status: "failed"}); uerr != nil {
		return "", uerr
	}
	return acp.EndTurn, t.MessageChunk("error: " + err.Error())
}
