package server

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentwire/agentwire/jsonrpc"
	"github.com/agentwire/agentwire/mcp"
	"github.com/agentwire/agentwire/mcp/auth"
	"github.com/agentwire/agentwire/mcp/tasks"
	"github.com/agentwire/agentwire/rpc"
)

// TaskOptions configures how tools run as tasks (Options.Tasks). The zero
// value (or nil) means the documented defaults.
type TaskOptions struct {
	// Store keeps the tasks. Nil means a tasks.Memory with its defaults:
	// this process only. Give every instance behind a load balancer the
	// same shared store, so that a task created through one can be polled,
	// answered and cancelled through any.
	Store tasks.Store
	// TTL is how long a task is kept once it has ended (ttlMs on the
	// wire); a running task is never expired. Default 1 hour. A 2025-11-25
	// client may ask for its own ttl, up to MaxTTL.
	TTL time.Duration
	// MaxTTL bounds what a 2025-11-25 client may ask for. Default 24 hours.
	MaxTTL time.Duration
	// PollInterval is the interval clients are told to poll at
	// (pollIntervalMs). Default 1 second.
	PollInterval time.Duration
	// MaxRunning bounds the task handlers running in this process at
	// once. Default 1,000. Beyond it a tool that may run as a task runs
	// in its request instead, and one that must is refused (-32000,
	// counted in TaskStats.Refused).
	MaxRunning int
	// MaxRunningPerOwner bounds the task handlers one requestor runs at
	// once (its verified identity, or its stream connection; every
	// anonymous request over stateless HTTP counts as one requestor).
	// Default 100, never more than MaxRunning. Beyond it, as beyond
	// MaxRunning.
	MaxRunningPerOwner int
	// InputTimeout bounds how long a task waits on the client's answers
	// (input_required): then Ask returns ErrInputTimeout, which a handler
	// that returns it turns into a failed task. Default 1 hour.
	InputTimeout time.Duration
	// MaxListenTasks bounds the task ids one subscriptions/listen stream
	// may follow (notifications.taskIds); more is -32602. Default 100.
	MaxListenTasks int
	// Now is the clock of the tasks' timestamps; nil means time.Now.
	Now func() time.Time
}

// TaskStats counts the tasks this server has run.
type TaskStats struct {
	Created   int64 // tasks created here
	Running   int64 // task handlers running here now
	Completed int64
	Failed    int64 // ended with a protocol error (a panic included)
	Cancelled int64 // stopped by tasks/cancel
	Refused   int64 // not created: MaxRunning or MaxRunningPerOwner reached, or the store full
	Panics    int64 // task handlers that panicked
	// InputTimeouts counts the Asks that waited InputTimeout in vain.
	InputTimeouts int64
	// ListenRefused counts listen streams refused for MaxListenTasks.
	ListenRefused int64
}

// Errors a task handler's context ends with (context.Cause).
var (
	// ErrTaskCancelled: the client cancelled the task (tasks/cancel).
	ErrTaskCancelled = errors.New("mcp: the task was cancelled by the client")
	// ErrServerShutdown: Server.Shutdown stopped the task.
	ErrServerShutdown = errors.New("mcp: the server is shutting down")
	// ErrTaskEnded: the task was ended by another than its handler (a
	// shared store's sweeper that took this instance for lost): what the
	// handler would return could not be recorded.
	ErrTaskEnded = errors.New("mcp: the task was ended elsewhere (its instance was taken for lost)")
	// ErrInputTimeout: a task waited TaskOptions.InputTimeout for the
	// client's answers.
	ErrInputTimeout = errors.New("mcp: the client did not answer the task's input requests in time")
)

// taskRuntime runs the tasks of one Server: the handlers running here,
// and the one store subscription that tells them of answers and
// cancellations (which may arrive through another instance).
type taskRuntime struct {
	srv   *Server
	store tasks.Store
	opts  TaskOptions
	log   *slog.Logger

	mu       sync.Mutex
	running  map[string]*taskRun
	perOwner map[string]int                     // running handlers by requestor (owner and scope)
	watchers map[string]map[*taskWatch]struct{} // by task id
	asking   map[string]bool                    // 2025-11-25 input requests out to a client: task id, key
	closed   bool
	wg       sync.WaitGroup

	// The store subscription lives while any run or watcher needs it. It
	// is started and stopped under subMu, never under mu: a store's
	// delivery (onEvent) takes mu, and a store may wait for a delivery in
	// flight when it is stopped.
	subMu   sync.Mutex
	subRefs int
	subStop func()

	created, completed, failed, cancelled, refused, panics, inputTimeouts, listenRefused atomic.Int64
}

func newTaskRuntime(s *Server, o *TaskOptions) *taskRuntime {
	rt := &taskRuntime{srv: s, log: s.opts.Logger, running: map[string]*taskRun{}, perOwner: map[string]int{},
		watchers: map[string]map[*taskWatch]struct{}{}, asking: map[string]bool{}}
	if o != nil {
		rt.opts = *o
	}
	if rt.opts.Store == nil {
		rt.opts.Store = tasks.NewMemory(&tasks.MemoryOptions{Logger: s.opts.Logger})
	}
	rt.store = rt.opts.Store
	if rt.opts.TTL <= 0 {
		rt.opts.TTL = time.Hour
	}
	if rt.opts.MaxTTL <= 0 {
		rt.opts.MaxTTL = 24 * time.Hour
	}
	if rt.opts.PollInterval <= 0 {
		rt.opts.PollInterval = time.Second
	}
	if rt.opts.MaxRunning <= 0 {
		rt.opts.MaxRunning = 1000
	}
	if rt.opts.MaxRunningPerOwner <= 0 {
		rt.opts.MaxRunningPerOwner = 100
	}
	rt.opts.MaxRunningPerOwner = min(rt.opts.MaxRunningPerOwner, rt.opts.MaxRunning)
	if rt.opts.InputTimeout <= 0 {
		rt.opts.InputTimeout = time.Hour
	}
	if rt.opts.MaxListenTasks <= 0 {
		rt.opts.MaxListenTasks = 100
	}
	if rt.opts.Now == nil {
		rt.opts.Now = time.Now
	}
	return rt
}

