package host

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"sync"
	"time"

	"github.com/agentwire/agentwire/jsonrpc"
	"github.com/agentwire/agentwire/mcp"
)

// TaskState is a task as the server last described it (tasks/get).
type TaskState struct {
	ID            string
	Status        string // working, input_required, completed, failed, cancelled
	StatusMessage string
	CreatedAt     time.Time
	LastUpdatedAt time.Time
	TTL           time.Duration // how long the server keeps it (0: it did not say)
	PollInterval  time.Duration // how often it suggests polling (0: it did not say)
	// InputRequests are what the task waits on (input_required, 2026-07-28
	// design), by the key an answer goes under; Params are raw JSON.
	InputRequests map[string]mcp.InputRequest
	// Result is the tool's result once completed (the 2026-07-28 design
	// inlines it; in the 2025-11-25 design Wait fetches it).
	Result *mcp.ToolResult
	// Error is the protocol error of a failed task.
	Error *jsonrpc.Error
}

// Terminal reports whether the task has ended.
func (t *TaskState) Terminal() bool {
	return t.Status == "completed" || t.Status == "failed" || t.Status == "cancelled"
}

// ErrTaskCancelled is what Wait returns for a task that was cancelled.
var ErrTaskCancelled = errors.New("mcp: the task was cancelled")

// Task is a tools/call that runs as a task on the server: a handle to
// poll, answer and cancel it. Its ID may be kept and the task resumed by
// another session (Session.ResumeTask), as long as the server keeps it.
// A Task may be used by several goroutines.
type Task struct {
	s      *Session
	id     string
	modern bool
	// result is set when the server answered the call without a task.
	result *mcp.ToolResult

	mu       sync.Mutex
	answered map[string]bool // input keys answered already (they are asked again until the server has them)
	last     *TaskState
}

// ID is the task's id; "" when the server answered the call at once,
// without a task (then Wait returns that result).
func (t *Task) ID() string { return t.id }

// Last is the state the task was last seen in (by StartTool, Get or
// Wait); nil before that.
func (t *Task) Last() *TaskState {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.last
}

// ResumeTask returns a handle to a task started earlier, perhaps by
// another session, in the design of this session's era.
func (s *Session) ResumeTask(id string) *Task {
	return &Task{s: s, id: id, modern: s.era == mcp.Modern}
}

// tasksCapabilities are the session's client capabilities with the tasks
// extension declared (2026-07-28): the server may then answer a call with
// a task.
func (s *Session) tasksCapabilities() map[string]any {
	caps := maps.Clone(s.opts.Capabilities)
	if caps == nil {
		caps = map[string]any{}
	}
	ext := map[string]any{}
	if e, ok := caps["extensions"].(map[string]any); ok {
		maps.Copy(ext, e)
	}
	ext[mcp.ExtensionTasks] = map[string]any{}
	caps["extensions"] = ext
	return caps
}

// taskRequest sends a tasks/* request (or a task-augmented call), with
// the tasks extension declared in the modern era.
func (s *Session) taskRequest(ctx context.Context, method string, params map[string]any) (json.RawMessage, error) {
	var extra map[string]any
	if s.era == mcp.Modern {
		extra = map[string]any{mcp.MetaClientCapabilities: s.tasksCapabilities()}
	}
	p, err := s.withMeta(params, extra)
	if err != nil {
		return nil, err
	}
	res, err := s.t.Call(ctx, method, p, nil)
	if err != nil {
		s.forgetOn(err)
		return nil, err
	}
	if method == mcp.MethodToolsCall {
		return s.answerInput(ctx, method, p, res, nil)
	}
	return res, nil
}

// serverOffersTasks reports whether a 2026-07-28 server advertised the
// tasks extension (capabilities.extensions in server/discover).
func (s *Session) serverOffersTasks() bool {
	var c struct {
		Extensions map[string]json.RawMessage `json:"extensions"`
	}
	if s.era != mcp.Modern || json.Unmarshal(s.capabilities, &c) != nil {
		return false
	}
	_, ok := c.Extensions[mcp.ExtensionTasks]
	return ok
}

// serverOffersLegacyTasks reports whether a 2025-11-25 server said it
// takes task-augmented tools/call (capabilities.tasks.requests.tools.call).
func (s *Session) serverOffersLegacyTasks() bool {
	var c struct {
		Tasks *struct {
			Requests struct {
				Tools struct {
					Call json.RawMessage `json:"call"`
				} `json:"tools"`
			} `json:"requests"`
		} `json:"tasks"`
	}
	return json.Unmarshal(s.capabilities, &c) == nil && c.Tasks != nil && len(c.Tasks.Requests.Tools.Call) > 0
}

