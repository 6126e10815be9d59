package server

import (
	"context"
	"errors"
	"time"

	"github.com/agentwire/agentwire/mcp"
	"github.com/agentwire/agentwire/mcp/tasks"
	"github.com/agentwire/agentwire/rpc"
)

// statusNotifyTimeout bounds one status notification to a peer that does
// not read: it is dropped, the task goes on.
const statusNotifyTimeout = 10 * time.Second

// statusRecheck is how often a followed task is read again.
const statusRecheck = 30 * time.Second

// tellStatus sends 2025-11-25 notifications/tasks/status to conn at every
// change of the task's status, until the task ends or conn's input does
// ("Receivers MAY send notifications/tasks/status ... when a task's
// status changes"). It is called before the task is announced, so the
// watch sees every change from its first.
func (rt *taskRuntime) tellStatus(conn *rpc.Conn, t *tasks.Task) {
	w, err := rt.watch([]string{t.ID}, t.Owner)
	if err != nil {
		rt.log.Warn("mcp: task status notifications are off for a task", "task", t.ID, "error", err)
		return
	}
	go func() {
		defer rt.unwatch(w)
		last := t.Status
		id := t.ID
		// A store may lose events: the task is read again now and then,
		// so that its end is told (and this goroutine ends) all the same.
		recheck := time.NewTicker(statusRecheck)
		defer recheck.Stop()
		for {
			var changed []*tasks.Task
			select {
			case <-w.ready:
				changed = w.take()
			case <-recheck.C:
				ctx, cancel := context.WithTimeout(context.Background(), statusNotifyTimeout)
				t, err := rt.store.Get(ctx, id)
				cancel()
				if errors.Is(err, tasks.ErrNotFound) {
					return
				}
				if err == nil {
					changed = []*tasks.Task{t}
				}
			case <-conn.InputDone():
				return
			}
			for _, t := range changed {
				if t.Status == last {
					continue // another change (a status message, an answer): no new status
				}
				last = t.Status
				ctx, cancel := context.WithTimeout(context.Background(), statusNotifyTimeout)
				err := conn.Notify(ctx, mcp.MethodTasksStatus, taskFields(t))
				cancel()
				if err != nil {
					rt.log.Info("mcp: a task status notification was not sent", "task", t.ID, "error", err)
				}
				if t.Status.Terminal() {
					return
				}
			}
		}
	}()
}
