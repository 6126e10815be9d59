package server_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/agentwire/agentwire/internal/wiretest"
	"github.com/agentwire/agentwire/mcp"
	"github.com/agentwire/agentwire/mcp/internal/mcptest"
	"github.com/agentwire/agentwire/mcp/server"
	"github.com/agentwire/agentwire/mcp/streamable"
	"github.com/agentwire/agentwire/mcp/tasks"
	"github.com/agentwire/agentwire/rpc"
)

var schemaObj = map[string]any{"type": "object"}

// Regression: two goroutines of one task handler asking at once raced on
// the run's input keys (a plain map; without -race, a fatal concurrent
// map write) and stole each other's wake-ups. Each Ask now gets its keys
// under the run's lock and every waiting Ask hears every change.
func TestRegressionConcurrentAsksInATaskDoNotRace(t *testing.T) {
	runTasks(t, nil, func(w *taskWire) {
		w.s.AddTool(mcp.Tool{Name: "par", Execution: optional}, func(ctx context.Context, r *server.ToolRequest) (*mcp.ToolResult, error) {
			var wg sync.WaitGroup
			for i := range 8 {
				wg.Add(1)
				go func() { defer wg.Done(); r.Elicit(ctx, fmt.Sprint("k", i), "?", schemaObj) }()
			}
			wg.Wait()
			return mcp.TextResult("ok"), nil
		})
		id := w.start("par", `{}`)
		w.Settle()
		if reqs, _ := w.get(id)["inputRequests"].(map[string]any); len(reqs) != 8 {
			t.Fatalf("eight Asks at once: %d input requests", len(reqs))
		}
	})
}

// Regression: an Ask given up (here by its own shorter context) left its
// input requests in the task, which said input_required while the
// handler worked on. Its questions are now withdrawn.
func TestRegressionAnAbandonedAskWithdrawsItsQuestions(t *testing.T) {
	runTasks(t, nil, func(w *taskWire) {
		release := make(chan struct{})
		w.s.AddTool(mcp.Tool{Name: "impatient", Execution: optional}, func(ctx context.Context, r *server.ToolRequest) (*mcp.ToolResult, error) {
			actx, cancel := context.WithTimeout(ctx, time.Second)
			_, err := r.Elicit(actx, "k", "?", schemaObj)
			cancel()
			select { // goes on without the answer
			case <-release:
			case <-ctx.Done():
			}
			return mcp.TextResult(fmt.Sprint("fallback after ", err)), nil
		})
		id := w.start("impatient", `{}`)
		w.Sleep(10 * time.Second)
		g := w.get(id)
		if g["status"] != "working" {
			t.Errorf("the handler gave up asking 9s ago and works on, yet tasks/get says %v with inputRequests %v", g["status"], g["inputRequests"])
		}
		close(release)
	})
}

// Regression: a 2025-11-25 ttl too large for a Duration overflowed to a
// negative TTL: the task was forgotten the moment it ended and its result
// lost. It is now capped at MaxTTL before it becomes a Duration.
func TestRegressionAHugeLegacyTTLIsCappedNotOverflowed(t *testing.T) {
	runLegacy(t, nil, func(w *legacyWire, s *server.Server) {
		s.AddTool(mcp.Tool{Name: "quick", Execution: optional}, func(context.Context, *server.ToolRequest) (*mcp.ToolResult, error) {
			return mcp.TextResult("the result"), nil
		})
		for _, ttl := range []string{"1e300", "9.3e15", "0.0001"} {
			line := w.do("tools/call", `"name":"quick","arguments":{},"task":{"ttl":`+ttl+`}`)
			task := legacyTask(t, line)
			w.Settle()
			got := w.do("tasks/result", taskParam(task["taskId"].(string)))
			if !strings.Contains(got, "the result") {
				t.Errorf("ttl %s (created with ttl %v): tasks/result right after the end: %s", ttl, task["ttl"], got)
			}
		}
	})
}

// Regression: a task that ended between listen's look into the store and
// its watch being registered was never told on the stream. The watch now
// comes first, and the stream starts with each task's current state.
type gatedGets struct {
	tasks.Store
	mu      sync.Mutex
	armed   bool
	entered chan struct{}
	release chan struct{}
}

func (g *gatedGets) Get(ctx context.Context, id string) (*tasks.Task, error) {
	g.mu.Lock()
	armed := g.armed
	g.armed = false
	g.mu.Unlock()
	t, err := g.Store.Get(ctx, id)
	if armed {
		close(g.entered)
		<-g.release
	}
	return t, err
}

