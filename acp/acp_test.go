package acp_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentwire/agentwire/acp"
	"github.com/agentwire/agentwire/internal/testserver"
	"github.com/agentwire/agentwire/internal/wiretest"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	testserver.Run()
	goleak.VerifyTestMain(m)
}

func testAgent() *acp.Agent {
	return &acp.Agent{
		Info:  acp.Implementation{Name: "test-agent", Version: "1"},
		Modes: []acp.SessionMode{{ID: "ask", Name: "Ask"}, {ID: "code", Name: "Code"}},
		Prompt: func(ctx context.Context, t *acp.Turn) (acp.StopReason, error) {
			text := t.Prompt[0].Text
			if n, ok := strings.CutPrefix(text, "slow "); ok {
				steps, _ := strconv.Atoi(n)
				for i := 1; i <= steps; i++ {
					select {
					case <-ctx.Done():
						t.MessageChunk("stopped")
						return "", ctx.Err()
					case <-time.After(50 * time.Millisecond):
					}
					t.MessageChunk(fmt.Sprintf("chunk %d", i))
				}
				return acp.EndTurn, nil
			}
			if text == "panic" {
				panic("prompt exploded")
			}
			return acp.EndTurn, t.MessageChunk(text)
		},
	}
}

func run(t *testing.T, opts *acp.Options, f func(w *wiretest.Wire)) {
	t.Helper()
	a := testAgent()
	a.ConfigOptions = []acp.ConfigOption{{ID: "model", Name: "Model", Category: "model", CurrentValue: "fast",
		Options: []acp.ConfigChoice{{Value: "fast", Name: "Fast"}, {Value: "smart", Name: "Smart"}}}}
	a.LoadSession = func(ctx context.Context, s *acp.Session, replay func(any) error) (bool, error) {
		if s.ID != "old-1" {
			return false, nil
		}
		replay(map[string]any{"sessionUpdate": "user_message_chunk", "content": acp.TextBlock("hi")})
		replay(map[string]any{"sessionUpdate": "agent_message_chunk", "content": acp.TextBlock("hello")})
		return true, nil
	}
	h, o := acp.ConnOptions(a, opts, nil)
	wiretest.Run(t, h, o, f)
}

const initLine = `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{}}}`

func newSession(id int) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":"n%d","method":"session/new","params":{"cwd":"/tmp","mcpServers":[]}}`, id)
}

func prompt(id any, session, text string) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%v,"method":"session/prompt","params":{"sessionId":%q,"prompt":[{"type":"text","text":%q}]}}`, id, session, text)
}

func cancel(session string) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":%q}}`, session)
}

// A1: initialize and session/new in one write are both answered, in
// order, with no "not initialized" error.
func TestInitializeThenNewSessionInOneWrite(t *testing.T) {
	run(t, nil, func(w *wiretest.Wire) {
		got := w.Exchange(initLine + "\n" + newSession(1))
		joined := strings.Join(got, "\n")
		if len(got) != 2 || strings.Contains(joined, "error") || !strings.Contains(joined, `"sessionId":"sess-1"`) {
			t.Fatalf("got %q", got)
		}
	})
}

func setup(w *wiretest.Wire, sessions int) {
	lines := []string{initLine}
	for i := 1; i <= sessions; i++ {
		lines = append(lines, newSession(i))
	}
	w.Exchange(lines...)
}

// A3, A4 (control during a prompt): set_mode is answered at once while a
// slow prompt runs; a second prompt for the busy session gets -32000 with
// data.reason.
func TestControlDuringPromptAndOnePromptPerSession(t *testing.T) {
	run(t, nil, func(w *wiretest.Wire) {
		setup(w, 1)
		w.Send(prompt(1, "sess-1", "slow 40"))
		w.Sleep(10 * time.Millisecond)
		got := w.Exchange(`{"jsonrpc":"2.0","id":2,"method":"session/set_mode","params":{"sessionId":"sess-1","modeId":"code"}}`,
			prompt(3, "sess-1", "again"))
		joined := strings.Join(got, "\n")
		if len(got) != 2 || !strings.Contains(joined, `{"jsonrpc":"2.0","id":2,"result":{}}`) ||
			!strings.Contains(joined, `"id":3,"error":{"code":-32000`) || !strings.Contains(joined, `"reason":"prompt_in_progress"`) {
			t.Fatalf("got %q", got)
		}
		w.Send(cancel("sess-1"))
		w.Sleep(100 * time.Millisecond)
	})
}

