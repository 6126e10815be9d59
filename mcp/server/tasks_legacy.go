package server

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"slices"
	"time"

	"github.com/agentwire/agentwire/jsonrpc"
	"github.com/agentwire/agentwire/mcp"
	"github.com/agentwire/agentwire/mcp/tasks"
	"github.com/agentwire/agentwire/rpc"
)

// The 2025-11-25 design of tasks: tasks/get, tasks/result (which waits
// for the end, and is where a task that needs input asks for it),
// tasks/list and tasks/cancel. The tasks are the same tasks as the
// extension's, in the same store; each is read back only in the design
// it was created in.

func (ss *session) legacyTasks(ctx context.Context, req *rpc.Request, p *mcp.RequestParams) (any, error) {
	rt := ss.srv.tasks
	if req.Method == mcp.MethodTasksList {
		cursor := ""
		if p.Cursor != nil {
			c, ok := jsonrpc.StringValue(p.Cursor)
			if !ok {
				return nil, mcp.InvalidParams("invalid params: cursor must be a string")
			}
			cursor = c
		}
		owner, scope := ownerOf(ctx), ss.listScope()
		list := []any{}
		next := ""
		if owner != "" || scope != "" {
			ts, n, err := rt.store.List(ctx, owner, scope, cursor, max(ss.srv.opts.PageSize, 0))
			if errors.Is(err, tasks.ErrInvalidCursor) {
				return nil, mcp.InvalidParams("invalid params: invalid cursor")
			}
			if err != nil {
				return nil, rt.storeError("tasks/list", err)
			}
			for _, t := range ts {
				if t.Design == mcp.LatestLegacyVersion {
					list = append(list, taskFields(t))
				}
			}
			next = n
		}
		r := map[string]any{"tasks": list}
		if next != "" {
			r["nextCursor"] = next
		}
		return r, nil
	}
	tp, err := parseTaskParams(req.Params)
	if err != nil {
		return nil, err
	}
	t, err := ss.findTask(ctx, *tp.TaskID, mcp.LatestLegacyVersion)
	if err != nil {
		return nil, err
	}
	switch req.Method {
	case mcp.MethodTasksGet:
		return taskFields(t), nil
	case mcp.MethodTasksCancel:
		if t.Status.Terminal() {
			return nil, mcp.InvalidParams("invalid params: task %q has already ended (%s) and cannot be cancelled", t.ID, t.Status)
		}
		if err := rt.cancelTask(ctx, t.ID); err != nil {
			return nil, err
		}
		if t, err = rt.store.Get(ctx, t.ID); err != nil {
			return nil, err
		}
		return taskFields(t), nil
	}
	return ss.taskResult(ctx, req, t)
}

// relatedTask is the _meta that ties a message to its task.
func relatedTask(id string) map[string]any {
	return map[string]any{mcp.MetaRelatedTask: map[string]any{"taskId": id}}
}