// TaskStats reports what the server's tasks have done.
func (s *Server) TaskStats() TaskStats {
	rt := s.tasks
	rt.mu.Lock()
	running := int64(len(rt.running))
	rt.mu.Unlock()
	return TaskStats{Created: rt.created.Load(), Running: running, Completed: rt.completed.Load(), Failed: rt.failed.Load(),
		Cancelled: rt.cancelled.Load(), Refused: rt.refused.Load(), Panics: rt.panics.Load(), InputTimeouts: rt.inputTimeouts.Load(),
		ListenRefused: rt.listenRefused.Load()}
}

// Shutdown stops the link to Options.Bus, and the task handlers running
// in this process (their
// context ends with ErrServerShutdown; a handler that then returns an
// error leaves its task failed, one that returns a result completed) and
// waits for them until ctx is done.
// Tasks that have ended stay in the store. Later task-augmented calls run
// in their request, or are refused when the tool requires a task.
func (s *Server) Shutdown(ctx context.Context) error {
	if s.fan != nil {
		s.fan.once.Do(s.fan.stop)
	}
	rt := s.tasks
	rt.mu.Lock()
	rt.closed = true
	for _, run := range rt.running {
		run.cancel(ErrServerShutdown)
	}
	rt.mu.Unlock()
	done := make(chan struct{})
	go func() { rt.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// retain starts the store subscription when the first run or watcher
// needs it; release stops it after the last. Neither is called with mu
// held.
func (rt *taskRuntime) retain() error {
	rt.subMu.Lock()
	defer rt.subMu.Unlock()
	if rt.subStop == nil {
		subscribe := rt.store.Subscribe
		if sel, ok := rt.store.(tasks.Selective); ok {
			subscribe = func(ctx context.Context, f func(tasks.Event)) (func(), error) {
				return sel.SubscribeSelected(ctx, rt.interested, f)
			}
		}
		stop, err := subscribe(context.Background(), rt.onEvent)
		if err != nil {
			return fmt.Errorf("mcp: subscribing to the task store: %w", err)
		}
		rt.subStop = stop
	}
	rt.subRefs++
	return nil
}

func (rt *taskRuntime) release() {
	rt.subMu.Lock()
	defer rt.subMu.Unlock()
	rt.subRefs--
	if rt.subRefs == 0 && rt.subStop != nil {
		stop := rt.subStop
		rt.subStop = nil
		stop()
	}
}

// interested reports whether a change of task id concerns this server:
// a task it runs, or one a stream of its watches. (Both are registered
// before the task is created or read, so no change that concerns them is
// dropped.)
func (rt *taskRuntime) interested(id string) bool {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	return rt.running[id] != nil || len(rt.watchers[id]) > 0
}

// onEvent passes a change on to the handler running the task here (an
// answer, a cancellation) and to the listen streams watching it. What it
// acts on is taken under mu, and acted on after.
func (rt *taskRuntime) onEvent(ev tasks.Event) {
	t := ev.Task
	rt.mu.Lock()
	run := rt.running[t.ID]
	var ws []*taskWatch
	for w := range rt.watchers[t.ID] {
		if w.owner == t.Owner {
			ws = append(ws, w)
		}
	}
	rt.mu.Unlock()
	if run != nil {
		switch {
		case t.CancelRequested || t.Status == tasks.Cancelled:
			run.cancel(ErrTaskCancelled)
		case t.Status.Terminal():
			// Ended by someone else: a shared store's sweeper that took
			// this instance for lost. Nothing the handler does now can
			// land, so it stops.
			run.cancel(ErrTaskEnded)
		default:
			run.signal()
		}
	}
	for _, w := range ws {
		w.push(t)
	}
}

// ownerOf is the key a task is bound to: the verified identity of the
// request, when there is one.
func ownerOf(ctx context.Context) string { return auth.IdentityFrom(ctx).Owner() }

// newTaskID returns an unguessable id: 128 random bits, base64url.
func newTaskID() string {
	var b [16]byte
	rand.Read(b[:])
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// taskRun is one task handler running in this process.
type taskRun struct {
	rt     *taskRuntime
	id     string
	design string
	who    string // the requestor (MaxRunningPerOwner)
	cancel context.CancelCauseFunc

	mu         sync.Mutex
	changed    chan struct{}   // closed (and replaced) at a change of the task: every Ask waiting looks again
	keys       map[string]bool // input keys minted, never used twice
	pendingMsg *string         // a status message not written yet (SetStatusMessage)
	msgTimer   *time.Timer     // writes it after statusMessageDelay
}

// signal wakes every Ask of the run waiting on a change.
func (run *taskRun) signal() {
	run.mu.Lock()
	close(run.changed)
	run.changed = make(chan struct{})
	run.mu.Unlock()
}

// changes returns the channel closed at the next change.
func (run *taskRun) changes() <-chan struct{} {
	run.mu.Lock()
	defer run.mu.Unlock()
	return run.changed
}

// taskStart is what a task-augmented tools/call's request waits for: the
// task created (then it answers CreateTaskResult) or the handler done
// before it made one (then it answers as a plain call would).
type taskStart struct {
	design   string // mcp.LatestVersion or mcp.LatestLegacyVersion
	ttl      time.Duration
	required bool
	started  chan *tasks.Task // the created task, once
	run      *taskRun
	ctx      context.Context // the task's context, once started
	scope    string
	statusTo *rpc.Conn // where 2025-11-25 status notifications go, if anywhere
}

// StartTask makes the call a task, when the server decided it runs as
// one, and returns the context the handler continues under: it outlives
// the request and ends when the client cancels the task (ErrTaskCancelled)
// or the server shuts down (ErrServerShutdown). The client is answered
// with the task at once; what the handler returns becomes the task's
// result. From then on Ask and Elicit park the task as input_required
// until the client answers (tasks/update, or a 2025-11-25 tasks/result),
// and Progress and Log send nothing (SetStatusMessage tells the client
// how it goes).
//
// A tool whose Execution has DeferTask calls it after gathering input in
// the request's own rounds (2026-07-28 multi-round-trip); for any other
// task-supporting tool the server has called it before the handler. When
// the call is not a task (the tool or the client does not support one,
// or the server has no room), StartTask returns ctx and the handler goes
// on in the request.
func (r *ToolRequest) StartTask(ctx context.Context) (context.Context, error) {
	ts := r.start
	if ts == nil {
		return ctx, nil
	}
	if ts.run != nil {
		return ts.ctx, nil
	}
	rt := r.srv.tasks
	now := rt.opts.Now().UTC()
	rec := &tasks.Task{
		ID: newTaskID(), Owner: ownerOf(ctx), Scope: ts.scope, Design: ts.design, Tool: r.Name,
		Status: tasks.Working, CreatedAt: now, LastUpdatedAt: now, TTL: ts.ttl, PollInterval: rt.opts.PollInterval,
	}
	tctx, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	who := rec.Owner + "\x00" + rec.Scope
	run := &taskRun{rt: rt, id: rec.ID, design: ts.design, who: who, cancel: cancel, changed: make(chan struct{}), keys: map[string]bool{}}
	refuse := func(why string, err error) (context.Context, error) {
		cancel(nil)
		rt.refused.Add(1)
		rt.log.Warn("mcp: a task is refused", "tool", r.Name, "reason", why, "error", err)
		if ts.required {
			return ctx, jsonrpc.NewError(jsonrpc.CodeServerBusy, "server busy: cannot start a task now ("+why+")", map[string]any{"reason": "tasks_unavailable"})
		}
		r.start = nil // run in the request instead
		return ctx, nil
	}
	rt.mu.Lock()
	if rt.closed {
		rt.mu.Unlock()
		return refuse("the server is shutting down", nil)
	}
	if len(rt.running) >= rt.opts.MaxRunning {
		rt.mu.Unlock()
		return refuse(fmt.Sprintf("%d tasks running, the most allowed", rt.opts.MaxRunning), nil)
	}
	if rt.perOwner[who] >= rt.opts.MaxRunningPerOwner {
		rt.mu.Unlock()
		return refuse(fmt.Sprintf("%d tasks of this requestor running, the most allowed", rt.opts.MaxRunningPerOwner), nil)
	}
	// Registered before the store has it, so that a cancellation coming
	// right after creation finds it; counted in the wait group under the
	// same lock as closed, so that a Shutdown from now on waits for it
	// (and cancels it: it is in running).
	rt.running[rec.ID] = run
	rt.perOwner[who]++
	rt.wg.Add(1)
	rt.mu.Unlock()
	err := rt.retain()
	if err == nil {
		if err = rt.store.Create(ctx, rec); err != nil {
			rt.release()
		}
	}
	if err != nil {
		rt.mu.Lock()
		rt.forgetLocked(run)
		rt.mu.Unlock()
		rt.wg.Done()
		return refuse("the task store refused it", err)
	}
	rt.created.Add(1)
	ts.run, ts.ctx = run, tctx
	r.inputs.task = run
	if ts.statusTo != nil {
		rt.tellStatus(ts.statusTo, rec)
	}
	ts.started <- rec
	return tctx, nil
}

// forgetLocked takes a run out of the running tables.
func (rt *taskRuntime) forgetLocked(run *taskRun) {
	delete(rt.running, run.id)
	if rt.perOwner[run.who]--; rt.perOwner[run.who] <= 0 {
		delete(rt.perOwner, run.who)
	}
}

// SetStatusMessage sets the task's statusMessage (what tasks/get shows of
// how it goes). It does nothing when the call is not a task.
//
// The message reaches the store with the task's next change, or within
// statusMessageDelay: a fast task that sets one and ends costs one write,
// not two, and a handler that sets many in a loop costs a few per second.
func (r *ToolRequest) SetStatusMessage(msg string) error {
	if r.start == nil || r.start.run == nil {
		return nil
	}
	run := r.start.run
	run.mu.Lock()
	run.pendingMsg = &msg
	if run.msgTimer == nil {
		run.msgTimer = time.AfterFunc(statusMessageDelay, run.flushMessage)
	}
	run.mu.Unlock()
	return nil
}

// statusMessageDelay bounds how long a status message waits for the
// task's next change before it is written on its own.
const statusMessageDelay = 250 * time.Millisecond

// takeMessage returns the status message waiting to be written, if any.
func (run *taskRun) takeMessage() *string {
	run.mu.Lock()
	defer run.mu.Unlock()
	m := run.pendingMsg
	run.pendingMsg = nil
	if run.msgTimer != nil {
		run.msgTimer.Stop()
		run.msgTimer = nil
	}
	return m
}

// flushMessage writes a waiting status message on its own.
func (run *taskRun) flushMessage() {
	m := run.takeMessage()
	if m == nil {
		return
	}
	rt := run.rt
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := rt.store.Update(ctx, run.id, func(t *tasks.Task) error {
		if t.Status.Terminal() {
			return errTaskEnded
		}
		t.StatusMessage = *m
		t.LastUpdatedAt = rt.opts.Now().UTC()
		return nil
	}); err != nil && !errors.Is(err, errTaskEnded) {
		rt.log.Info("mcp: a task's status message was not stored", "task", run.id, "error", err)
	}
}

// inTask reports whether the handler now runs as a task (nothing more is
// sent on the request).
func (r *ToolRequest) inTask() bool { return r.start != nil && r.start.run != nil }

// finish records what the handler of a started task came to.
// panicked is what the handler panicked with, and stack where (taken
// while the panic unwound).
func (run *taskRun) finish(ctx context.Context, res *mcp.ToolResult, err error, panicked any, stack []byte) {
	rt := run.rt
	defer func() {
		rt.mu.Lock()
		rt.forgetLocked(run)
		rt.mu.Unlock()
		rt.release()
		run.cancel(nil)
		rt.wg.Done()
	}()
	status, result, errObj := tasks.Completed, json.RawMessage(nil), json.RawMessage(nil)
	cause := context.Cause(ctx)
	switch {
	case panicked != nil:
		rt.panics.Add(1)
		rt.log.Error("mcp: a task handler panicked", "task", run.id, "panic", panicked, "stack", string(stack))
		status = tasks.Failed
		errObj, _ = json.Marshal(jsonrpc.NewError(jsonrpc.CodeInternalError, fmt.Sprintf("Internal error: the tool panicked: %v", panicked),
			map[string]any{"exception": fmt.Sprintf("%T", panicked), "panic": true}))
	case errors.Is(cause, ErrTaskCancelled):
		return // tasks/cancel has recorded it
	case errors.Is(cause, ErrTaskEnded):
		rt.log.Warn("mcp: a task's outcome is dropped: the task was ended elsewhere", "task", run.id)
		return
	case err == nil:
		if res == nil {
			res = &mcp.ToolResult{}
		}
		if res.Content == nil {
			res.Content = []mcp.Content{}
		}
		result = res.AppendJSON(nil, nil)
	default:
		var je *jsonrpc.Error
		switch {
		case errors.As(err, &je):
			status = tasks.Failed
			errObj, _ = json.Marshal(je)
		case errors.Is(cause, ErrServerShutdown):
			status = tasks.Failed
			errObj, _ = json.Marshal(jsonrpc.NewError(jsonrpc.CodeInternalError, "Internal error: the server shut down before the task ended", nil))
		default:
			result = mcp.ErrorResult(err.Error()).AppendJSON(nil, nil)
		}
	}
	statusMessage := ""
	if errObj != nil {
		// "The tasks/get response SHOULD include a statusMessage field
		// with diagnostic information about the failure."
		var je jsonrpc.Error
		if json.Unmarshal(errObj, &je) == nil && je.Message != "" {
			statusMessage = je.Message
		}
	}
	if run.design == mcp.LatestLegacyVersion && result != nil && isErrorResult(result) {
		// 2025-11-25: "For tool calls specifically, [failed] includes
		// cases where the tool call result has isError set to true"
		// (tasks/result still returns that result). The extension keeps
		// it completed: failed is for protocol errors only.
		status, statusMessage = tasks.Failed, "the tool reported an error"
	}
	if pending := run.takeMessage(); pending != nil && statusMessage == "" {
		statusMessage = *pending
	}
	update := func(t *tasks.Task) error {
		if t.Status.Terminal() {
			return errTaskEnded
		}
		if statusMessage != "" {
			t.StatusMessage = statusMessage
		}
		t.Status, t.Result, t.Error = status, result, errObj
		t.InputRequests, t.Responses = nil, nil
		t.LastUpdatedAt = rt.opts.Now().UTC()
		t.EndedAt = t.LastUpdatedAt
		return nil
	}
	uerr := rt.storeOutcome(run.id, update)
	if errors.Is(uerr, tasks.ErrTooLarge) || errors.Is(uerr, tasks.ErrFull) {
		status, result = tasks.Failed, nil
		errObj, _ = json.Marshal(jsonrpc.NewError(jsonrpc.CodeInternalError, "Internal error: the task's result is larger than the task store keeps", nil))
		uerr = rt.storeOutcome(run.id, update)
	}
	switch {
	case errors.Is(uerr, errTaskEnded):
		if !errors.Is(cause, ErrTaskCancelled) {
			rt.log.Warn("mcp: a task's outcome is dropped: the task was ended elsewhere", "task", run.id, "status", status)
		}
		return
	case uerr != nil:
		// A store that leases its running tasks (tasks.Releaser) lets the
		// lease lapse, and the task ends failed as if this instance had
		// been lost: it is never left working forever.
		rt.log.Error("mcp: a task's outcome could not be stored", "task", run.id, "error", uerr)
		return
	}
	if status == tasks.Failed {
		rt.failed.Add(1)
	} else {
		rt.completed.Add(1)
	}
}

var errTaskEnded = errors.New("mcp: the task has ended")

// outcomeRetries bounds the tries of a task's outcome against a store
// that fails (a shared store's outage): the first at once, then after
// 100 ms, doubling to 5 s, about a minute in all.
const outcomeRetries = 16

// storeOutcome writes a task's outcome, trying again while the store
// fails (not when it refuses: an ended task, a result too large).
func (rt *taskRuntime) storeOutcome(id string, update func(*tasks.Task) error) error {
	wait := 100 * time.Millisecond
	var err error
	for try := range outcomeRetries {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err = rt.store.Update(ctx, id, update)
		cancel()
		if err == nil || errors.Is(err, errTaskEnded) || errors.Is(err, tasks.ErrTooLarge) || errors.Is(err, tasks.ErrFull) || errors.Is(err, tasks.ErrNotFound) {
			break
		}
		if try == 0 {
			rt.log.Warn("mcp: storing a task's outcome failed; trying again", "task", id, "error", err)
		}
		t := time.NewTimer(wait)
		<-t.C
		wait = min(wait*2, 5*time.Second)
	}
	if r, ok := rt.store.(tasks.Releaser); ok {
		r.Released(id)
	}
	return err
}

// ask parks the task as input_required with requests until the client
// has answered every one (through any instance), and returns the answers
// by the handler's keys.
func (run *taskRun) ask(ctx context.Context, requests map[string]mcp.InputRequest) (map[string]json.RawMessage, error) {
	rt := run.rt
	wire := make(map[string]string, len(requests)) // handler key -> the key the client answers
	encoded := make(map[string]json.RawMessage, len(requests))
	keys := make([]string, 0, len(requests))
	for k := range requests {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	run.mu.Lock() // handlers may Ask from several goroutines
	for _, k := range keys {
		wk := k
		for n := 2; run.keys[wk]; n++ {
			wk = fmt.Sprintf("%s~%d", k, n)
		}
		run.keys[wk] = true
		wire[k] = wk
	}
	run.mu.Unlock()
	for k, wk := range wire {
		b, err := json.Marshal(requests[k])
		if err != nil {
			return nil, fmt.Errorf("mcp: encoding the input request %q: %w", k, err)
		}
		encoded[wk] = b
	}
	pending := run.takeMessage()
	if _, err := rt.store.Update(ctx, run.id, func(t *tasks.Task) error {
		if t.Status.Terminal() {
			return errTaskEnded
		}
		if t.InputRequests == nil {
			t.InputRequests = map[string]json.RawMessage{}
		}
		for wk, b := range encoded {
			t.InputRequests[wk] = b
		}
		t.Keys += len(encoded)
		if pending != nil {
			t.StatusMessage = *pending
		}
		t.Status = tasks.InputRequired
		t.LastUpdatedAt = rt.opts.Now().UTC()
		return nil
	}); err != nil {
		return nil, taskStopped(ctx, err)
	}
	// An Ask given up (its context, the input timeout) takes its
	// questions back: the task shows only what it still waits on.
	answered := false
	defer func() {
		if !answered {
			run.withdraw(ctx, wire)
		}
	}()
	// Answers are told by the store's events; a store that can lose them
	// is read again now and then all the same.
	recheck := time.NewTicker(2 * time.Second)
	defer recheck.Stop()
	timeout := time.NewTimer(rt.opts.InputTimeout)
	defer timeout.Stop()
	for {
		changed := run.changes() // taken before the look, so no change is missed
		var out map[string]json.RawMessage
		var refused error
		_, err := rt.store.Update(ctx, run.id, func(t *tasks.Task) error {
			refused = nil
			if t.Status.Terminal() {
				return errTaskEnded
			}
			for k, wk := range wire {
				if refusal, ok := t.Refusals[wk]; ok {
					var je jsonrpc.Error
					json.Unmarshal(refusal, &je)
					for _, wk := range wire { // the question is over: its other parts too
						delete(t.Refusals, wk)
						delete(t.InputRequests, wk)
						delete(t.Responses, wk)
					}
					if len(t.InputRequests) == 0 {
						t.Status = tasks.Working
					}
					refused = fmt.Errorf("mcp: asking the client (%s): %w", requests[k].Method, &je)
					return nil
				}
			}
			for _, wk := range wire {
				if _, ok := t.Responses[wk]; !ok {
					return errNotYet
				}
			}
			out = make(map[string]json.RawMessage, len(wire))
			for k, wk := range wire {
				out[k] = t.Responses[wk]
				delete(t.Responses, wk)
			}
			if len(t.InputRequests) == 0 {
				t.Status = tasks.Working
			}
			t.LastUpdatedAt = rt.opts.Now().UTC()
			return nil
		})
		if err == nil {
			answered = true // nothing of it is left in the task
			if refused != nil {
				return nil, refused
			}
			return out, nil
		}
		if !errors.Is(err, errNotYet) {
			return nil, taskStopped(ctx, err)
		}
		select {
		case <-changed:
		case <-recheck.C:
		case <-timeout.C:
			rt.inputTimeouts.Add(1)
			rt.log.Warn("mcp: a task's input requests were not answered in time", "task", run.id, "input_timeout", rt.opts.InputTimeout)
			return nil, ErrInputTimeout
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		}
	}
}

// withdraw takes an abandoned Ask's questions (and any late answers to
// them) out of the task; a task that then waits on nothing is working.
func (run *taskRun) withdraw(ctx context.Context, wire map[string]string) {
	rt := run.rt
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	rt.store.Update(wctx, run.id, func(t *tasks.Task) error {
		if t.Status.Terminal() {
			return errTaskEnded
		}
		for _, wk := range wire {
			delete(t.InputRequests, wk)
			delete(t.Responses, wk)
			delete(t.Refusals, wk)
		}
		if len(t.InputRequests) == 0 && t.Status == tasks.InputRequired {
			t.Status = tasks.Working
		}
		t.LastUpdatedAt = rt.opts.Now().UTC()
		return nil
	})
}

var errNotYet = errors.New("mcp: not every input has been answered")

func taskStopped(ctx context.Context, err error) error {
	if c := context.Cause(ctx); c != nil {
		return c
	}
	if errors.Is(err, errTaskEnded) {
		return ErrTaskCancelled
	}
	return err
}

// ----- the task-augmented tools/call -----

// taskDesign decides whether a tools/call runs as a task, and in which
// design: "" for a plain call, or an error for a tool that must run as a
// task called by a client that cannot take one.
func (ss *session) taskDesign(t *registeredTool, req *rpc.Request, m *mcp.RequestMeta, modern bool) (*taskStart, error) {
	ex := t.tool.Execution
	if modern {
		declared := m != nil && mcp.DeclaresTasks(m.ClientCapabilities)
		if !ex.Supports() {
			return nil, nil // a sync tool: a legacy "task" hint is tolerated and ignored
		}
		if !declared {
			if ex.Requires() {
				return nil, mcp.MissingTasksExtension(fmt.Sprintf("Tool %s must run as a task: the request's client capabilities must declare the %s extension", t.tool.Name, mcp.ExtensionTasks))
			}
			return nil, nil
		}
		return &taskStart{design: mcp.LatestVersion, ttl: ss.srv.tasks.opts.TTL, required: ex.Requires(), started: make(chan *tasks.Task, 1)}, nil
	}
	// 2025-11-25: the client asks with params.task.
	var taskParam []byte
	jsonrpc.EachMember(req.Params, func(key, value []byte) bool {
		if string(key) == "task" {
			taskParam = value
			return false
		}
		return true
	})
	asked := len(taskParam) > 0 && taskParam[0] == '{'
	if !asked {
		if ex.Requires() {
			return nil, jsonrpc.Errorf(jsonrpc.CodeMethodNotFound, "tool %s must run as a task: call it with params.task (execution.taskSupport is required)", t.tool.Name)
		}
		return nil, nil
	}
	if !ex.Supports() {
		return nil, jsonrpc.Errorf(jsonrpc.CodeMethodNotFound, "tool %s does not run as a task (execution.taskSupport is forbidden): call it without params.task", t.tool.Name)
	}
	rt := ss.srv.tasks
	ttl := rt.opts.TTL
	var tp struct {
		TTL *float64 `json:"ttl"`
	}
	if json.Unmarshal(taskParam, &tp) == nil && tp.TTL != nil && *tp.TTL > 0 {
		// Compared in milliseconds before it becomes a Duration: a huge
		// ttl would overflow into a negative one.
		if ms := *tp.TTL; ms >= float64(rt.opts.MaxTTL.Milliseconds()) {
			ttl = rt.opts.MaxTTL
		} else {
			ttl = max(time.Duration(ms*float64(time.Millisecond)), time.Millisecond)
		}
	}
	// The client asked for a task: it gets one or an error, never a plain
	// result it is not waiting for.
	ts := &taskStart{design: mcp.LatestLegacyVersion, ttl: ttl, required: true, started: make(chan *tasks.Task, 1), scope: ss.listScope()}
	if !ss.stateless {
		ts.statusTo = req.Conn() // notifications/tasks/status go to the connection that made it
	}
	return ts, nil
}

// runTask runs a tools/call that may become a task: the handler on a
// goroutine of its own, and this request waiting for the task to be
// created or for the handler to end without one.
func (ss *session) runTask(ctx context.Context, t *registeredTool, tr *ToolRequest, ts *taskStart, finishPlain func(*mcp.ToolResult, error) (any, error)) (any, error) {
	tr.start, tr.srv = ts, ss.srv
	type outcome struct {
		res *mcp.ToolResult
		err error
	}
	ended := make(chan outcome, 1)
	go func() {
		hctx := ctx
		var res *mcp.ToolResult
		var err error
		var panicked any
		var stack []byte
		func() {
			defer func() {
				if p := recover(); p != nil {
					// The stack now, while the panic unwinds, is the one
					// that says where it happened.
					panicked, stack = p, debug.Stack()
				}
			}()
			if !t.tool.Execution.DeferTask {
				if hctx, err = tr.StartTask(ctx); err != nil {
					return
				}
			}
			res, err = t.handler(hctx, tr)
		}()
		if tr.inTask() {
			tr.start.run.finish(tr.start.ctx, res, err, panicked, stack)
			return
		}
		if panicked != nil {
			ss.srv.opts.Logger.Error("mcp: a tool handler panicked", "tool", t.tool.Name, "panic", panicked, "stack", string(stack))
			err = jsonrpc.NewError(jsonrpc.CodeInternalError, fmt.Sprintf("Internal error: handler panicked: %v", panicked),
				map[string]any{"exception": fmt.Sprintf("%T", panicked), "panic": true})
		}
		ended <- outcome{res, err}
	}()
	select {
	case rec := <-ts.started:
		return ss.srv.createTaskResult(rec), nil
	case o := <-ended:
		return finishPlain(o.res, o.err)
	}
}

// ----- what the wire shows of a task -----

func wireTime(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z") }

// taskFields are a task's common fields in its design's names.
func taskFields(t *tasks.Task) map[string]any {
	r := map[string]any{
		"taskId":        t.ID,
		"status":        string(t.Status),
		"createdAt":     wireTime(t.CreatedAt),
		"lastUpdatedAt": wireTime(t.LastUpdatedAt),
	}
	if t.StatusMessage != "" {
		r["statusMessage"] = t.StatusMessage
	}
	ttl, poll := max(t.TTL.Milliseconds(), 1), max(t.PollInterval.Milliseconds(), 1)
	if t.Design == mcp.LatestLegacyVersion {
		r["ttl"], r["pollInterval"] = ttl, poll
	} else {
		r["ttlMs"], r["pollIntervalMs"] = ttl, poll
	}
	return r
}

// createTaskResult answers the tools/call that created rec.
func (s *Server) createTaskResult(rec *tasks.Task) any {
	f := taskFields(rec)
	if rec.Design == mcp.LatestLegacyVersion {
		return map[string]any{"task": f}
	}
	f["resultType"] = mcp.ResultTypeTask
	f["_meta"] = map[string]any{mcp.MetaServerInfo: s.info}
	return f
}

// detailedTask is a 2026-07-28 tasks/get answer (and a notifications/tasks
// payload): the task with what its status carries inlined.
func detailedTask(t *tasks.Task) map[string]any {
	r := taskFields(t)
	switch t.Status {
	case tasks.InputRequired:
		reqs := map[string]json.RawMessage{}
		for k, v := range t.InputRequests {
			reqs[k] = v
		}
		r["inputRequests"] = reqs
	case tasks.Completed:
		r["result"] = json.RawMessage(t.Result)
	case tasks.Failed:
		r["error"] = json.RawMessage(t.Error)
	}
	return r
}

// ----- tasks/* -----

type taskParams struct {
	TaskID         *string         `json:"taskId"`
	InputResponses json.RawMessage `json:"inputResponses"`
}

func parseTaskParams(raw []byte) (taskParams, error) {
	var p taskParams
	if err := json.Unmarshal(raw, &p); err != nil {
		return p, mcp.InvalidParams("invalid params: %v", err)
	}
	if p.TaskID == nil || *p.TaskID == "" {
		return p, mcp.InvalidParams("invalid params: taskId is required")
	}
	return p, nil
}

// findTask reads a task the caller may see: an unknown id, an expired
// task and another owner's task are the same -32602 (nothing tells them
// apart, so ids cannot be probed).
func (ss *session) findTask(ctx context.Context, id string, design string) (*tasks.Task, error) {
	t, err := ss.srv.tasks.store.Get(ctx, id)
	if err == nil && (t.Owner != ownerOf(ctx) || (design != "" && t.Design != design)) {
		err = tasks.ErrNotFound
	}
	if errors.Is(err, tasks.ErrNotFound) {
		return nil, mcp.InvalidParams("invalid params: unknown task %q (never created, expired, or not yours)", truncateID(id))
	}
	if err != nil {
		return nil, ss.srv.tasks.storeError("reading a task", err)
	}
	return t, nil
}

// storeError is what a client is told of a store's failure: that it
// failed, not how (a store's error may name its hosts); the log has it.
func (rt *taskRuntime) storeError(what string, err error) error {
	rt.log.Warn("mcp: the task store failed", "doing", what, "error", err)
	return jsonrpc.NewError(jsonrpc.CodeInternalError, "Internal error: the task store is unavailable", nil)
}

func truncateID(id string) string {
	if len(id) > 64 {
		return id[:64] + "…"
	}
	return id
}

// modernTasks serves tasks/get, tasks/update and tasks/cancel (2026-07-28).
func (ss *session) modernTasks(ctx context.Context, req *rpc.Request, m *mcp.RequestMeta) (any, error) {
	if m == nil || !mcp.DeclaresTasks(m.ClientCapabilities) {
		return nil, mcp.MissingTasksExtension(fmt.Sprintf("%s needs the %s extension declared in the request's client capabilities", req.Method, mcp.ExtensionTasks))
	}
	p, err := parseTaskParams(req.Params)
	if err != nil {
		return nil, err
	}
	t, err := ss.findTask(ctx, *p.TaskID, mcp.LatestVersion)
	if err != nil {
		return nil, err
	}
	rt := ss.srv.tasks
	switch req.Method {
	case mcp.MethodTasksGet:
		return ss.modernResult(detailedTask(t)), nil
	case mcp.MethodTasksUpdate:
		var answers map[string]json.RawMessage
		if err := json.Unmarshal(p.InputResponses, &answers); err != nil || answers == nil {
			return nil, mcp.InvalidParams("invalid params: inputResponses must be an object")
		}
		for k, v := range answers {
			// As a multi-round-trip retry's answers are: each an object.
			if len(v) == 0 || v[0] != '{' {
				return nil, mcp.InvalidParams("invalid params: inputResponses[%q] must be an object", k)
			}
		}
		if err := rt.answer(ctx, t.ID, answers); errors.Is(err, tasks.ErrTooLarge) || errors.Is(err, tasks.ErrFull) {
			return nil, mcp.InvalidParams("invalid params: the answers are larger than the task may keep")
		} else if err != nil {
			return nil, rt.storeError("tasks/update", err)
		}
		return ss.modernResult(map[string]any{}), nil
	default: // tasks/cancel
		if err := rt.cancelTask(ctx, t.ID); err != nil {
			return nil, rt.storeError("tasks/cancel", err)
		}
		return ss.modernResult(map[string]any{}), nil
	}
}

// answer files the client's answers with the task's outstanding input
// requests; answers to keys it does not wait on (unknown, or answered
// already) are ignored.
func (rt *taskRuntime) answer(ctx context.Context, id string, answers map[string]json.RawMessage) error {
	_, err := rt.store.Update(ctx, id, func(t *tasks.Task) error {
		if t.Status.Terminal() {
			return errTaskEnded
		}
		took := false
		for k, v := range answers {
			if _, ok := t.InputRequests[k]; !ok || len(v) == 0 || v[0] != '{' {
				continue
			}
			if t.Responses == nil {
				t.Responses = map[string]json.RawMessage{}
			}
			t.Responses[k] = v
			delete(t.InputRequests, k)
			took = true
		}
		if !took {
			return errNothingTaken
		}
		if len(t.InputRequests) == 0 && t.Status == tasks.InputRequired {
			t.Status = tasks.Working
		}
		t.LastUpdatedAt = rt.opts.Now().UTC()
		return nil
	})
	if errors.Is(err, errTaskEnded) || errors.Is(err, errNothingTaken) {
		return nil
	}
	return err
}

var errNothingTaken = errors.New("mcp: no answer matched an outstanding input request")

// cancelTask marks a live task cancelled and stops its handler (here, or
// through the store's event, on the instance running it); an ended task
// is left as it is.
func (rt *taskRuntime) cancelTask(ctx context.Context, id string) error {
	_, err := rt.store.Update(ctx, id, func(t *tasks.Task) error {
		if t.Status.Terminal() {
			return errTaskEnded
		}
		now := rt.opts.Now().UTC()
		t.Status, t.CancelRequested = tasks.Cancelled, true
		t.StatusMessage = "cancelled by the client"
		t.InputRequests, t.Responses = nil, nil
		t.LastUpdatedAt, t.EndedAt = now, now
		return nil
	})
	if errors.Is(err, errTaskEnded) {
		return nil
	}
	if err != nil {
		return err
	}
	rt.cancelled.Add(1)
	rt.mu.Lock()
	if run := rt.running[id]; run != nil {
		run.cancel(ErrTaskCancelled)
	}
	rt.mu.Unlock()
	return nil
}

// listScope is where this connection's tasks made without an identity
// are listed (2025-11-25 tasks/list): a stream connection has its own.
// Stateless HTTP requests cannot be told apart without an identity, so
// an anonymous one lists nothing: listing every anonymous client's tasks
// to each would hand out the ids that are their only protection (protect
// the endpoint to bind tasks to who made them, and list them).
func (ss *session) listScope() string {
	if ss.stateless {
		return ""
	}
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if ss.scope == "" {
		ss.scope = "conn:" + newTaskID()
	}
	return ss.scope
}

// ----- watching tasks from a listen stream -----

// taskWatch is a listen stream's interest in some tasks: their changes,
// latest per task, waiting to be sent.
type taskWatch struct {
	ids   []string
	owner string
	mu    sync.Mutex
	next  map[string]*tasks.Task
	order []string
	ready chan struct{}
}

func (w *taskWatch) push(t *tasks.Task) {
	w.mu.Lock()
	if w.next == nil {
		w.next = map[string]*tasks.Task{}
	}
	if _, ok := w.next[t.ID]; !ok {
		w.order = append(w.order, t.ID)
	}
	w.next[t.ID] = t
	w.mu.Unlock()
	select {
	case w.ready <- struct{}{}:
	default:
	}
}

// take returns the changes waiting, oldest task first.
func (w *taskWatch) take() []*tasks.Task {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]*tasks.Task, 0, len(w.order))
	for _, id := range w.order {
		out = append(out, w.next[id])
	}
	w.next, w.order = nil, nil
	return out
}

// watch starts telling w of the changes of tasks ids (of owner's only).
// The caller then reads each task's current state: a change between the
// two is not missed.
func (rt *taskRuntime) watch(ids []string, owner string) (*taskWatch, error) {
	w := &taskWatch{ids: ids, owner: owner, ready: make(chan struct{}, 1)}
	if err := rt.retain(); err != nil {
		return nil, err
	}
	rt.mu.Lock()
	for _, id := range ids {
		m := rt.watchers[id]
		if m == nil {
			m = map[*taskWatch]struct{}{}
			rt.watchers[id] = m
		}
		m[w] = struct{}{}
	}
	rt.mu.Unlock()
	return w, nil
}

func (rt *taskRuntime) unwatch(w *taskWatch) {
	rt.mu.Lock()
	for _, id := range w.ids {
		if m := rt.watchers[id]; m != nil {
			delete(m, w)
			if len(m) == 0 {
				delete(rt.watchers, id)
			}
		}
	}
	rt.mu.Unlock()
	rt.release()
}

// hasTaskTools reports whether any tool may run as a task (the server
// then advertises the extension and the 2025-11-25 capability).
func (s *Server) hasTaskTools() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, t := range s.tools.items {
		if t.tool.Execution.Supports() {
			return true
		}
	}
	return false
}

// isErrorResult reports whether an encoded tool result has isError true.
func isErrorResult(result []byte) bool {
	is := false
	jsonrpc.EachMember(result, func(key, value []byte) bool {
		if string(key) == "isError" {
			is = string(value) == "true"
			return false
		}
		return true
	})
	return is
}