// A4: 33 concurrent prompts over 33 sessions: exactly one connection_busy.
func TestBackgroundLimit(t *testing.T) {
	run(t, nil, func(w *wiretest.Wire) {
		setup(w, 33)
		var lines []string
		for i := 1; i <= 33; i++ {
			lines = append(lines, prompt(i, "sess-"+strconv.Itoa(i), "slow 2"))
		}
		w.Send(lines...)
		w.Settle()
		got := w.Take()
		if len(got) != 1 || !strings.Contains(got[0], `"reason":"connection_busy"`) || !strings.Contains(got[0], `"limit":32`) {
			t.Fatalf("immediately: %q", got)
		}
		w.Sleep(200 * time.Millisecond)
		done := 0
		for _, l := range w.Take() {
			if strings.Contains(l, `"stopReason":"end_turn"`) {
				done++
			}
		}
		if done != 32 {
			t.Fatalf("%d prompts finished, want 32", done)
		}
	})
}

// A5, A6: session/cancel gets no response; the prompt answers cancelled
// after its last update; the next turn has a fresh token.
func TestCancelTurn(t *testing.T) {
	run(t, nil, func(w *wiretest.Wire) {
		setup(w, 1)
		w.Send(prompt(1, "sess-1", "slow 40"))
		w.Sleep(120 * time.Millisecond)
		w.Take()
		w.Send(cancel("sess-1"))
		w.Settle()
		got := w.Take()
		if len(got) != 2 || !strings.Contains(got[0], `"text":"stopped"`) || got[1] != `{"jsonrpc":"2.0","id":1,"result":{"stopReason":"cancelled"}}` {
			t.Fatalf("got %q", got)
		}
		// A fresh token: the next turn runs to its end.
		w.Send(prompt(2, "sess-1", "slow 1"))
		w.Sleep(100 * time.Millisecond)
		got = w.Take()
		if len(got) != 2 || !strings.Contains(got[1], `"stopReason":"end_turn"`) {
			t.Fatalf("next turn: %q", got)
		}
	})
}

// A5: a cancel in the same write as its prompt still cancels it.
func TestCancelInSameWriteAsPrompt(t *testing.T) {
	run(t, nil, func(w *wiretest.Wire) {
		setup(w, 1)
		w.Send(prompt(1, "sess-1", "slow 40") + "\n" + cancel("sess-1"))
		w.Sleep(100 * time.Millisecond)
		got := w.Take()
		if len(got) == 0 || got[len(got)-1] != `{"jsonrpc":"2.0","id":1,"result":{"stopReason":"cancelled"}}` {
			t.Fatalf("got %q", got)
		}
	})
}

// $/cancel_request cancels one prompt, which still answers cancelled.
func TestCancelRequest(t *testing.T) {
	run(t, nil, func(w *wiretest.Wire) {
		setup(w, 1)
		w.Send(prompt(7, "sess-1", "slow 40"))
		w.Sleep(60 * time.Millisecond)
		w.Send(`{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":7}}`)
		w.Settle()
		got := w.Take()
		if len(got) == 0 || got[len(got)-1] != `{"jsonrpc":"2.0","id":7,"result":{"stopReason":"cancelled"}}` {
			t.Fatalf("got %q", got)
		}
	})
}

// A8: a panic in a prompt is answered and releases the session.
func TestPanicReleasesSession(t *testing.T) {
	run(t, nil, func(w *wiretest.Wire) {
		setup(w, 1)
		got := w.Exchange(prompt(1, "sess-1", "panic"))
		if len(got) != 1 || !strings.Contains(got[0], `"code":-32603`) {
			t.Fatalf("got %q", got)
		}
		got = w.Exchange(prompt(2, "sess-1", "hello"))
		if len(got) != 2 || !strings.Contains(strings.Join(got, ""), `"id":2,"result":{"stopReason":"end_turn"}`) {
			t.Fatalf("after the panic: %q", got)
		}
	})
}

