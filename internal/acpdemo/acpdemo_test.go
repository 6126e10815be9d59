package acpdemo

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/agentwire/agentwire/acp"
	"github.com/agentwire/agentwire/internal/wiretest"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const initAll = `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{"fs":{"readTextFile":true,"writeTextFile":true},"terminal":true}}}`

const newSession = `{"jsonrpc":"2.0","id":"n","method":"session/new","params":{"cwd":"/w","mcpServers":[]}}`

func promptLine(id int, text string) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"session/prompt","params":{"sessionId":"sess-1","prompt":[{"type":"text","text":%q}]}}`, id, text)
}

// serve runs a (New when nil) with a session sess-1 made.
func serve(t *testing.T, a *acp.Agent, f func(w *wiretest.Wire)) {
	t.Helper()
	if a == nil {
		a = New()
	}
	h, o := acp.ConnOptions(a, nil, nil)
	wiretest.Run(t, h, o, func(w *wiretest.Wire) {
		w.Send(initAll, newSession)
		w.Take()
		f(w)
	})
}

// updates returns the update objects of the session/update lines, and the
// last line (the response).
func updates(t *testing.T, lines []string) (ups []map[string]any, last string) {
	t.Helper()
	if len(lines) == 0 {
		t.Fatal("no lines")
	}
	for _, l := range lines[:len(lines)-1] {
		var m struct {
			Method string `json:"method"`
			Params struct {
				Update map[string]any `json:"update"`
			} `json:"params"`
		}
		if err := json.Unmarshal([]byte(l), &m); err != nil || m.Method != "session/update" {
			t.Fatalf("not an update: %q", l)
		}
		ups = append(ups, m.Params.Update)
	}
	return ups, lines[len(lines)-1]
}

func text(u map[string]any) string {
	c, _ := u["content"].(map[string]any)
	s, _ := c["text"].(string)
	return s
}

const endTurn = `{"jsonrpc":"2.0","id":1,"result":{"stopReason":"end_turn"}}`

func TestInitializeOffersAuthAndPromptCapabilities(t *testing.T) {
	h, o := acp.ConnOptions(New(), nil, nil)
	wiretest.Run(t, h, o, func(w *wiretest.Wire) {
		w.Send(initAll)
		got := w.Take()
		for _, want := range []string{`"authMethods":[{"id":"demo-token","name":"Demo token"}]`, `"loadSession":true`,
			`"promptCapabilities":{"audio":false,"embeddedContext":true,"image":true}`, `"mcpCapabilities":{"acp":true,"http":false,"sse":false}`,
			`"sessionCapabilities":{"close":{},"resume":{}}`} {
			if len(got) != 1 || !strings.Contains(got[0], want) {
				t.Fatalf("got %q, want %s in it", got, want)
			}
		}
	})
}

func TestPlanIsSentThenUpdated(t *testing.T) {
	serve(t, nil, func(w *wiretest.Wire) {
		w.Send(promptLine(1, "plan"))
		ups, last := updates(t, w.Take())
		if len(ups) != 3 || last != endTurn || ups[0]["sessionUpdate"] != "plan" || ups[1]["sessionUpdate"] != "plan" {
			t.Fatalf("got %v %s", ups, last)
		}
		first, second := ups[0]["entries"].([]any), ups[1]["entries"].([]any)
		if len(first) != 3 || len(second) != 3 || first[0].(map[string]any)["status"] != "pending" ||
			second[0].(map[string]any)["status"] != "completed" || second[1].(map[string]any)["status"] != "in_progress" {
			t.Fatalf("entries %v then %v", first, second)
		}
	})
}

func TestToolsGoPendingInProgressCompletedWithADiff(t *testing.T) {
	serve(t, nil, func(w *wiretest.Wire) {
		w.Send(promptLine(1, "tools"))
		got := w.Take()
		const pre = `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"sess-1","update":`
		want := []string{
			pre + `{"sessionUpdate":"tool_call","toolCallId":"tool-1","title":"Edit hello.txt","kind":"edit","status":"pending","locations":[{"path":"/w/hello.txt"}]}}}`,
			pre + `{"sessionUpdate":"tool_call_update","toolCallId":"tool-1","status":"in_progress"}}}`,
			pre + `{"sessionUpdate":"tool_call_update","toolCallId":"tool-1","status":"completed","content":[{"type":"diff","path":"/w/hello.txt","oldText":"hello","newText":"hello, world"}]}}}`,
			pre + `{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"edited hello.txt"}}}}`,
			endTurn,
		}
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Fatalf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	})
}

func TestThoughtComesBeforeTheMessage(t *testing.T) {
	serve(t, nil, func(w *wiretest.Wire) {
		w.Send(promptLine(1, "thought"))
		ups, last := updates(t, w.Take())
		if len(ups) != 2 || last != endTurn || ups[0]["sessionUpdate"] != "agent_thought_chunk" || ups[1]["sessionUpdate"] != "agent_message_chunk" {
			t.Fatalf("got %v", ups)
		}
	})
}

func TestReadEchoesTheFileAndReportsErrors(t *testing.T) {
	serve(t, nil, func(w *wiretest.Wire) {
		w.Send(promptLine(1, "read /w/a.txt"))
		got := w.Take()
		if len(got) != 1 || got[0] != `{"jsonrpc":"2.0","id":1,"method":"fs/read_text_file","params":{"sessionId":"sess-1","path":"/w/a.txt"}}` {
			t.Fatalf("request: %q", got)
		}
		w.Send(`{"jsonrpc":"2.0","id":1,"result":{"content":"file text"}}`)
		ups, last := updates(t, w.Take())
		if len(ups) != 1 || text(ups[0]) != "file text" || last != endTurn {
			t.Fatalf("got %v %s", ups, last)
		}
		w.Send(promptLine(2, "read /etc/passwd"))
		w.Take()
		w.Send(`{"jsonrpc":"2.0","id":2,"error":{"code":-32602,"message":"outside the session's roots"}}`)
		ups, _ = updates(t, w.Take())
		if len(ups) != 1 || !strings.HasPrefix(text(ups[0]), "error: ") || !strings.Contains(text(ups[0]), "outside the session's roots") {
			t.Fatalf("error: %v", ups)
		}
	})
}

func TestWriteSendsTheText(t *testing.T) {
	serve(t, nil, func(w *wiretest.Wire) {
		w.Send(promptLine(1, "write /w/b.txt some new text"))
		got := w.Take()
		if len(got) != 1 || got[0] != `{"jsonrpc":"2.0","id":1,"method":"fs/write_text_file","params":{"sessionId":"sess-1","path":"/w/b.txt","content":"some new text"}}` {
			t.Fatalf("request: %q", got)
		}
		w.Send(`{"jsonrpc":"2.0","id":1,"result":{}}`)
		ups, _ := updates(t, w.Take())
		if len(ups) != 1 || text(ups[0]) != "wrote 13 bytes to /w/b.txt" {
			t.Fatalf("got %v", ups)
		}
	})
}

// run: create, a tool call showing the terminal, wait, output, the output
// and exit code as a chunk, then release.
func TestRunDrivesATerminal(t *testing.T) {
	serve(t, nil, func(w *wiretest.Wire) {
		w.Send(promptLine(1, "run echo hi"))
		expect := func(want string) {
			t.Helper()
			got := w.Take()
			if len(got) == 0 || got[len(got)-1] != want {
				t.Fatalf("got %q, want last %s", got, want)
			}
		}
		expect(`{"jsonrpc":"2.0","id":1,"method":"terminal/create","params":{"sessionId":"sess-1","command":"echo","args":["hi"],"env":[],"cwd":"/w"}}`)
		w.Send(`{"jsonrpc":"2.0","id":1,"result":{"terminalId":"t1"}}`)
		expect(`{"jsonrpc":"2.0","id":2,"method":"terminal/wait_for_exit","params":{"sessionId":"sess-1","terminalId":"t1"}}`)
		w.Send(`{"jsonrpc":"2.0","id":2,"result":{"exitCode":3,"signal":null}}`)
		expect(`{"jsonrpc":"2.0","id":3,"method":"terminal/output","params":{"sessionId":"sess-1","terminalId":"t1"}}`)
		w.Send(`{"jsonrpc":"2.0","id":3,"result":{"output":"hi\n","truncated":false}}`)
		got := w.Take()
		ups, last := updates(t, got)
		if last != `{"jsonrpc":"2.0","id":4,"method":"terminal/release","params":{"sessionId":"sess-1","terminalId":"t1"}}` ||
			len(ups) != 2 || ups[0]["status"] != "failed" || text(ups[1]) != "hi\nexit code 3" {
			t.Fatalf("got %q", got)
		}
		w.Send(`{"jsonrpc":"2.0","id":4,"result":{}}`)
		expect(endTurn)
	})
}

func TestRunWithoutTerminalsIsAnErrorChunk(t *testing.T) {
	h, o := acp.ConnOptions(New(), nil, nil)
	wiretest.Run(t, h, o, func(w *wiretest.Wire) {
		w.Send(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{}}}`, newSession)
		w.Take()
		w.Send(promptLine(1, "run ls"))
		ups, last := updates(t, w.Take())
		if len(ups) != 1 || text(ups[0]) != "error: acp: terminal/create: the client did not declare this capability" || last != endTurn {
			t.Fatalf("got %v %s", ups, last)
		}
	})
}