// StartTool calls a tool so that it may run as a task: in the 2026-07-28
// era the request declares the tasks extension (the server decides); in
// the 2025-11-25 era it carries params.task when the server offers tasks.
// A server that answers at once gives a Task with no ID whose Wait
// returns the result. Input the server asks for before it makes the task
// (2026-07-28 multi-round-trip) is answered by Options.OnInput.
func (s *Session) StartTool(ctx context.Context, name string, args any, opts ...CallOption) (*Task, error) {
	if args == nil {
		args = map[string]any{}
	}
	params := map[string]any{"name": name, "arguments": args}
	if s.era != mcp.Modern && s.serverOffersLegacyTasks() {
		params["task"] = map[string]any{}
	}
	res, err := s.taskRequest(ctx, mcp.MethodToolsCall, params)
	if err != nil {
		return nil, err
	}
	return s.taskOrResult(res)
}

// taskOrResult reads a tools/call result that may be a task.
func (s *Session) taskOrResult(res json.RawMessage) (*Task, error) {
	var probe struct {
		ResultType string          `json:"resultType"`
		TaskID     string          `json:"taskId"`
		Task       json.RawMessage `json:"task"`
	}
	if err := json.Unmarshal(res, &probe); err != nil {
		return nil, fmt.Errorf("mcp: tools/call: %w", err)
	}
	switch {
	case probe.ResultType == mcp.ResultTypeTask && probe.TaskID != "":
		st, err := parseTaskState(res)
		if err != nil {
			return nil, err
		}
		return &Task{s: s, id: st.ID, modern: true, last: st}, nil
	case s.era != mcp.Modern && len(probe.Task) > 0 && probe.Task[0] == '{':
		st, err := parseTaskState(probe.Task)
		if err != nil {
			return nil, err
		}
		return &Task{s: s, id: st.ID, modern: false, last: st}, nil
	}
	var r mcp.ToolResult
	if err := json.Unmarshal(res, &r); err != nil {
		return nil, fmt.Errorf("mcp: tools/call: %w", err)
	}
	return &Task{s: s, result: &r}, nil
}

// isTaskResult reports whether a tools/call result is a task rather than
// the tool's result.
func isTaskResult(res json.RawMessage, modern bool) bool {
	found := false
	jsonrpc.EachMember(res, func(key, value []byte) bool {
		switch {
		case string(key) == "resultType":
			if v, ok := jsonrpc.StringBytes(value); ok && string(v) == mcp.ResultTypeTask {
				found = true
				return false
			}
		case string(key) == "task" && !modern && len(value) > 0 && value[0] == '{':
			found = true
			return false
		}
		return true
	})
	return found
}

// wireTask is a task on the wire, in either design's names.
type wireTask struct {
	TaskID         string                     `json:"taskId"`
	Status         string                     `json:"status"`
	StatusMessage  string                     `json:"statusMessage"`
	CreatedAt      string                     `json:"createdAt"`
	LastUpdatedAt  string                     `json:"lastUpdatedAt"`
	TTLMs          *float64                   `json:"ttlMs"`
	PollIntervalMs *float64                   `json:"pollIntervalMs"`
	TTL            *float64                   `json:"ttl"`
	PollInterval   *float64                   `json:"pollInterval"`
	InputRequests  map[string]json.RawMessage `json:"inputRequests"`
	Result         json.RawMessage            `json:"result"`
	Error          json.RawMessage            `json:"error"`
}

func parseTaskState(raw json.RawMessage) (*TaskState, error) {
	var w wireTask
	if err := json.Unmarshal(raw, &w); err != nil {
		return nil, fmt.Errorf("mcp: malformed task: %w", err)
	}
	if w.TaskID == "" || w.Status == "" {
		return nil, fmt.Errorf("mcp: malformed task: taskId and status are required")
	}
	ms := func(a, b *float64) time.Duration {
		if a == nil {
			a = b
		}
		if a == nil || *a <= 0 {
			return 0
		}
		const most = float64(100 * 365 * 24 * time.Hour / time.Millisecond) // no overflow into a negative Duration
		return time.Duration(min(*a, most) * float64(time.Millisecond))
	}
	st := &TaskState{ID: w.TaskID, Status: w.Status, StatusMessage: w.StatusMessage,
		TTL: ms(w.TTLMs, w.TTL), PollInterval: ms(w.PollIntervalMs, w.PollInterval)}
	st.CreatedAt, _ = time.Parse(time.RFC3339Nano, w.CreatedAt)
	st.LastUpdatedAt, _ = time.Parse(time.RFC3339Nano, w.LastUpdatedAt)
	if len(w.InputRequests) > 0 {
		st.InputRequests = make(map[string]mcp.InputRequest, len(w.InputRequests))
		for k, v := range w.InputRequests {
			var ir struct {
				Method string          `json:"method"`
				Params json.RawMessage `json:"params"`
			}
			if err := json.Unmarshal(v, &ir); err != nil {
				return nil, fmt.Errorf("mcp: malformed input request %q: %w", k, err)
			}
			st.InputRequests[k] = mcp.InputRequest{Method: ir.Method, Params: ir.Params}
		}
	}
	if len(w.Result) > 0 && string(w.Result) != "null" {
		var r mcp.ToolResult
		if err := json.Unmarshal(w.Result, &r); err != nil {
			return nil, fmt.Errorf("mcp: malformed task result: %w", err)
		}
		st.Result = &r
	}
	if len(w.Error) > 0 && string(w.Error) != "null" {
		var e jsonrpc.Error
		if err := json.Unmarshal(w.Error, &e); err != nil {
			return nil, fmt.Errorf("mcp: malformed task error: %w", err)
		}
		st.Error = &e
	}
	return st, nil
}

