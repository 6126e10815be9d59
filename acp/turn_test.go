package acp_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/agentwire/agentwire/acp"
	"github.com/agentwire/agentwire/internal/wiretest"
)

// runAgent serves a with raw wire lines, like run with the test agent.
func runAgent(t *testing.T, a *acp.Agent, f func(w *wiretest.Wire)) {
	t.Helper()
	if a.Info.Name == "" {
		a.Info = acp.Implementation{Name: "turn-agent", Version: "1"}
	}
	h, o := acp.ConnOptions(a, nil, nil)
	wiretest.Run(t, h, o, f)
}

// initWith is an initialize line declaring caps as clientCapabilities.
func initWith(caps string) string {
	return `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":` + caps + `}}`
}

const allCaps = `{"fs":{"readTextFile":true,"writeTextFile":true},"terminal":true}`

// clientAgent runs, for a prompt, the client call its text names and
// reports the outcome as one chunk.
func clientAgent() *acp.Agent {
	return &acp.Agent{Prompt: func(ctx context.Context, t *acp.Turn) (acp.StopReason, error) {
		report := func(v any, err error) (acp.StopReason, error) {
			if err != nil {
				return acp.EndTurn, t.MessageChunk(fmt.Sprintf("error: %v (capability: %v)", err, errors.Is(err, acp.ErrClientCapability)))
			}
			b, _ := json.Marshal(v)
			return acp.EndTurn, t.MessageChunk(string(b))
		}
		switch t.Prompt[0].Text {
		case "caps":
			return report(map[string]any{"caps": t.ClientCapabilities(), "session": t.Session.ClientCapabilities(),
				"raw": t.ClientCapabilitiesRaw()}, nil)
		case "read":
			return report(t.ReadTextFile(ctx, "/w/a.txt", 2, 3))
		case "read-all":
			return report(t.ReadTextFile(ctx, "/w/a.txt", 0, 0))
		case "write":
			return report(nil, t.WriteTextFile(ctx, "/w/b.txt", "new\ntext"))
		case "terminal":
			limit := 100
			term, err := t.CreateTerminal(ctx, acp.TerminalRequest{Command: "ls", Args: []string{"-l"},
				Env: []acp.EnvVariable{{Name: "A", Value: "1"}}, Cwd: "/w", OutputByteLimit: &limit})
			if err != nil {
				return report(nil, err)
			}
			out, err := term.Output(ctx)
			if err != nil {
				return report(nil, err)
			}
			exit, err := term.WaitForExit(ctx)
			if err != nil {
				return report(nil, err)
			}
			if err := term.Kill(ctx); err != nil {
				return report(nil, err)
			}
			if err := term.Release(ctx); err != nil {
				return report(nil, err)
			}
			return report(map[string]any{"id": term.ID(), "output": out, "exit": exit}, nil)
		}
		return acp.EndTurn, nil
	}}
}

// Turn.ClientCapabilities is what initialize declared; members of another
// shape fall back to their defaults (the schema's default-on-error) and
// the raw object is kept whole.
func TestTurnSeesClientCapabilities(t *testing.T) {
	runAgent(t, clientAgent(), func(w *wiretest.Wire) {
		w.Exchange(initWith(`{"fs":{"readTextFile":true,"writeTextFile":"yes"},"terminal":true,"auth":{"terminal":true},"elicitation":{"form":{}}}`), newSession(1))
		got := w.Exchange(prompt(1, "sess-1", "caps"))
		want := `{"caps":{"fs":{"readTextFile":true,"writeTextFile":false},"terminal":true,"auth":{"terminal":true}},` +
			`"raw":{"fs":{"readTextFile":true,"writeTextFile":"yes"},"terminal":true,"auth":{"terminal":true},"elicitation":{"form":{}}},` +
			`"session":{"fs":{"readTextFile":true,"writeTextFile":false},"terminal":true,"auth":{"terminal":true}}}`
		if len(got) != 2 || !strings.Contains(got[1], mustQuote(want)) {
			t.Fatalf("got %q\nwant the chunk %s", got, want)
		}
	})
}

