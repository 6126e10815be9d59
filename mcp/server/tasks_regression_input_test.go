package server_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/agentwire/agentwire/mcp"
	"github.com/agentwire/agentwire/mcp/server"
)

// Regression: tasks whose input nobody answered held their MaxRunning
// places forever: a month later every other caller of a tool that
// requires a task was refused. An Ask now gives up after InputTimeout.
func TestRegressionUnansweredTasksGiveBackTheirPlaces(t *testing.T) {
	runTasks(t, &server.TaskOptions{MaxRunning: 2}, func(w *taskWire) {
		w.s.AddTool(mcp.Tool{Name: "asks", Execution: required}, func(ctx context.Context, r *server.ToolRequest) (*mcp.ToolResult, error) {
			if _, err := r.Elicit(ctx, "k", "?", schemaObj); err != nil {
				return nil, err
			}
			return mcp.TextResult("ok"), nil
		})
		w.start("asks", `{}`)
		w.start("asks", `{}`)
		w.Sleep(30 * 24 * time.Hour) // a month: nobody answers
		got := w.call("asks", `{}`)
		if !strings.Contains(got, `"resultType":"task"`) || w.s.TaskStats().InputTimeouts != 2 {
			t.Errorf("a month later another client's call: %s; stats %+v", got, w.s.TaskStats())
		}
	})
}