// Get asks the server for the task's state (tasks/get).
func (t *Task) Get(ctx context.Context) (*TaskState, error) {
	if t.id == "" {
		return &TaskState{Status: "completed", Result: t.result}, nil
	}
	res, err := t.s.taskRequest(ctx, mcp.MethodTasksGet, map[string]any{"taskId": t.id})
	if err != nil {
		return nil, err
	}
	st, err := parseTaskState(res)
	if err != nil {
		return nil, err
	}
	t.mu.Lock()
	t.last = st
	t.mu.Unlock()
	return st, nil
}

// Update answers some of the task's input requests (tasks/update,
// 2026-07-28 design), by key. Keys the server does not wait on are
// ignored by it.
func (t *Task) Update(ctx context.Context, answers map[string]any) error {
	if !t.modern {
		return fmt.Errorf("mcp: tasks/update is a 2026-07-28 method; a 2025-11-25 task asks for input during tasks/result (Wait)")
	}
	_, err := t.s.taskRequest(ctx, mcp.MethodTasksUpdate, map[string]any{"taskId": t.id, "inputResponses": answers})
	return err
}

// Cancel asks the server to cancel the task (tasks/cancel). Cancelling a
// task that has ended is not an error in the 2026-07-28 design; a
// 2025-11-25 server refuses it (-32602).
func (t *Task) Cancel(ctx context.Context) error {
	if t.id == "" {
		return nil
	}
	_, err := t.s.taskRequest(ctx, mcp.MethodTasksCancel, map[string]any{"taskId": t.id})
	return err
}

// Wait waits for the task to end and returns its result: a completed
// task's result (which may have IsError set), a failed task's protocol
// error as a *jsonrpc.Error, or ErrTaskCancelled. Input the task asks
// for is answered by Options.OnInput, each request once. In the
// 2026-07-28 design Wait polls tasks/get at the server's pollIntervalMs
// (at least every 10 ms, at most every 30 s), and sooner when a listen
// stream (opened for the wait where the server advertises the extension)
// tells of a change, calling onStatus (if not nil) with every state that
// differs from the one before; in the 2025-11-25 design it waits in tasks/result, on which the server asks
// for input. Cancelling ctx stops the waiting, not the task.
func (t *Task) Wait(ctx context.Context, onStatus func(*TaskState)) (*mcp.ToolResult, error) {
	if t.id == "" {
		return t.result, nil
	}
	if !t.modern {
		return t.waitLegacy(ctx, onStatus)
	}
	// Where the server offers it, a listen stream tells of every change,
	// so the wait ends as soon as the task does; polling goes on beside
	// it at the server's interval.
	wake := make(chan struct{}, 1)
	if t.s.serverOffersTasks() {
		lctx, stopListen := context.WithCancel(ctx)
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			sub, err := t.s.Listen(lctx, ListenFilter{TaskIDs: []string{t.id}}, func(method string, _ json.RawMessage) {
				if method == mcp.MethodTasksNotification {
					select {
					case wake <- struct{}{}:
					default:
					}
				}
			})
			if err != nil {
				return
			}
			// A change before the stream was open is not told: look again.
			select {
			case wake <- struct{}{}:
			default:
			}
			<-lctx.Done()
			sub.Close()
		}()
		defer func() { stopListen(); wg.Wait() }()
	}
	var prev *TaskState
	for {
		st, err := t.Get(ctx)
		if err != nil {
			return nil, err
		}
		if onStatus != nil && (prev == nil || prev.Status != st.Status || prev.StatusMessage != st.StatusMessage || len(prev.InputRequests) != len(st.InputRequests)) {
			onStatus(st)
		}
		prev = st
		switch st.Status {
		case "completed":
			if st.Result == nil {
				return nil, fmt.Errorf("mcp: task %s completed without a result", t.id)
			}
			return st.Result, nil
		case "failed":
			if st.Error != nil {
				return nil, st.Error
			}
			return nil, fmt.Errorf("mcp: task %s failed", t.id)
		case "cancelled":
			return nil, ErrTaskCancelled
		case "input_required":
			if err := t.answerInputs(ctx, st); err != nil {
				return nil, err
			}
		}
		wait := min(max(st.PollInterval, 10*time.Millisecond), 30*time.Second)
		if st.PollInterval == 0 {
			wait = time.Second
		}
		timer := time.NewTimer(wait)
		select {
		case <-timer.C:
		case <-wake:
			timer.Stop()
		case <-ctx.Done():
			timer.Stop()
			return nil, ctx.Err()
		}
	}
}

