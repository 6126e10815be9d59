package tasks

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"time"
)

// Status is where a task is in its life. Working and InputRequired are
// live; the other three are terminal and never change again.
type Status string

const (
	Working       Status = "working"        // running
	InputRequired Status = "input_required" // waiting for the client's answers (Task.InputRequests)
	Completed     Status = "completed"      // the tool returned a result (which may have isError)
	Failed        Status = "failed"         // the request failed with a protocol error (Task.Error)
	Cancelled     Status = "cancelled"      // the client cancelled it
)

// Terminal reports whether s is completed, failed or cancelled.
func (s Status) Terminal() bool { return s == Completed || s == Failed || s == Cancelled }

// Task is a store's record of one task: what tasks/get answers, and what
// the server running it and the clients polling it share. A store hands
// out copies; the maps and slices of a copy are the caller's.
type Task struct {
	ID string
	// Owner is who may see the task: the key of the verified identity that
	// created it (see OwnerOf), or "" when the request carried none (then
	// knowing the id is what grants access, and ids are unguessable).
	Owner string
	// Scope is where a task made without an identity is listed (a stdio
	// connection's own key); "" for none. Listing never crosses owners.
	Scope string
	// Design is the wire the task was created on, "2026-07-28" (the
	// io.modelcontextprotocol/tasks extension) or "2025-11-25": a task is
	// read back in the shape it was made in.
	Design string
	Tool   string // the tool's name (tools/call is the only task-augmented request)

	Status        Status
	StatusMessage string
	CreatedAt     time.Time
	LastUpdatedAt time.Time
	// TTL is how long the task is kept once it has ended (it is never
	// expired while it runs): tasks/get resolves for at least this long.
	TTL          time.Duration
	PollInterval time.Duration

	// Result is the tool's result object, once Completed.
	Result json.RawMessage
	// Error is the JSON-RPC error object, once Failed.
	Error json.RawMessage

	// InputRequests are the requests the task waits on (InputRequired),
	// by the key the client answers under: each an object
	// {"method": ..., "params": ...}.
	InputRequests map[string]json.RawMessage
	// Responses are answers that arrived (tasks/update) and that the
	// server running the task has not taken yet.
	Responses map[string]json.RawMessage
	// Refusals are input requests the client refused, by key: the error
	// object it answered with, for the server running the task to hand to
	// the handler that asked.
	Refusals map[string]json.RawMessage
	// Keys counts the input keys the task has minted: a key is never used
	// twice in a task's life, so a late or repeated answer cannot be
	// mistaken for the answer to a later question.
	Keys int
	// CancelRequested is set by tasks/cancel, for the server running the
	// task (which may be another instance) to stop its handler.
	CancelRequested bool

	// EndedAt is when the task reached its terminal status.
	EndedAt time.Time
}

// Clone returns a deep copy of t.
func (t *Task) Clone() *Task {
	c := *t
	c.Result = cloneRaw(t.Result)
	c.Error = cloneRaw(t.Error)
	c.InputRequests = cloneMap(t.InputRequests)
	c.Responses = cloneMap(t.Responses)
	c.Refusals = cloneMap(t.Refusals)
	return &c
}

// Size is what the task's payloads weigh, in bytes: the figure a store
// bounds (results, errors, input requests and answers; the fixed fields
// are not counted).
func (t *Task) Size() int64 {
	n := int64(len(t.Result) + len(t.Error) + len(t.StatusMessage) + len(t.ID) + len(t.Owner) + len(t.Scope) + len(t.Tool))
	for k, v := range t.InputRequests {
		n += int64(len(k) + len(v))
	}
	for k, v := range t.Responses {
		n += int64(len(k) + len(v))
	}
	for k, v := range t.Refusals {
		n += int64(len(k) + len(v))
	}
	return n
}

// ExpiresAt is when an ended task may be forgotten; zero while it runs.
func (t *Task) ExpiresAt() time.Time {
	if !t.Status.Terminal() {
		return time.Time{}
	}
	return t.EndedAt.Add(t.TTL)
}

func cloneRaw(b json.RawMessage) json.RawMessage {
	if b == nil {
		return nil
	}
	return append(json.RawMessage(nil), b...)
}

func cloneMap(m map[string]json.RawMessage) map[string]json.RawMessage {
	if m == nil {
		return nil
	}
	c := maps.Clone(m)
	for k, v := range c {
		c[k] = cloneRaw(v)
	}
	return c
}

// Event says that a task changed: its status, its input requests or
// answers, or a cancellation request. It carries the task as it is after
// the change (a copy).
type Event struct {
	Task *Task
}

// Errors a store returns; callers branch on them with errors.Is.
var (
	// ErrNotFound: no task has the id (or it has expired).
	ErrNotFound = errors.New("tasks: no such task")
	// ErrFull: the store holds as many live tasks (or bytes) as it may.
	ErrFull = errors.New("tasks: the task store is full")
	// ErrExists: Create was given an id already in use.
	ErrExists = errors.New("tasks: a task with this id exists")
	// ErrTooLarge: a task's payload alone exceeds what the store keeps.
	ErrTooLarge = errors.New("tasks: the task is larger than the store keeps")
	// ErrInvalidCursor: List was given a cursor it did not make.
	ErrInvalidCursor = errors.New("tasks: invalid cursor")
)

// Store keeps tasks where every server instance that may be asked about
// them can read them. The in-memory Memory serves one process; a shared
// store (one database for a fleet) lets a task created through one
// instance be polled, answered and cancelled through any other.
//
// Every method is safe for concurrent use. Create returns only once a Get
// for the id would find the task (durable creation: a client may poll the
// id the moment it is returned). Update is an atomic read-modify-write of
// one task: f sees the current record and changes it in place; when f
// returns an error nothing is written. A store may call f more than once
// (an optimistic retry), so f must have no other effects.
type Store interface {
	Create(ctx context.Context, t *Task) error
	Get(ctx context.Context, id string) (*Task, error)
	Update(ctx context.Context, id string, f func(*Task) error) (*Task, error)
	// List returns, oldest first, up to limit tasks of owner (and, for
	// owner "", of scope), from an opaque cursor ("" for the start), and
	// the cursor of what follows ("" at the end).
	List(ctx context.Context, owner, scope, cursor string, limit int) ([]*Task, string, error)
	// Subscribe calls f with every change to any task until ctx is done
	// or the returned function is called. f runs on a goroutine of the
	// store's and must not block for long; events of one task arrive in
	// the order the changes were made.
	Subscribe(ctx context.Context, f func(Event)) (stop func(), err error)
}

// Releaser is a Store that keeps something for the tasks running through
// it (a shared store's lease, renewed while the instance runs the task).
// The server calls Released once the handler of a task it created has
// returned and its outcome was written, or could not be: a store then
// stops renewing, so that a task whose outcome never landed is failed
// when its lease runs out instead of staying working forever.
type Releaser interface {
	Released(id string)
}

// Selective is a Store that can deliver only the events a subscriber
// wants: keep is asked with each changed task's id before the event is
// decoded (or, for a large one, fetched), and the event is dropped when
// it says no. A server subscribes so, for the tasks it runs or watches,
// so that an instance of a fleet does not decode every change of every
// task. keep runs on the store's goroutine and must be quick.
type Selective interface {
	SubscribeSelected(ctx context.Context, keep func(id string) bool, f func(Event)) (stop func(), err error)
}