// taskResult serves 2025-11-25 tasks/result: it waits until the task has
// ended and returns exactly what the call would have (its result, or its
// error). While the task waits on input, the requests are sent to the
// client on this request's connection, as requests of the server's own
// tied to the task, and the answers go to the task.
func (ss *session) taskResult(ctx context.Context, req *rpc.Request, t *tasks.Task) (any, error) {
	rt := ss.srv.tasks
	// A wait that lives until the task ends: it gives back its handler
	// slot and counts against the connection's streams, as a listen
	// stream does, so that waiting on many tasks cannot starve the
	// connection's other requests (a tasks/cancel among them).
	if err := req.Detach(); err != nil {
		return nil, err
	}
	// The id, apart from t: t is read again at every turn, and the
	// goroutines carrying input requests outlive a turn.
	id := t.ID
	w, err := rt.watch([]string{id}, t.Owner)
	if err != nil {
		return nil, err
	}
	defer rt.unwatch(w)
	recheck := time.NewTicker(2 * time.Second)
	defer recheck.Stop()
	for {
		if t, err = rt.store.Get(ctx, id); err != nil {
			if errors.Is(err, tasks.ErrNotFound) {
				return nil, mcp.InvalidParams("invalid params: the task %q has expired", truncateID(id))
			}
			return nil, rt.storeError("tasks/result", err)
		}
		switch {
		case t.Status == tasks.Completed || (t.Status == tasks.Failed && len(t.Result) > 0):
			var res map[string]any
			if err := json.Unmarshal(t.Result, &res); err != nil {
				return nil, err
			}
			meta, _ := res["_meta"].(map[string]any)
			if meta == nil {
				meta = map[string]any{}
			}
			maps.Copy(meta, relatedTask(t.ID))
			res["_meta"] = meta
			return res, nil
		case t.Status == tasks.Failed:
			var je jsonrpc.Error
			if err := json.Unmarshal(t.Error, &je); err != nil || je.Code == 0 {
				return nil, jsonrpc.NewError(jsonrpc.CodeInternalError, "Internal error: the task failed", relatedTask(t.ID))
			}
			return nil, &je
		case t.Status == tasks.Cancelled:
			return nil, jsonrpc.NewError(jsonrpc.CodeInternalError, "the task was cancelled", relatedTask(t.ID))
		case t.Status == tasks.InputRequired:
			keys := slices.Sorted(maps.Keys(t.InputRequests))
			for _, k := range keys {
				// One request out per question, whichever tasks/result
				// (of however many waiting) carries it.
				if !rt.startAsking(id, k) {
					continue
				}
				var ir struct {
					Method string         `json:"method"`
					Params map[string]any `json:"params"`
				}
				if err := json.Unmarshal(t.InputRequests[k], &ir); err != nil {
					rt.doneAsking(id, k)
					continue
				}
				if ir.Params == nil {
					ir.Params = map[string]any{}
				}
				ir.Params["_meta"] = relatedTask(id)
				go func() {
					defer rt.doneAsking(id, k)
					res, err := req.Conn().Call(ctx, ir.Method, ir.Params)
					var je *jsonrpc.Error
					if errors.As(err, &je) {
						// Refused: the handler that asked is told.
						rt.refuse(context.WithoutCancel(ctx), id, k, je)
						return
					}
					if err != nil {
						// Not answered (the client went away): asked again
						// on the next tasks/result.
						ss.srv.opts.Logger.Info("mcp: a task's input request got no answer", "task", id, "method", ir.Method, "error", err)
						return
					}
					rt.answer(context.WithoutCancel(ctx), id, map[string]json.RawMessage{k: res})
				}()
			}
		}
		select {
		case <-w.ready:
			w.take()
		case <-recheck.C:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// refuse files the client's refusal of one of the task's input requests,
// for the handler's Ask to return.
func (rt *taskRuntime) refuse(ctx context.Context, id, key string, je *jsonrpc.Error) {
	obj, _ := json.Marshal(je)
	rt.store.Update(ctx, id, func(t *tasks.Task) error {
		if _, ok := t.InputRequests[key]; !ok || t.Status.Terminal() {
			return errNothingTaken
		}
		delete(t.InputRequests, key)
		if t.Refusals == nil {
			t.Refusals = map[string]json.RawMessage{}
		}
		t.Refusals[key] = obj
		if len(t.InputRequests) == 0 && t.Status == tasks.InputRequired {
			t.Status = tasks.Working
		}
		t.LastUpdatedAt = rt.opts.Now().UTC()
		return nil
	})
}

// startAsking claims the sending of a task's input request (key) to a
// client; false when another tasks/result has it out already.
func (rt *taskRuntime) startAsking(id, key string) bool {
	k := id + "\x00" + key
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if rt.asking[k] {
		return false
	}
	rt.asking[k] = true
	return true
}

func (rt *taskRuntime) doneAsking(id, key string) {
	rt.mu.Lock()
	delete(rt.asking, id+"\x00"+key)
	rt.mu.Unlock()
}
