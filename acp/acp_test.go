package acp_test

import (
	"context"
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
