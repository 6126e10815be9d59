package server_test

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/agentwire/agentwire/internal/wiretest"
	"github.com/agentwire/agentwire/mcp"
	"github.com/agentwire/agentwire/mcp/internal/mcptest"
	"github.com/agentwire/agentwire/mcp/server"
	"github.com/agentwire/agentwire/mcp/tasks"
)

// Issue 17 acceptance: 10,000 finished tasks do not grow memory past the
// store's bound. Through a real server, 10,000 calls that become tasks
// and end at once, each with a 4 KiB result, against a store bounded to
// 500 tasks: the store never holds more, the ended tasks are forgotten
// soonest-expiry first, and the heap after them is within a few MiB of
// what 500 such tasks weigh.
func TestTenThousandFinishedTasksStayWithinTheStoresBound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := tasks.NewMemory(&tasks.MemoryOptions{MaxTasks: 500, Logger: wiretest.Quiet})
		s := mcptest.NewServer(&server.Options{Tasks: &server.TaskOptions{Store: store}})
		payload := strings.Repeat("x", 4096)
		server.AddTool(s, mcp.Tool{Name: "quick", Execution: &mcp.ToolExecution{TaskSupport: mcp.TaskRequired}},
			func(ctx context.Context, r *server.ToolRequest, _ struct{}) (*mcp.ToolResult, error) {
				return mcp.TextResult(payload), nil
			})
		defer s.Shutdown(context.Background())
		w := wiretest.Start(t, s.Handler(), s.ConnOptions(nil), true)
		defer w.Finish()

		var before runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		for i := range 10_000 {
			got := mcptest.One(t, w.Exchange(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"quick","arguments":{},%s}}`, i, tasksMeta)))
			if !strings.Contains(got, `"resultType":"task"`) {
				t.Fatalf("call %d: %s", i, got)
			}
			if st := store.Stats(); st.Tasks > 500 {
				t.Fatalf("after %d tasks the store holds %d (bound 500)", i+1, st.Tasks)
			}
		}
		synctest.Wait()
		st := store.Stats()
		if st.Created != 10_000 || st.Tasks > 500 || st.Evicted < 9_500 || st.Refused != 0 || st.Bytes > 500*5000 {
			t.Fatalf("store stats %+v", st)
		}
		if ts := s.TaskStats(); ts.Completed != 10_000 || ts.Running != 0 {
			t.Fatalf("task stats %+v", ts)
		}
		var after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&after)
		// 500 tasks of 4 KiB are ~2 MiB; 10,000 would be ~40 MiB.
		if grown := int64(after.HeapAlloc) - int64(before.HeapAlloc); grown > 12<<20 {
			t.Fatalf("the heap grew %d MiB over 10,000 ended tasks", grown>>20)
		}
	})
}