// A8: end of input cancels the active prompt at once; it answers cancelled
// and the connection ends without waiting out the grace.
func TestEOFCancelsPrompts(t *testing.T) {
	run(t, nil, func(w *wiretest.Wire) {
		setup(w, 1)
		w.Send(prompt(1, "sess-1", "slow 400"))
		w.Sleep(60 * time.Millisecond)
		w.Take()
		start := time.Now()
		w.In.Close()
		<-w.Conn.Done()
		<-w.EOF
		if d := time.Since(start); d > 100*time.Millisecond {
			t.Errorf("ended %v after EOF", d)
		}
		got := w.Take()
		if len(got) == 0 || got[len(got)-1] != `{"jsonrpc":"2.0","id":1,"result":{"stopReason":"cancelled"}}` {
			t.Fatalf("got %q", got)
		}
	})
}

func TestRequestsBeforeInitialize(t *testing.T) {
	run(t, nil, func(w *wiretest.Wire) {
		got := w.Exchange(newSession(1))
		if len(got) != 1 || !strings.Contains(got[0], `"code":-32600`) {
			t.Fatalf("got %q", got)
		}
	})
}

func TestSetConfigOption(t *testing.T) {
	run(t, nil, func(w *wiretest.Wire) {
		setup(w, 1)
		got := w.Exchange(`{"jsonrpc":"2.0","id":1,"method":"session/set_config_option","params":{"sessionId":"sess-1","configId":"model","value":"smart"}}`)
		if len(got) != 1 || !strings.Contains(got[0], `"currentValue":"smart"`) {
			t.Fatalf("got %q", got)
		}
		got = w.Exchange(`{"jsonrpc":"2.0","id":2,"method":"session/set_config_option","params":{"sessionId":"sess-1","configId":"model","value":"huge"}}`)
		if len(got) != 1 || !strings.Contains(got[0], `"code":-32602`) {
			t.Fatalf("bad value: %q", got)
		}
	})
}

// session/load replays the history as updates, all before its response.
func TestLoadSessionReplaysBeforeResponse(t *testing.T) {
	run(t, nil, func(w *wiretest.Wire) {
		w.Exchange(initLine)
		w.Send(`{"jsonrpc":"2.0","id":1,"method":"session/load","params":{"sessionId":"old-1","cwd":"/tmp","mcpServers":[]}}`)
		got := w.Take()
		if len(got) != 3 || !strings.Contains(got[0], "user_message_chunk") || !strings.Contains(got[1], "agent_message_chunk") || !strings.Contains(got[2], `"id":1,"result"`) {
			t.Fatalf("got %q", got)
		}
		got = w.Exchange(`{"jsonrpc":"2.0","id":2,"method":"session/load","params":{"sessionId":"nope","cwd":"/tmp","mcpServers":[]}}`)
		if len(got) != 1 || !strings.Contains(got[0], `"code":-32002`) {
			t.Fatalf("unknown session: %q", got)
		}
		// A loaded session takes prompts.
		got = w.Exchange(prompt(3, "old-1", "hey"))
		if len(got) != 2 {
			t.Fatalf("prompt on a loaded session: %q", got)
		}
	})
}

// A8: idle sessions are forgotten, except one with an active prompt.
func TestIdleSessionCleanup(t *testing.T) {
	run(t, &acp.Options{IdleSessionTimeout: time.Minute}, func(w *wiretest.Wire) {
		setup(w, 2)
		w.Send(prompt(1, "sess-2", "slow 10000")) // 500 s: active throughout
		w.Sleep(3 * time.Minute)
		got := w.Exchange(`{"jsonrpc":"2.0","id":2,"method":"session/set_mode","params":{"sessionId":"sess-1","modeId":"code"}}`)
		if len(got) == 0 || !strings.Contains(strings.Join(got, ""), `"id":2,"error":{"code":-32002`) {
			t.Fatalf("idle session still there: %q", got)
		}
		got = w.Exchange(`{"jsonrpc":"2.0","id":3,"method":"session/set_mode","params":{"sessionId":"sess-2","modeId":"code"}}`)
		if !strings.Contains(strings.Join(got, ""), `{"jsonrpc":"2.0","id":3,"result":{}}`) {
			t.Fatalf("session with an active prompt was cleaned up: %q", got)
		}
		w.Send(cancel("sess-2"))
		w.Sleep(100 * time.Millisecond)
	})
}