func mustQuote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// Every client call is refused before anything is sent when the client
// did not declare it, with ErrClientCapability naming the method.
func TestClientCallsNeedDeclaredCapabilities(t *testing.T) {
	runAgent(t, clientAgent(), func(w *wiretest.Wire) {
		w.Exchange(initWith(`{}`), newSession(1))
		for i, c := range []struct{ prompt, method string }{
			{"read", "fs/read_text_file"}, {"write", "fs/write_text_file"}, {"terminal", "terminal/create"},
		} {
			got := w.Exchange(prompt(i+1, "sess-1", c.prompt))
			want := "error: acp: " + c.method + ": the client did not declare this capability (capability: true)"
			if len(got) != 2 || !strings.Contains(got[1], mustQuote(want)) {
				t.Fatalf("%s: got %q", c.prompt, got)
			}
		}
	})
	// Without clientCapabilities at all: the same.
	runAgent(t, clientAgent(), func(w *wiretest.Wire) {
		w.Exchange(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1}}`, newSession(1))
		got := w.Exchange(prompt(1, "sess-1", "read"))
		if len(got) != 2 || !strings.Contains(got[1], "did not declare") {
			t.Fatalf("got %q", got)
		}
	})
}

// fs/read_text_file and fs/write_text_file go out as the schema has them
// (line and limit only when set) and their results come back to the turn.
func TestReadAndWriteTextFile(t *testing.T) {
	runAgent(t, clientAgent(), func(w *wiretest.Wire) {
		w.Exchange(initWith(allCaps), newSession(1))
		w.Send(prompt(1, "sess-1", "read"))
		got := w.Take()
		if len(got) != 1 || got[0] != `{"jsonrpc":"2.0","id":1,"method":"fs/read_text_file","params":{"sessionId":"sess-1","path":"/w/a.txt","line":2,"limit":3}}` {
			t.Fatalf("request: %q", got)
		}
		w.Send(`{"jsonrpc":"2.0","id":1,"result":{"content":"two\nthree"}}`)
		got = w.Take()
		if len(got) != 2 || !strings.Contains(got[0], `"text":"\"two\\nthree\""`) {
			t.Fatalf("after the result: %q", got)
		}

		w.Send(prompt(2, "sess-1", "read-all"))
		got = w.Take()
		if len(got) != 1 || got[0] != `{"jsonrpc":"2.0","id":2,"method":"fs/read_text_file","params":{"sessionId":"sess-1","path":"/w/a.txt"}}` {
			t.Fatalf("request without line and limit: %q", got)
		}
		// A client error comes back wrapped, with the method named.
		w.Send(`{"jsonrpc":"2.0","id":2,"error":{"code":-32002,"message":"no such file"}}`)
		got = w.Take()
		if len(got) != 2 || !strings.Contains(got[0], "error: acp: fs/read_text_file: ") || !strings.Contains(got[0], "no such file") {
			t.Fatalf("client error: %q", got)
		}

		w.Send(prompt(3, "sess-1", "write"))
		got = w.Take()
		if len(got) != 1 || got[0] != `{"jsonrpc":"2.0","id":3,"method":"fs/write_text_file","params":{"sessionId":"sess-1","path":"/w/b.txt","content":"new\ntext"}}` {
			t.Fatalf("write request: %q", got)
		}
		w.Send(`{"jsonrpc":"2.0","id":3,"result":{}}`)
		if got = w.Take(); len(got) != 2 || !strings.Contains(got[0], `"text":"null"`) {
			t.Fatalf("after the write: %q", got)
		}

		// A result without content is an error, not an empty file.
		w.Send(prompt(4, "sess-1", "read-all"))
		w.Take()
		w.Send(`{"jsonrpc":"2.0","id":4,"result":{}}`)
		if got = w.Take(); len(got) != 2 || !strings.Contains(got[0], "the result has no content") {
			t.Fatalf("result without content: %q", got)
		}
	})
}

// A terminal's whole life on the wire: create (args and env always
// arrays), output, wait_for_exit, kill, release, each with sessionId and
// terminalId.
func TestTerminalLifecycle(t *testing.T) {
	runAgent(t, clientAgent(), func(w *wiretest.Wire) {
		w.Exchange(initWith(allCaps), newSession(1))
		w.Send(prompt(1, "sess-1", "terminal"))
		steps := []struct{ request, result string }{
			{`{"jsonrpc":"2.0","id":1,"method":"terminal/create","params":{"sessionId":"sess-1","command":"ls","args":["-l"],"env":[{"name":"A","value":"1"}],"cwd":"/w","outputByteLimit":100}}`,
				`{"terminalId":"term-7"}`},
			{`{"jsonrpc":"2.0","id":2,"method":"terminal/output","params":{"sessionId":"sess-1","terminalId":"term-7"}}`,
				`{"output":"a\n","truncated":true,"exitStatus":null}`},
			{`{"jsonrpc":"2.0","id":3,"method":"terminal/wait_for_exit","params":{"sessionId":"sess-1","terminalId":"term-7"}}`,
				`{"exitCode":null,"signal":"SIGKILL"}`},
			{`{"jsonrpc":"2.0","id":4,"method":"terminal/kill","params":{"sessionId":"sess-1","terminalId":"term-7"}}`, `{}`},
			{`{"jsonrpc":"2.0","id":5,"method":"terminal/release","params":{"sessionId":"sess-1","terminalId":"term-7"}}`, `{}`},
		}
		for i, s := range steps {
			got := w.Take()
			if len(got) != 1 || got[0] != s.request {
				t.Fatalf("step %d: got %q, want %s", i, got, s.request)
			}
			w.Send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"result":%s}`, i+1, s.result))
		}
		got := w.Take()
		want := `{"exit":{"exitCode":null,"signal":"SIGKILL"},"id":"term-7","output":{"output":"a\n","truncated":true}}`
		if len(got) != 2 || !strings.Contains(got[0], mustQuote(want)) {
			t.Fatalf("got %q, want the chunk %s", got, want)
		}
	})
}

