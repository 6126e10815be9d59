package mcp

import (
	"encoding/json"

	"github.com/agentwire/agentwire/jsonrpc"
)

// Tasks: a tools/call that outlives its request. Two designs are on the
// wire. The 2026-07-28 one is an extension, io.modelcontextprotocol/tasks
// (SEP-2663, https://github.com/modelcontextprotocol/ext-tasks): the
// server decides to answer a call with a task (resultType "task") when the
// request's _meta client capabilities declare the extension, and the
// client polls tasks/get, answers input with tasks/update and cancels with
// tasks/cancel. The 2025-11-25 one is part of that revision
// (https://modelcontextprotocol.io/specification/2025-11-25/basic/utilities/tasks):
// the client asks for a task with params.task, gated by the tool's
// execution.taskSupport, and has tasks/get, tasks/result, tasks/list and
// tasks/cancel.
const (
	ExtensionTasks = "io.modelcontextprotocol/tasks"

	MethodTasksGet    = "tasks/get"
	MethodTasksUpdate = "tasks/update"
	MethodTasksCancel = "tasks/cancel"
	MethodTasksResult = "tasks/result" // 2025-11-25 only
	MethodTasksList   = "tasks/list"   // 2025-11-25 only
	// MethodTasksNotification is the 2026-07-28 status notification, sent
	// on a subscriptions/listen stream that asked for the task's id.
	MethodTasksNotification = "notifications/tasks"
	// MethodTasksStatus is the 2025-11-25 status notification.
	MethodTasksStatus = "notifications/tasks/status"

	// ResultTypeTask is the resultType of a 2026-07-28 CreateTaskResult.
	ResultTypeTask = "task"
	// MetaRelatedTask ties a 2025-11-25 message to its task.
	MetaRelatedTask = "io.modelcontextprotocol/related-task"
)

// TaskSupport is whether a tool runs as a task (execution.taskSupport).
type TaskSupport string

const (
	TaskForbidden TaskSupport = "forbidden" // never (the default)
	TaskOptional  TaskSupport = "optional"  // when the client can take one
	TaskRequired  TaskSupport = "required"  // always: a client that cannot take a task is refused
)

// ToolExecution is how a tool runs (Tool.Execution).
type ToolExecution struct {
	TaskSupport TaskSupport `json:"taskSupport,omitempty"`
	// DeferTask (server side, never sent) lets the handler gather input
	// in the request first (multi-round-trip rounds, 2026-07-28) and
	// become a task only when it calls server.ToolRequest.StartTask;
	// otherwise the task starts before the handler is called.
	DeferTask bool `json:"-"`
}

// Supports reports whether a tool with this execution may run as a task.
func (e *ToolExecution) Supports() bool {
	return e != nil && (e.TaskSupport == TaskOptional || e.TaskSupport == TaskRequired)
}

// Requires reports whether a tool with this execution must run as a task.
func (e *ToolExecution) Requires() bool { return e != nil && e.TaskSupport == TaskRequired }

// DeclaresTasks reports whether client capabilities (a request's _meta
// clientCapabilities, raw) declare the 2026-07-28 tasks extension.
func DeclaresTasks(caps []byte) bool {
	found := false
	jsonrpc.EachMember(caps, func(key, value []byte) bool {
		if string(key) != "extensions" {
			return true
		}
		jsonrpc.EachMember(value, func(k, v []byte) bool {
			if string(k) == ExtensionTasks && len(v) > 0 && v[0] == '{' {
				found = true
				return false
			}
			return true
		})
		return false
	})
	return found
}

// MissingTasksExtension is the -32021 error for a request that needs the
// 2026-07-28 tasks extension its client did not declare.
func MissingTasksExtension(why string) *jsonrpc.Error {
	return jsonrpc.NewError(CodeMissingRequiredClientCapability, why,
		map[string]any{"requiredCapabilities": map[string]any{"extensions": map[string]any{ExtensionTasks: map[string]any{}}}})
}

// TaskInfo is a task as both designs describe it on the wire (the
// 2026-07-28 names; the 2025-11-25 shape uses ttl and pollInterval).
type TaskInfo struct {
	TaskID         string `json:"taskId"`
	Status         string `json:"status"`
	StatusMessage  string `json:"statusMessage,omitempty"`
	CreatedAt      string `json:"createdAt"`
	LastUpdatedAt  string `json:"lastUpdatedAt"`
	TTLMs          *int64 `json:"ttlMs,omitempty"`
	PollIntervalMs int64  `json:"pollIntervalMs,omitempty"`
	// TTL and PollInterval are the 2025-11-25 names.
	TTL          *int64 `json:"ttl,omitempty"`
	PollInterval int64  `json:"pollInterval,omitempty"`
	// InputRequests, Result and Error are a 2026-07-28 tasks/get's
	// (input_required, completed, failed).
	InputRequests map[string]json.RawMessage `json:"inputRequests,omitempty"`
	Result        json.RawMessage            `json:"result,omitempty"`
	Error         json.RawMessage            `json:"error,omitempty"`
}
