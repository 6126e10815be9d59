package acp_test

// Regression tests for defects found in review: a session/prompt sent as a
// notification broke the background count and took over another prompt's
// reservation; a prompt queued behind the session/load that creates its
// session was refused; session/new minted an id that a session/load had
// already brought in, replacing that session; session/resume was listed
// as a control method but answered -32601.

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentwire/agentwire/acp"
	"github.com/agentwire/agentwire/internal/wiretest"
)

// A session/prompt *notification* (no id) is not counted at admission
// but its handler decrements the background counter (and, for a busy
// session, steals and cancels the running prompt's reservation).
func TestRegressionPromptNotificationDoesNotBreakTheLimit(t *testing.T) {
	run(t, nil, func(w *wiretest.Wire) {
		setup(w, 34)
		w.Send(`{"jsonrpc":"2.0","method":"session/prompt","params":{"sessionId":"nope","prompt":[{"type":"text","text":"x"}]}}`,
			`{"jsonrpc":"2.0","method":"session/prompt","params":{"sessionId":"nope","prompt":[{"type":"text","text":"x"}]}}`)
		w.Settle()
		w.Take()
		var lines []string
		for i := 1; i <= 34; i++ {
			lines = append(lines, prompt(i, "sess-"+strconv.Itoa(i), "slow 2"))
		}
		w.Send(lines...)
		w.Settle()
		got := w.Take()
		busy := 0
		for _, l := range got {
			if strings.Contains(l, "connection_busy") {
				busy++
			}
		}
		w.Sleep(300 * time.Millisecond)
		if busy != 2 {
			t.Errorf("34 prompts with limit 32: %d connection_busy, want 2 (counter went negative)", busy)
		}
	})
}

func TestRegressionPromptNotificationLeavesRunningPromptAlone(t *testing.T) {
	run(t, nil, func(w *wiretest.Wire) {
		setup(w, 1)
		w.Send(prompt(1, "sess-1", "slow 10"))
		w.Sleep(60 * time.Millisecond)
		w.Send(`{"jsonrpc":"2.0","method":"session/prompt","params":{"sessionId":"sess-1","prompt":[{"type":"text","text":"x"}]}}`)
		w.Sleep(time.Second)
		j := strings.Join(w.Take(), "\n")
		if !strings.Contains(j, `"id":1,"result":{"stopReason":"end_turn"}`) {
			t.Errorf("prompt 1 was hijacked by a prompt notification:\n%s", j)
		}
	})
}

// A1: a prompt pipelined right behind a (slow) session/load for the same
// session is admitted while the load still runs, before the session exists.
func TestRegressionPromptQueuedBehindSlowLoad(t *testing.T) {
	a := testAgent()
	a.LoadSession = func(ctx context.Context, s *acp.Session, replay func(any) error) (bool, error) {
		time.Sleep(50 * time.Millisecond) // e.g. reading history from disk
		return true, nil
	}
	h, o := acp.ConnOptions(a, nil, nil)
	wiretest.Run(t, h, o, func(w *wiretest.Wire) {
		w.Exchange(initLine)
		w.Send(`{"jsonrpc":"2.0","id":1,"method":"session/load","params":{"sessionId":"old-1","cwd":"/tmp","mcpServers":[]}}`,
			prompt(2, "old-1", "hey"))
		w.Sleep(200 * time.Millisecond)
		j := strings.Join(w.Take(), "\n")
		if !strings.Contains(j, `"id":2,"result":{"stopReason":"end_turn"}`) {
			t.Errorf("prompt behind session/load:\n%s", j)
		}
	})
}

// Long prompts hold the background budget (32), never the reader: with
// every prompt running, a burst of control requests and other requests
// beyond the connection's handler slots is answered, and the cancellations
// behind it are read and end every turn.
func TestLongPromptsLeaveControlAndCancelReadable(t *testing.T) {
	run(t, nil, func(w *wiretest.Wire) {
		setup(w, 32)
		var lines []string
		for i := 1; i <= 32; i++ {
			lines = append(lines, prompt(i, "sess-"+strconv.Itoa(i), "slow 100000"))
		}
		w.Send(lines...)
		w.Settle()
		lines = lines[:0]
		for i := range 100 {
			lines = append(lines, fmt.Sprintf(`{"jsonrpc":"2.0","id":"m%d","method":"session/set_mode","params":{"sessionId":"sess-1","modeId":"code"}}`, i))
			lines = append(lines, fmt.Sprintf(`{"jsonrpc":"2.0","id":"u%d","method":"no/such/method"}`, i))
		}
		for i := 1; i <= 32; i++ {
			lines = append(lines, cancel("sess-"+strconv.Itoa(i)))
		}
		w.Send(lines...)
		w.Sleep(100 * time.Millisecond)
		modes, unknown, cancelled := 0, 0, 0
		for _, l := range w.Take() {
			switch {
			case strings.Contains(l, `"id":"m`) && strings.Contains(l, `"result":{}`):
				modes++
			case strings.Contains(l, `"id":"u`) && strings.Contains(l, `-32601`):
				unknown++
			case strings.Contains(l, `"stopReason":"cancelled"`):
				cancelled++
			}
		}
		if modes != 100 || unknown != 100 || cancelled != 32 {
			t.Fatalf("%d set_mode, %d unknown, %d cancelled turns answered", modes, unknown, cancelled)
		}
		if got := w.Exchange(prompt(`"again"`, "sess-1", "hi")); !strings.Contains(strings.Join(got, "\n"), `"id":"again","result":{"stopReason":"end_turn"}`) {
			t.Fatalf("a new turn got %q", got)
		}
	})
}

// The runtime mints "sess-N" per connection; a session loaded under such an
// id (made by an earlier connection) was silently replaced by the next
// session/new, which minted the same id.
func TestRegressionNewSessionDoesNotReuseALoadedID(t *testing.T) {
	a := testAgent()
	a.LoadSession = func(context.Context, *acp.Session, func(any) error) (bool, error) { return true, nil }
	h, o := acp.ConnOptions(a, nil, nil)
	wiretest.Run(t, h, o, func(w *wiretest.Wire) {
		w.Exchange(initLine, `{"jsonrpc":"2.0","id":1,"method":"session/load","params":{"sessionId":"sess-1","cwd":"/loaded","mcpServers":[]}}`)
		w.Exchange(`{"jsonrpc":"2.0","id":2,"method":"session/set_mode","params":{"sessionId":"sess-1","modeId":"code"}}`)
		got := w.Exchange(newSession(1))
		if len(got) != 1 || !strings.Contains(got[0], `"sessionId":"sess-2"`) {
			t.Fatalf("session/new: %q", got)
		}
		// The loaded session is still the one with mode code.
		got = w.Exchange(`{"jsonrpc":"2.0","id":3,"method":"session/resume","params":{"sessionId":"sess-1","cwd":"/loaded"}}`)
		if len(got) != 1 || !strings.Contains(got[0], `"currentModeId":"code"`) {
			t.Fatalf("loaded session replaced: %q", got)
		}
	})
}

// session/resume was routed to the control lane but had no handler, so a
// client that saw it advertised got -32601.
func TestRegressionResumeIsServed(t *testing.T) {
	run(t, nil, func(w *wiretest.Wire) {
		setup(w, 1)
		got := w.Exchange(`{"jsonrpc":"2.0","id":1,"method":"session/resume","params":{"sessionId":"sess-1","cwd":"/tmp"}}`)
		if len(got) != 1 || wiretest.ErrCode(t, got[0]) != 0 {
			t.Fatalf("got %q", got)
		}
	})
}