// A terminal/create result without a terminalId is an error.
func TestCreateTerminalNeedsTerminalID(t *testing.T) {
	runAgent(t, clientAgent(), func(w *wiretest.Wire) {
		w.Exchange(initWith(allCaps), newSession(1))
		w.Send(prompt(1, "sess-1", "terminal"))
		w.Take()
		w.Send(`{"jsonrpc":"2.0","id":1,"result":{}}`)
		if got := w.Take(); len(got) != 2 || !strings.Contains(got[0], "terminal/create: the result has no terminalId") {
			t.Fatalf("got %q", got)
		}
	})
}

// The update encoders write the schema's session/update shapes.
func TestUpdateEncoders(t *testing.T) {
	old := "a"
	a := &acp.Agent{Prompt: func(ctx context.Context, t *acp.Turn) (acp.StopReason, error) {
		for _, err := range []error{
			t.ThoughtChunk("hmm \"quoted\""),
			t.ToolCall(acp.ToolCall{ToolCallID: "c1", Title: "Edit", Kind: "edit", Status: "pending",
				Locations: []acp.ToolCallLocation{{Path: "/w/x"}}}),
			t.UpdateToolCall(acp.ToolCall{ToolCallID: "c1", Status: "completed",
				Content: []acp.ToolCallContent{{Type: "diff", Path: "/w/x", OldText: &old, NewText: "b"}}}),
			t.Plan(acp.Plan{Entries: []acp.PlanEntry{{Content: "step", Priority: "high", Status: "pending"}}}),
			t.Plan(acp.Plan{}),
			t.Update(map[string]any{"sessionUpdate": "current_mode_update", "currentModeId": "code"}),
		} {
			if err != nil {
				return "", err
			}
		}
		// Refused locally: what the schema requires is missing.
		if t.ToolCall(acp.ToolCall{ToolCallID: "c2"}) == nil || t.UpdateToolCall(acp.ToolCall{}) == nil {
			return "", errors.New("an incomplete tool call was sent")
		}
		return acp.EndTurn, nil
	}}
	runAgent(t, a, func(w *wiretest.Wire) {
		w.Exchange(initLine, newSession(1))
		got := w.Exchange(prompt(1, "sess-1", "go"))
		const pre = `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"sess-1","update":`
		want := []string{
			pre + `{"sessionUpdate":"agent_thought_chunk","content":{"type":"text","text":"hmm \"quoted\""}}}}`,
			pre + `{"sessionUpdate":"tool_call","toolCallId":"c1","title":"Edit","kind":"edit","status":"pending","locations":[{"path":"/w/x"}]}}}`,
			pre + `{"sessionUpdate":"tool_call_update","toolCallId":"c1","status":"completed","content":[{"type":"diff","path":"/w/x","oldText":"a","newText":"b"}]}}}`,
			pre + `{"sessionUpdate":"plan","entries":[{"content":"step","priority":"high","status":"pending"}]}}}`,
			pre + `{"sessionUpdate":"plan","entries":[]}}}`,
			pre + `{"currentModeId":"code","sessionUpdate":"current_mode_update"}}}`,
			`{"jsonrpc":"2.0","id":1,"result":{"stopReason":"end_turn"}}`,
		}
		sort.Strings(want) // Exchange sorts what it got
		if strings.Join(want, "\n") != strings.Join(got, "\n") {
			t.Fatalf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	})
}

// Chunks of a turn reuse one encoding buffer: a short chunk after a long
// one, and many in a row, reach the wire exactly as given (on the stream
// and on the message seam, where the writer sees params during its call
// only).
func TestChunksReuseNoBytesAfterSending(t *testing.T) {
	texts := []string{strings.Repeat("long ", 400), "short", strings.Repeat("é", 70000), "x", ""}
	a := &acp.Agent{Prompt: func(ctx context.Context, t *acp.Turn) (acp.StopReason, error) {
		for _, s := range texts {
			if err := t.MessageChunk(s); err != nil {
				return "", err
			}
		}
		return acp.EndTurn, nil
	}}
	runAgent(t, a, func(w *wiretest.Wire) {
		w.Exchange(initLine, newSession(1))
		w.Send(prompt(1, "sess-1", "go"))
		got := w.Take()
		if len(got) != len(texts)+1 {
			t.Fatalf("%d lines", len(got))
		}
		for i, s := range texts {
			var m struct {
				Params struct {
					Update struct {
						Content acp.ContentBlock `json:"content"`
					} `json:"update"`
				} `json:"params"`
			}
			if err := json.Unmarshal([]byte(got[i]), &m); err != nil || m.Params.Update.Content.Text != s {
				t.Fatalf("chunk %d: %.80q (%v)", i, got[i], err)
			}
		}
	})
}