// Every wire test of this package, run again over the message seam
// (rpc.NewMessages): the same raw lines, the same answers.
func TestWireTestsOverMessages(t *testing.T) { wiretest.RerunOverMessages(t) }

// initialize answers authMethods (default []) and advertises what the
// runtime serves: loadSession with LoadSession, sessionCapabilities close
// and resume; the agent's own capabilities are kept.
func TestInitializeAdvertisesWhatIsServed(t *testing.T) {
	run(t, nil, func(w *wiretest.Wire) {
		got := w.Exchange(initLine)
		want := `{"jsonrpc":"2.0","id":0,"result":{"agentCapabilities":{"loadSession":true,"sessionCapabilities":{"close":{},"resume":{}}},` +
			`"agentInfo":{"name":"test-agent","version":"1"},"authMethods":[],"protocolVersion":1}}`
		if len(got) != 1 || got[0] != want {
			t.Fatalf("got %q\nwant %s", got, want)
		}
	})
}

// Capabilities the agent gives are merged with the runtime's, never
// replaced: its sessionCapabilities and mcpCapabilities members stay, and
// MCPOverACP adds mcpCapabilities.acp.
func TestAgentCapabilitiesAreMerged(t *testing.T) {
	a := testAgent()
	a.Capabilities = map[string]any{
		"promptCapabilities":  map[string]any{"image": true},
		"sessionCapabilities": json.RawMessage(`{"list":{},"close":{"x":1}}`),
		"mcpCapabilities":     map[string]any{"http": true},
	}
	a.MCPOverACP = true
	a.AuthMethods = []acp.AuthMethod{{ID: "tok", Name: "Token"}, {ID: "login", Name: "Log in", Type: "terminal", Args: []string{"--login"}}}
	runAgent(t, a, func(w *wiretest.Wire) {
		got := w.Exchange(initWith(`{"auth":{"terminal":true}}`))
		want := `{"jsonrpc":"2.0","id":0,"result":{"agentCapabilities":{"mcpCapabilities":{"acp":true,"http":true},"promptCapabilities":{"image":true},` +
			`"sessionCapabilities":{"close":{"x":1},"list":{},"resume":{}}},"agentInfo":{"name":"test-agent","version":"1"},` +
			`"authMethods":[{"id":"tok","name":"Token"},{"id":"login","name":"Log in","type":"terminal","args":["--login"]}],"protocolVersion":1}}`
		if len(got) != 1 || got[0] != want {
			t.Fatalf("got %q\nwant %s", got, want)
		}
	})
	// A terminal auth method is only for a client that can run it.
	runAgent(t, a, func(w *wiretest.Wire) {
		got := w.Exchange(initWith(`{"auth":{"terminal":false}}`))
		if len(got) != 1 || !strings.Contains(got[0], `"authMethods":[{"id":"tok","name":"Token"}]`) {
			t.Fatalf("without auth.terminal: %q", got)
		}
	})
}

func authAgent() *acp.Agent {
	a := testAgent()
	a.RequireAuth = true
	a.AuthMethods = []acp.AuthMethod{{ID: "tok", Name: "Token"}, {ID: "bad", Name: "Always fails"}}
	a.Authenticate = func(ctx context.Context, id string) error {
		if id == "bad" {
			return errors.New("no credentials")
		}
		return nil
	}
	a.LoadSession = func(context.Context, *acp.Session, func(any) error) (bool, error) { return true, nil }
	return a
}

