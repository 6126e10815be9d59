// Package acpdemo is `agentwire serve acp`: an example ACP agent. A prompt
// "slow N" streams N agent_message_chunk updates 50 ms apart; "permission"
// asks the client with session/request_permission before finishing;
// anything else is echoed back as one chunk. Modes: ask and code.
package acpdemo

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/agentwire/agentwire/acp"
)

// New returns the example agent.
func New() *acp.Agent {
	return &acp.Agent{
		Info: acp.Implementation{Name: "agentwire-acp-example", Version: "1.0.0"},
		Capabilities: map[string]any{
			"loadSession":        false,
			"promptCapabilities": map[string]any{},
			"mcpCapabilities":    map[string]any{"http": false, "sse": false},
		},
		Modes: []acp.SessionMode{
			{ID: "ask", Name: "Ask", Description: "Answer questions"},
			{ID: "code", Name: "Code", Description: "Write code"},
		},
		ConfigOptions: []acp.ConfigOption{{ID: "model", Name: "Model", Category: "model", CurrentValue: "fast",
			Options: []acp.ConfigChoice{{Value: "fast", Name: "Fast"}, {Value: "smart", Name: "Smart"}}}},
		Prompt: prompt,
	}
}

func prompt(ctx context.Context, t *acp.Turn) (acp.StopReason, error) {
	var text strings.Builder
	for _, b := range t.Prompt {
		if b.Type == "text" {
			text.WriteString(b.Text)
		}
	}
	s := strings.TrimSpace(text.String())
	if n, ok := strings.CutPrefix(s, "slow "); ok {
		steps, err := strconv.Atoi(strings.TrimSpace(n))
		if err != nil || steps < 0 {
			return "", fmt.Errorf("slow wants a number of chunks, got %q", n)
		}
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
	if s == "permission" {
		choice, err := t.RequestPermission(ctx,
			map[string]any{"toolCallId": "call-1", "title": "Write a file", "kind": "edit", "status": "pending"},
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
	return acp.EndTurn, t.MessageChunk(s)
}
