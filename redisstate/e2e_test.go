package redisstate

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/agentwire/agentwire/mcp"
	"github.com/agentwire/agentwire/mcp/server"
	"github.com/agentwire/agentwire/mcp/streamable"
)

const e2eMeta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"raw","version":"1"},"io.modelcontextprotocol/clientCapabilities":{"elicitation":{},"extensions":{"io.modelcontextprotocol/tasks":{}}}}`

// instance is one server of the fleet: a server.Server on a State,
// behind its own Streamable HTTP endpoint.
type instance struct {
	srv *server.Server
	url string
	// cancelled receives the cause a confirm handler's context ended with.
	cancelled chan error
	answered  chan string
}

func startInstance(t *testing.T, st *State) *instance {
	t.Helper()
	in := &instance{cancelled: make(chan error, 4), answered: make(chan string, 4)}
	s := server.New(mcp.Implementation{Name: "fleet", Version: "1"}, &server.Options{
		Logger:    quiet,
		Tasks:     &server.TaskOptions{Store: st.Tasks(), PollInterval: 20 * time.Millisecond},
		Bus:       st.Bus(),
		StateKeys: st.Keys(&KeyOptions{Refresh: 200 * time.Millisecond}),
	})
	// confirm runs as a task: it asks, then works until it is cancelled.
	s.AddTool(mcp.Tool{Name: "confirm", Execution: &mcp.ToolExecution{TaskSupport: mcp.TaskRequired}}, func(ctx context.Context, r *server.ToolRequest) (*mcp.ToolResult, error) {
		res, err := r.Elicit(ctx, "ok", "Go ahead?", map[string]any{"type": "object", "properties": map[string]any{"ok": map[string]any{"type": "boolean"}}})
		if err != nil {
			return nil, err
		}
		in.answered <- res.Action
		r.SetStatusMessage("answered " + res.Action)
		<-ctx.Done()
		in.cancelled <- context.Cause(ctx)
		return nil, ctx.Err()
	})
	// greet asks over two rounds of a multi-round-trip request (no task).
	s.AddTool(mcp.Tool{Name: "greet"}, func(ctx context.Context, r *server.ToolRequest) (*mcp.ToolResult, error) {
		r.SetState([]byte("round-1"))
		res, err := r.Elicit(ctx, "who", "Your name?", map[string]any{"type": "object", "properties": map[string]any{"name": map[string]any{"type": "string"}}})
		if err != nil {
			return nil, err
		}
		return mcp.TextResult(fmt.Sprintf("hello %v (state %s)", res.Content["name"], r.State())), nil
	})
	s.AddResource(mcp.Resource{URI: "test://r", Name: "r"}, func(ctx context.Context, _ *server.ReadRequest) ([]mcp.ResourceContents, error) {
		return []mcp.ResourceContents{{URI: "test://r", Text: "x"}}, nil
	})
	h := streamable.NewHandler(s, &streamable.Options{Logger: quiet})
	web := httptest.NewServer(h)
	in.srv, in.url = s, web.URL+"/mcp"
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		h.Shutdown(ctx)
		web.Close()
		s.Shutdown(ctx)
	})
	return in
}

// post sends one JSON-RPC request as its own HTTP POST and returns the
// answer (the last event of an event stream).
func post(t *testing.T, url string, id any, method, params, name string) string {
	t.Helper()
	idJSON, _ := json.Marshal(id)
	body := fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"method":%q,"params":{%s,%s}}`, idJSON, method, e2eMeta, params)
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", method)
	if name != "" {
		req.Header.Set("Mcp-Name", name)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	s := strings.TrimSpace(string(b))
	if strings.Contains(s, "data: ") {
		lines := strings.Split(s, "\n")
		for j := len(lines) - 1; j >= 0; j-- {
			if d, ok := strings.CutPrefix(lines[j], "data: "); ok {
				return d
			}
		}
	}
	return s
}