// With RequireAuth, session/new, session/load, session/resume and
// session/prompt get exactly ACP's AuthRequired (-32000, no data.reason)
// until an authenticate succeeds; a methodId not offered is -32602 and a
// failed authenticate authenticates nothing.
func TestRequireAuthHoldsSessionsBackUntilAuthenticate(t *testing.T) {
	runAgent(t, authAgent(), func(w *wiretest.Wire) {
		w.Exchange(initLine)
		for i, line := range []string{
			newSession(1),
			`{"jsonrpc":"2.0","id":"n1","method":"session/load","params":{"sessionId":"s","cwd":"/tmp","mcpServers":[]}}`,
			`{"jsonrpc":"2.0","id":"n1","method":"session/resume","params":{"sessionId":"s","cwd":"/tmp"}}`,
			prompt(`"n1"`, "s", "hi"),
		} {
			got := w.Exchange(line)
			if len(got) != 1 || got[0] != `{"jsonrpc":"2.0","id":"n1","error":{"code":-32000,"message":"Authentication required"}}` {
				t.Fatalf("request %d: got %q", i, got)
			}
		}
		got := w.Exchange(`{"jsonrpc":"2.0","id":1,"method":"authenticate","params":{"methodId":"other"}}`)
		if len(got) != 1 || !strings.Contains(got[0], `"code":-32602`) || !strings.Contains(got[0], `"methodId":"other"`) {
			t.Fatalf("unknown method: %q", got)
		}
		got = inOrder(w, `{"jsonrpc":"2.0","id":2,"method":"authenticate","params":{"methodId":"bad"}}`, newSession(1))
		if len(got) != 2 || !strings.Contains(got[0], `"id":2,"error"`) || !strings.Contains(got[1], "Authentication required") {
			t.Fatalf("failed authenticate: %q", got)
		}
		got = w.Exchange(`{"jsonrpc":"2.0","id":3,"method":"authenticate","params":{"methodId":"tok"}}`)
		if len(got) != 1 || got[0] != `{"jsonrpc":"2.0","id":3,"result":{}}` {
			t.Fatalf("authenticate: %q", got)
		}
		got = w.Exchange(newSession(1), prompt(4, "sess-1", "hi"))
		if j := strings.Join(got, "\n"); !strings.Contains(j, `"sessionId":"sess-1"`) || !strings.Contains(j, `"id":4,"result":{"stopReason":"end_turn"}`) {
			t.Fatalf("after authenticate: %q", got)
		}
	})
}

// Without RequireAuth nothing waits for authenticate, and an agent with no
// AuthMethods accepts any methodId.
func TestAuthenticateWithoutMethodsAcceptsAny(t *testing.T) {
	run(t, nil, func(w *wiretest.Wire) {
		got := inOrder(w, initLine, newSession(1), `{"jsonrpc":"2.0","id":1,"method":"authenticate","params":{"methodId":"whatever"}}`)
		if len(got) != 3 || got[2] != `{"jsonrpc":"2.0","id":1,"result":{}}` {
			t.Fatalf("got %q", got)
		}
		got = w.Exchange(`{"jsonrpc":"2.0","id":2,"method":"authenticate","params":{}}`)
		if len(got) != 1 || !strings.Contains(got[0], `"code":-32602`) {
			t.Fatalf("no methodId: %q", got)
		}
	})
}