// answerInputs answers, through OnInput, the requests of st not answered
// before, and sends the answers (tasks/update).
func (t *Task) answerInputs(ctx context.Context, st *TaskState) error {
	on := t.s.opts.OnInput
	if on == nil {
		return fmt.Errorf("%w: task %s waits on input and Options.OnInput is nil", mcp.ErrInputRequired, t.id)
	}
	answers := map[string]any{}
	t.mu.Lock()
	if t.answered == nil {
		t.answered = map[string]bool{}
	}
	var todo []string
	for k := range st.InputRequests {
		if !t.answered[k] {
			todo = append(todo, k)
		}
	}
	t.mu.Unlock()
	for _, k := range todo {
		a, err := on(ctx, st.InputRequests[k])
		if err != nil {
			return fmt.Errorf("mcp: answering %s for task %s: %w", st.InputRequests[k].Method, t.id, err)
		}
		answers[k] = a
	}
	if len(answers) == 0 {
		return nil
	}
	if err := t.Update(ctx, answers); err != nil {
		return err
	}
	t.mu.Lock()
	for k := range answers {
		t.answered[k] = true
	}
	t.mu.Unlock()
	return nil
}

// waitLegacy is Wait for a 2025-11-25 task: tasks/result, which the
// server answers once the task has ended.
func (t *Task) waitLegacy(ctx context.Context, onStatus func(*TaskState)) (*mcp.ToolResult, error) {
	if onStatus != nil {
		if st, err := t.Get(ctx); err == nil {
			onStatus(st)
		}
	}
	res, err := t.s.taskRequest(ctx, mcp.MethodTasksResult, map[string]any{"taskId": t.id})
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	// What tasks/result answers for a cancelled task differs between
	// servers (an error, or an empty result): the status says.
	st, gerr := t.Get(ctx)
	if gerr == nil {
		if onStatus != nil {
			onStatus(st)
		}
		if st.Status == "cancelled" {
			return nil, ErrTaskCancelled
		}
	}
	if err != nil {
		return nil, err
	}
	var r mcp.ToolResult
	if err := json.Unmarshal(res, &r); err != nil {
		return nil, fmt.Errorf("mcp: tasks/result: %w", err)
	}
	return &r, nil
}

// requiresTasks reports whether err refuses a call for want of a task: a
// 2026-07-28 server's -32021 asking for the tasks extension, or a
// 2025-11-25 server's -32601 when it offers tasks (the tool's
// execution.taskSupport is required).
func (s *Session) requiresTasks(err error) bool {
	var je *jsonrpc.Error
	if !errors.As(err, &je) {
		return false
	}
	if s.era != mcp.Modern {
		return je.Code == jsonrpc.CodeMethodNotFound && s.serverOffersLegacyTasks()
	}
	if je.Code != mcp.CodeMissingRequiredClientCapability {
		return false
	}
	var d struct {
		RequiredCapabilities struct {
			Extensions map[string]json.RawMessage `json:"extensions"`
		} `json:"requiredCapabilities"`
	}
	b, _ := json.Marshal(je.Data)
	if json.Unmarshal(b, &d) != nil {
		return false
	}
	_, ok := d.RequiredCapabilities.Extensions[mcp.ExtensionTasks]
	return ok
}

// waitOrCancel is Wait for a call the caller made as an ordinary one
// (CallTool): when the caller gives up, the task is cancelled too, as
// cancelling a call's context cancels the call.
func (t *Task) waitOrCancel(ctx context.Context) (*mcp.ToolResult, error) {
	res, err := t.Wait(ctx, nil)
	if err != nil && ctx.Err() != nil && t.id != "" {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		t.Cancel(cctx)
		cancel()
	}
	return res, err
}