func TestFloodAndUpdatesStreamNChunks(t *testing.T) {
	serve(t, nil, func(w *wiretest.Wire) {
		w.Send(promptLine(1, "updates 3"))
		ups, last := updates(t, w.Take())
		if len(ups) != 3 || text(ups[0]) != "u1" || text(ups[2]) != "u3" || last != endTurn {
			t.Fatalf("updates: %v %s", ups, last)
		}
		w.Send(promptLine(2, "flood 1000"))
		ups, _ = updates(t, w.Take())
		if len(ups) != 1000 || text(ups[999]) != "flood 1000\n" {
			t.Fatalf("flood: %d updates", len(ups))
		}
		w.Send(promptLine(3, "flood lots"))
		if got := w.Take(); len(got) != 1 || wiretest.ErrCode(t, got[0]) != -32602 {
			t.Fatalf("bad count: %q", got)
		}
	})
}

func TestEchoBlocksListsBlockTypes(t *testing.T) {
	serve(t, nil, func(w *wiretest.Wire) {
		w.Send(`{"jsonrpc":"2.0","id":1,"method":"session/prompt","params":{"sessionId":"sess-1","prompt":[{"type":"text","text":"echo-blocks"},` +
			`{"type":"image","mimeType":"image/png","data":"AA=="},{"type":"resource_link","uri":"file:///a","name":"a"},{"type":"resource","resource":{"uri":"file:///b","text":"b"}}]}}`)
		ups, _ := updates(t, w.Take())
		if len(ups) != 1 || text(ups[0]) != "blocks: text,image,resource_link,resource" {
			t.Fatalf("got %v", ups)
		}
	})
}