// session/resume reattaches without a replay: a session the connection
// holds answers its modes and config options; another is asked of
// LoadSession, whose updates are not sent; one it does not know is
// -32002.
func TestResumeSession(t *testing.T) {
	run(t, nil, func(w *wiretest.Wire) {
		setup(w, 1)
		w.Exchange(`{"jsonrpc":"2.0","id":1,"method":"session/set_mode","params":{"sessionId":"sess-1","modeId":"code"}}`)
		got := w.Exchange(`{"jsonrpc":"2.0","id":2,"method":"session/resume","params":{"sessionId":"sess-1","cwd":"/tmp"}}`)
		want := `{"jsonrpc":"2.0","id":2,"result":{"configOptions":[{"id":"model","name":"Model","category":"model","type":"select","currentValue":"fast",` +
			`"options":[{"value":"fast","name":"Fast"},{"value":"smart","name":"Smart"}]}],"modes":{"availableModes":[{"id":"ask","name":"Ask"},{"id":"code","name":"Code"}],"currentModeId":"code"}}}`
		if len(got) != 1 || got[0] != want {
			t.Fatalf("held session: got %q\nwant %s", got, want)
		}
		got = w.Exchange(`{"jsonrpc":"2.0","id":3,"method":"session/resume","params":{"sessionId":"old-1","cwd":"/tmp","mcpServers":[]}}`)
		if len(got) != 1 || !strings.Contains(got[0], `"id":3,"result":{"configOptions"`) {
			t.Fatalf("loaded without replay: %q", got)
		}
		got = w.Exchange(prompt(4, "old-1", "hey"))
		if len(got) != 2 || !strings.Contains(strings.Join(got, ""), `"id":4,"result":{"stopReason":"end_turn"}`) {
			t.Fatalf("prompt on a resumed session: %q", got)
		}
		got = w.Exchange(`{"jsonrpc":"2.0","id":5,"method":"session/resume","params":{"sessionId":"nope","cwd":"/tmp"}}`)
		if len(got) != 1 || got[0] != `{"jsonrpc":"2.0","id":5,"error":{"code":-32002,"message":"session not found: nope","data":{"sessionId":"nope"}}}` {
			t.Fatalf("unknown session: %q", got)
		}
		got = w.Exchange(`{"jsonrpc":"2.0","id":6,"method":"session/resume","params":{"sessionId":"sess-1"}}`)
		if len(got) != 1 || !strings.Contains(got[0], `"code":-32602`) {
			t.Fatalf("no cwd: %q", got)
		}
	})
	// Without LoadSession only held sessions resume.
	runAgent(t, testAgent(), func(w *wiretest.Wire) {
		got := inOrder(w, initLine, `{"jsonrpc":"2.0","id":1,"method":"session/resume","params":{"sessionId":"old-1","cwd":"/tmp"}}`)
		if len(got) != 2 || !strings.Contains(got[1], `"id":1,"error":{"code":-32002`) {
			t.Fatalf("got %q", got)
		}
	})
}

func boolAgent() *acp.Agent {
	a := testAgent()
	a.ConfigOptions = []acp.ConfigOption{
		{ID: "model", Name: "Model", CurrentValue: "fast", Options: []acp.ConfigChoice{{Value: "fast", Name: "Fast"}}},
		{ID: "web", Name: "Web search", Description: "Let the agent search", Type: "boolean", CurrentValue: "false"},
	}
	return a
}