type taskView struct {
	Result struct {
		ResultType    string                     `json:"resultType"`
		TaskID        string                     `json:"taskId"`
		Status        string                     `json:"status"`
		StatusMessage string                     `json:"statusMessage"`
		InputRequests map[string]json.RawMessage `json:"inputRequests"`
		RequestState  string                     `json:"requestState"`
		Content       []struct {
			Text string `json:"text"`
		} `json:"content"`
	} `json:"result"`
	Error *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

func view(t *testing.T, body string) taskView {
	t.Helper()
	var v taskView
	if err := json.Unmarshal([]byte(body), &v); err != nil {
		t.Fatalf("not JSON: %s", body)
	}
	return v
}

// Issue 18 end to end: two server instances, each on its own State over
// one Redis and behind its own HTTP endpoint, every request a POST of its
// own. A task created through A is polled, answered and cancelled through
// B (A's handler gets the answer and the cancellation); a resource
// updated on A reaches a listen stream held by B; a multi-round-trip
// request sealed by A is retried on B and verifies, before and after a
// key rotation.
func TestTwoServersOnOneRedisServeOneFleet(t *testing.T) {
	t.Parallel()
	r := startRedis(t)
	stA, stB := newState(t, r, Options{}), newState(t, r, Options{})
	waitListening(t, stA)
	waitListening(t, stB)
	a, b := startInstance(t, stA), startInstance(t, stB)

	t.Run("a task created on A is polled, answered and cancelled on B", func(t *testing.T) {
		created := view(t, post(t, a.url, 1, "tools/call", `"name":"confirm","arguments":{}`, "confirm"))
		id := created.Result.TaskID
		if created.Result.ResultType != "task" || id == "" {
			t.Fatalf("not a task: %+v", created)
		}
		var key string
		eventually(t, 10*time.Second, "B sees the task ask for input", func() bool {
			v := view(t, post(t, b.url, 2, "tasks/get", `"taskId":"`+id+`"`, id))
			for k := range v.Result.InputRequests {
				key = k
			}
			return v.Result.Status == "input_required" && key != ""
		})
		ack := post(t, b.url, 3, "tasks/update", `"taskId":"`+id+`","inputResponses":{"`+key+`":{"action":"accept","content":{"ok":true}}}`, id)
		if v := view(t, ack); v.Error != nil || v.Result.ResultType != "complete" {
			t.Fatalf("tasks/update on B: %s", ack)
		}
		select {
		case action := <-a.answered:
			if action != "accept" {
				t.Errorf("A's handler got %q", action)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("the answer given on B never reached A's handler")
		}
		eventually(t, 10*time.Second, "B sees the task working again", func() bool {
			v := view(t, post(t, b.url, 4, "tasks/get", `"taskId":"`+id+`"`, id))
			return v.Result.Status == "working" && v.Result.StatusMessage == "answered accept"
		})
		if ack := post(t, b.url, 5, "tasks/cancel", `"taskId":"`+id+`"`, id); view(t, ack).Result.ResultType != "complete" {
			t.Fatalf("tasks/cancel on B: %s", ack)
		}
		select {
		case cause := <-a.cancelled:
			if !errors.Is(cause, server.ErrTaskCancelled) {
				t.Errorf("A's handler stopped with %v, want ErrTaskCancelled", cause)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("the cancel made on B never stopped A's handler")
		}
		if v := view(t, post(t, a.url, 6, "tasks/get", `"taskId":"`+id+`"`, id)); v.Result.Status != "cancelled" {
			t.Errorf("A reads the task %+v", v.Result)
		}
	})

	t.Run("a resource updated on A reaches a listen stream on B", func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		body := `{"jsonrpc":"2.0","id":"L","method":"subscriptions/listen","params":{` + e2eMeta + `,"notifications":{"resourceSubscriptions":["test://r"]}}}`
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, b.url, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("MCP-Protocol-Version", "2026-07-28")
		req.Header.Set("Mcp-Method", "subscriptions/listen")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		events := make(chan string, 16)
		go func() {
			defer close(events)
			sc := bufio.NewScanner(resp.Body)
			for sc.Scan() {
				if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
					events <- d
				}
			}
		}()
		next := func(what string) string {
			t.Helper()
			select {
			case ev, ok := <-events:
				if !ok {
					t.Fatalf("the listen stream ended before %s", what)
				}
				return ev
			case <-time.After(10 * time.Second):
				t.Fatalf("no %s on B's listen stream", what)
				return ""
			}
		}
		if ack := next("acknowledgment"); !strings.Contains(ack, "notifications/subscriptions/acknowledged") {
			t.Fatalf("first event %s", ack)
		}
		a.srv.ResourceUpdated("test://r")
		if ev := next("update"); !strings.Contains(ev, `"method":"notifications/resources/updated"`) || !strings.Contains(ev, `"uri":"test://r"`) {
			t.Fatalf("B's stream after A's update: %s", ev)
		}
		if st := b.srv.BusStats(); st.Received < 1 {
			t.Errorf("B's bus stats %+v", st)
		}
	})

	t.Run("a multi-round-trip request sealed on A verifies on B", func(t *testing.T) {
		retry := func(state string) string {
			return post(t, b.url, 12, "tools/call", `"name":"greet","arguments":{},"inputResponses":{"who":{"action":"accept","content":{"name":"Ada"}}},"requestState":"`+state+`"`, "greet")
		}
		round1 := func() string {
			v := view(t, post(t, a.url, 11, "tools/call", `"name":"greet","arguments":{}`, "greet"))
			if v.Result.ResultType != "input_required" || v.Result.RequestState == "" || v.Result.InputRequests["who"] == nil {
				t.Fatalf("round 1 on A: %+v", v)
			}
			return v.Result.RequestState
		}
		state := round1()
		if got := retry(state); !strings.Contains(got, `hello Ada (state round-1)`) {
			t.Fatalf("the retry on B: %s", got)
		}
		// Sealed before a rotation, retried after it.
		sealed := round1()
		if err := stA.RotateKeys(t.Context()); err != nil {
			t.Fatal(err)
		}
		if got := retry(sealed); !strings.Contains(got, `hello Ada (state round-1)`) {
			t.Fatalf("a retry sealed before the rotation: %s", got)
		}
		// Sealed right after it (B may not have read the new key yet).
		if got := retry(round1()); !strings.Contains(got, `hello Ada (state round-1)`) {
			t.Fatalf("a retry sealed right after the rotation: %s", got)
		}
		// Tampered: refused.
		if v := view(t, retry(state+"x")); v.Error == nil || v.Error.Code != -32602 {
			t.Fatalf("a tampered state: %+v", v)
		}
	})
}