func TestRegressionListenTellsATaskThatEndsWhileItSubscribes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := &gatedGets{Store: tasks.NewMemory(nil), entered: make(chan struct{}), release: make(chan struct{})}
		s := mcptest.NewServer(&server.Options{Tasks: &server.TaskOptions{Store: store}, Logger: wiretest.Quiet})
		gt := addGated(s, "job", optional)
		w := wiretest.Start(t, s.Handler(), s.ConnOptions(nil), true)
		defer w.Finish()
		defer s.Shutdown(context.Background())
		tw := &taskWire{Wire: w, t: t, s: s}
		id := tw.start("job", `{}`)
		store.mu.Lock()
		store.armed = true
		store.mu.Unlock()
		w.Send(declared(`"L"`, "subscriptions/listen", `"notifications":{"taskIds":["`+id+`"]}`))
		<-store.entered
		close(gt.release) // the task completes now
		synctest.Wait()
		close(store.release)
		w.Sleep(time.Minute)
		lines := w.Take()
		if !strings.Contains(strings.Join(lines, "\n"), `"method":"notifications/tasks"`) {
			t.Errorf("the task completed, the stream acknowledged taskIds, and never tells: %q", lines)
		}
		if r := tw.get(id); r["status"] != "completed" {
			t.Fatalf("status %v", r["status"])
		}
		w.Send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"L"}}`)
	})
}

// Regression: tasks/result held an ordinary handler slot for as long as
// it waited: a client waiting on MaxConcurrentRequests tasks could not
// cancel any of them. It now detaches, as a listen stream does.
func TestRegressionTasksResultGivesBackItsHandlerSlot(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := mcptest.NewServer(&server.Options{Logger: wiretest.Quiet})
		g := addGated(s, "job", optional)
		w := &legacyWire{Wire: wiretest.Start(t, s.Handler(), s.ConnOptions(&rpc.Options{MaxConcurrentRequests: 2, MaxQueuedRequests: 4}), true), t: t}
		defer w.Finish()
		defer s.Shutdown(context.Background())
		w.Exchange(legacyInit, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
		w.take()
		a, b := w.start("job", `{}`), w.start("job", `{}`)
		w.Send(legacyLine(`"ra"`, "tasks/result", taskParam(a)), legacyLine(`"rb"`, "tasks/result", taskParam(b)))
		w.Sleep(time.Second)
		w.Send(legacyLine(`"c"`, "tasks/cancel", taskParam(a)))
		w.Sleep(time.Minute)
		got := w.take()
		if len(got) == 0 {
			t.Errorf("tasks/cancel unanswered after a minute: both slots are held by tasks/result")
		}
		close(g.release)
		w.Sleep(time.Second)
		w.take()
	})
}

// Regression: on an unprotected endpoint a 2025-11-25 stateless client
// listed every anonymous client's tasks, and so read their results: the
// id was no longer a capability. An anonymous stateless request now lists
// nothing.
func TestRegressionAnAnonymousStatelessClientListsNoOneElsesTasks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := mcptest.NewServer(&server.Options{Logger: wiretest.Quiet})
		defer s.Shutdown(context.Background())
		s.AddTool(mcp.Tool{Name: "secret", Execution: optional}, func(context.Context, *server.ToolRequest) (*mcp.ToolResult, error) {
			return mcp.TextResult("alice's secret"), nil
		})
		h := streamable.NewHandler(s, &streamable.Options{Logger: wiretest.Quiet})
		defer h.Shutdown(context.Background())
		post := inProcess(t.Context(), h)
		legacy := map[string]string{mcp.HeaderProtocolVersion: "2025-11-25", mcp.HeaderMethod: "", mcp.HeaderName: ""}
		status, created := post(legacyLine("1", "tools/call", `"name":"secret","arguments":{},"task":{}`), legacy)
		t.Logf("victim: %d %s", status, created)
		synctest.Wait()
		status, list := post(legacyLine("2", "tasks/list", ""), legacy)
		t.Logf("attacker's tasks/list: %d %s", status, list)
		r := resultOf(t, list)
		ts, _ := r["tasks"].([]any)
		if len(ts) > 0 {
			id := ts[0].(map[string]any)["taskId"].(string)
			_, res := post(legacyLine("3", "tasks/result", taskParam(id)), legacy)
			t.Errorf("another anonymous client listed task %s and read: %s", id, res)
		}
		_ = http.StatusOK
	})
}