// A boolean config option is a JSON boolean on the wire, and
// set_config_option takes {"type":"boolean","value":true} for it; a
// string for a boolean or a boolean for a select is -32602.
func TestBooleanConfigOption(t *testing.T) {
	runAgent(t, boolAgent(), func(w *wiretest.Wire) {
		got := inOrder(w, initLine, newSession(1))
		if len(got) != 2 || !strings.Contains(got[1], `{"id":"web","name":"Web search","description":"Let the agent search","type":"boolean","currentValue":false}`) {
			t.Fatalf("session/new: %q", got)
		}
		set := func(id int, body string) string {
			got := w.Exchange(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"session/set_config_option","params":{"sessionId":"sess-1",%s}}`, id, body))
			if len(got) != 1 {
				t.Fatalf("got %q", got)
			}
			return got[0]
		}
		if got := set(1, `"configId":"web","type":"boolean","value":true`); !strings.Contains(got, `"type":"boolean","currentValue":true}`) {
			t.Fatalf("set true: %q", got)
		}
		if got := set(2, `"configId":"web","value":false`); !strings.Contains(got, `"type":"boolean","currentValue":false}`) {
			t.Fatalf("set false without type: %q", got)
		}
		for i, body := range []string{
			`"configId":"web","value":"true"`,
			`"configId":"web","type":"boolean","value":null`,
			`"configId":"web","type":"boolean"`,
			`"configId":"model","type":"boolean","value":true`,
			`"configId":"model","value":true`,
		} {
			if got := set(10+i, body); wiretest.ErrCode(t, got) != -32602 {
				t.Fatalf("%s: %q", body, got)
			}
		}
	})
}

// ConfigOption decodes both types, as a client reads them: a boolean
// currentValue becomes "true"/"false", grouped select options are
// flattened, items of another shape are skipped, and it encodes back to
// the schema's form.
func TestConfigOptionJSON(t *testing.T) {
	var opts []acp.ConfigOption
	in := `[{"id":"b","name":"B","type":"boolean","currentValue":true},` +
		`{"id":"s","name":"S","type":"select","currentValue":"x","options":[{"value":"x","name":"X"},{"group":"g","name":"G","options":[{"value":"y","name":"Y"}]},42]}]`
	if err := json.Unmarshal([]byte(in), &opts); err != nil {
		t.Fatal(err)
	}
	if len(opts) != 2 || opts[0].Type != "boolean" || opts[0].CurrentValue != "true" ||
		len(opts[1].Options) != 2 || opts[1].Options[1].Value != "y" || string(opts[0].Raw) != `{"id":"b","name":"B","type":"boolean","currentValue":true}` {
		t.Fatalf("decoded %+v", opts)
	}
	out, _ := json.Marshal(opts)
	want := `[{"id":"b","name":"B","type":"boolean","currentValue":true},{"id":"s","name":"S","type":"select","currentValue":"x","options":[{"value":"x","name":"X"},{"value":"y","name":"Y"}]}]`
	if string(out) != want {
		t.Fatalf("encoded %s\nwant %s", out, want)
	}
}

// blockAgent reports the blocks it received: type, text and raw JSON.
func blockAgent() *acp.Agent {
	return &acp.Agent{Prompt: func(ctx context.Context, t *acp.Turn) (acp.StopReason, error) {
		var b strings.Builder
		for _, blk := range t.Prompt {
			fmt.Fprintf(&b, "%s|%s|%s;", blk.Type, blk.Text, blk.Raw)
		}
		return acp.EndTurn, t.MessageChunk(b.String())
	}}
}

// The prompt's blocks are read the same whether the fast decoder takes
// them or encoding/json does: escapes decoded, every block's raw JSON
// kept, and malformed prompts refused with -32602.
func TestPromptBlocksDecoded(t *testing.T) {
	runAgent(t, blockAgent(), func(w *wiretest.Wire) {
		w.Exchange(initLine, newSession(1))
		p := func(id int, blocks string) []string {
			return w.Exchange(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"session/prompt","params":{"sessionId":"sess-1","prompt":%s}}`, id, blocks))
		}
		chunk := func(got []string) string {
			if len(got) != 2 {
				t.Fatalf("got %q", got)
			}
			var m struct {
				Params struct {
					Update struct{ Content acp.ContentBlock } `json:"update"`
				} `json:"params"`
			}
			json.Unmarshal([]byte(got[1]), &m)
			return m.Params.Update.Content.Text
		}
		if got := chunk(p(1, `[{"type":"text","text":"h\u0069 \"x\""}]`)); got != `text|hi "x"|{"type":"text","text":"h\u0069 \"x\""};` {
			t.Fatalf("escaped: %s", got)
		}
		if got := chunk(p(2, `[{"type":"text","text":"a"},{"type":"image","mimeType":"image/png","data":"AA=="},{"type":"resource_link","uri":"file:///a","name":"a"}]`)); got !=
			`text|a|{"type":"text","text":"a"};image||{"type":"image","mimeType":"image/png","data":"AA=="};resource_link||{"type":"resource_link","uri":"file:///a","name":"a"};` {
			t.Fatalf("three blocks: %s", got)
		}
		if got := chunk(p(3, `[]`)); got != `` {
			t.Fatalf("no blocks: %s", got)
		}
		// encoding/json's path: a null text is an empty text.
		if got := chunk(p(4, `[{"type":"text","text":null}]`)); got != `text||{"type":"text","text":null};` {
			t.Fatalf("null text: %s", got)
		}
		for i, bad := range []string{`[{"type":"text","text":5}]`, `"hi"`, `[5]`, `[{"type":7}]`} {
			got := p(10+i, bad)
			if len(got) != 1 || wiretest.ErrCode(t, got[0]) != -32602 {
				t.Fatalf("%s: %q", bad, got)
			}
		}
		// The session is free again after each refusal.
		if got := chunk(p(20, `[{"type":"text","text":"ok"}]`)); got != `text|ok|{"type":"text","text":"ok"};` {
			t.Fatalf("after refusals: %s", got)
		}
	})
}

// inOrder sends lines and returns the replies in the order they were
// written.
func inOrder(w *wiretest.Wire, lines ...string) []string {
	w.Send(lines...)
	return w.Take()
}
