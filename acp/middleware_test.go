package acp_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/agentwire/agentwire/acp"
	"github.com/agentwire/agentwire/internal/wiretest"
	"github.com/agentwire/agentwire/jsonrpc"
)

// A middleware sees every message with the session it names, and a prompt
// it refuses leaves the session's one-prompt reservation (A3, A5) free: the
// next prompt for the session runs.
func TestMiddlewareSeesSessionsAndARefusedPromptFreesTheSession(t *testing.T) {
	var mu sync.Mutex
	var saw []string
	refuse := true
	mw := func(next acp.CallHandler) acp.CallHandler {
		return func(ctx context.Context, c *acp.Call) (any, error) {
			mu.Lock()
			line := fmt.Sprintf("%s session=%q notification=%v", c.Method, c.SessionID, c.Request.IsNotification())
			if blocks, err := c.Prompt(); err == nil {
				line += fmt.Sprintf(" prompt=%q", blocks[0].Text)
			}
			saw = append(saw, line)
			stop := refuse && c.Method == acp.MethodPrompt
			refuse = refuse && !stop
			mu.Unlock()
			if stop {
				return nil, jsonrpc.NewError(-33000, "over quota", nil)
			}
			return next(ctx, c)
		}
	}
	run(t, &acp.Options{Middleware: []acp.Middleware{mw}}, func(w *wiretest.Wire) {
		setup(w, 1)
		got := strings.Join(w.Exchange(prompt(1, "sess-1", "hello")), "\n")
		if !strings.Contains(got, `"id":1,"error":{"code":-33000,"message":"over quota"}`) {
			t.Fatalf("the refused prompt was answered %s", got)
		}
		got = strings.Join(w.Exchange(prompt(2, "sess-1", "again")), "\n")
		if !strings.Contains(got, `"id":2,"result":{"stopReason":"end_turn"`) {
			t.Fatalf("the prompt after a refused one was answered %s, want end_turn", got)
		}
		w.Exchange(cancel("sess-1"))
	})
	want := strings.Join([]string{
		`initialize session="" notification=false`,
		`session/new session="" notification=false`,
		`session/prompt session="sess-1" notification=false prompt="hello"`,
		`session/prompt session="sess-1" notification=false prompt="again"`,
		`session/cancel session="sess-1" notification=true`,
	}, "\n")
	if got := strings.Join(saw, "\n"); got != want {
		t.Errorf("the middleware saw\n%s\nwant\n%s", got, want)
	}
}