func TestVerboseEchoThinksFirst(t *testing.T) {
	serve(t, nil, func(w *wiretest.Wire) {
		w.Send(`{"jsonrpc":"2.0","id":9,"method":"session/set_config_option","params":{"sessionId":"sess-1","configId":"verbose","type":"boolean","value":true}}`)
		if got := w.Take(); len(got) != 1 || !strings.Contains(got[0], `"id":"verbose","name":"Verbose","type":"boolean","currentValue":true`) {
			t.Fatalf("set: %q", got)
		}
		w.Send(promptLine(1, "hello"))
		ups, _ := updates(t, w.Take())
		if len(ups) != 2 || ups[0]["sessionUpdate"] != "agent_thought_chunk" || text(ups[1]) != "hello" {
			t.Fatalf("got %v", ups)
		}
	})
}

// session/load replays two messages, before its response, for a session
// the agent made; one it did not make is -32002. Resume does not replay.
func TestLoadReplaysSessionsItMade(t *testing.T) {
	a := New()
	serve(t, a, func(w *wiretest.Wire) {})
	h, o := acp.ConnOptions(a, nil, nil) // a second connection
	wiretest.Run(t, h, o, func(w *wiretest.Wire) {
		w.Send(initAll, `{"jsonrpc":"2.0","id":1,"method":"session/load","params":{"sessionId":"sess-1","cwd":"/w","mcpServers":[]}}`)
		got := w.Take()
		ups, last := updates(t, got[1:])
		if len(ups) != 2 || ups[0]["sessionUpdate"] != "user_message_chunk" || text(ups[0]) != "hello" ||
			ups[1]["sessionUpdate"] != "agent_message_chunk" || !strings.Contains(last, `"id":1,"result":{`) {
			t.Fatalf("got %q", got)
		}
		w.Send(`{"jsonrpc":"2.0","id":2,"method":"session/load","params":{"sessionId":"sess-99","cwd":"/w","mcpServers":[]}}`)
		if got := w.Take(); len(got) != 1 || wiretest.ErrCode(t, got[0]) != -32002 {
			t.Fatalf("not made here: %q", got)
		}
	})
	h, o = acp.ConnOptions(a, nil, nil) // a third
	wiretest.Run(t, h, o, func(w *wiretest.Wire) {
		w.Send(initAll, `{"jsonrpc":"2.0","id":1,"method":"session/resume","params":{"sessionId":"sess-1","cwd":"/w"}}`)
		if got := w.Take(); len(got) != 2 || !strings.Contains(got[1], `"id":1,"result":{`) {
			t.Fatalf("resume: %q", got)
		}
	})
}

