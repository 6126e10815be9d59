package host_test

import (
	"context"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/agentwire/agentwire/mcp/host"
	"github.com/agentwire/agentwire/mcp/internal/mcptest"
)

// Regression: a progress notification whose handler ran late, handed off
// the client's read loop, could reach the caller after its call had
// returned, or not at all (seen through the bridge as "progress [1], want
// 2 steps"). Progress is now routed where it is read and delivered, in
// order, before the call returns, however slow the caller's function is.
func TestProgressIsNeverOvertakenByTheResult(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sess, _, err := mcptest.ConnectTo(t, nil, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		var seen []float64
		res, err := sess.CallTool(context.Background(), "slow", map[string]any{"steps": 3}, host.WithProgress(func(p, _ float64, _ string) {
			time.Sleep(time.Second) // slow work of the caller's, on the fake clock
			seen = append(seen, p)
		}))
		if err != nil || res.Content[0].Text != "done" {
			t.Fatalf("%+v %v", res, err)
		}
		if !slices.Equal(seen, []float64{1, 2, 3}) {
			t.Errorf("progress seen by the time the call returned: %v, want [1 2 3]", seen)
		}
	})
}