// NewRequireAuth refuses sessions until authenticate with demo-token.
func TestRequireAuthAcceptsOnlyTheDemoToken(t *testing.T) {
	h, o := acp.ConnOptions(NewRequireAuth(), nil, nil)
	wiretest.Run(t, h, o, func(w *wiretest.Wire) {
		w.Send(initAll, newSession)
		got := w.Take()
		if len(got) != 2 || got[1] != `{"jsonrpc":"2.0","id":"n","error":{"code":-32000,"message":"Authentication required"}}` {
			t.Fatalf("before authenticate: %q", got)
		}
		w.Send(`{"jsonrpc":"2.0","id":1,"method":"authenticate","params":{"methodId":"other"}}`)
		if got := w.Take(); len(got) != 1 || wiretest.ErrCode(t, got[0]) != -32602 {
			t.Fatalf("other method: %q", got)
		}
		w.Send(`{"jsonrpc":"2.0","id":2,"method":"authenticate","params":{"methodId":"demo-token"}}`, newSession)
		got = w.Take()
		if len(got) != 2 || got[0] != `{"jsonrpc":"2.0","id":2,"result":{}}` || !strings.Contains(got[1], `"sessionId":"sess-1"`) {
			t.Fatalf("after authenticate: %q", got)
		}
	})
}

// New's agent does not require authentication.
func TestNewDoesNotRequireAuth(t *testing.T) {
	serve(t, nil, func(w *wiretest.Wire) {
		w.Send(promptLine(1, "hi"))
		if ups, last := updates(t, w.Take()); len(ups) != 1 || text(ups[0]) != "hi" || last != endTurn {
			t.Fatalf("got %v %s", ups, last)
		}
	})
}

// "mcp ..." is served by the MCP-over-ACP prompt: a server the session did
// not declare is refused as a failed turn.
func TestMCPPromptIsRouted(t *testing.T) {
	serve(t, nil, func(w *wiretest.Wire) {
		w.Send(promptLine(1, "mcp tools echo {}"))
		got := w.Take()
		if len(got) != 1 || wiretest.ErrCode(t, got[0]) == 0 || !strings.Contains(got[0], `declared no MCP server named \"tools\"`) {
			t.Fatalf("got %q", got)
		}
	})
}
