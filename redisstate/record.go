package redisstate

import (
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/agentwire/agentwire/mcp/tasks"
)

// record is a task as Redis keeps it: JSON with names of its own (a
// format that does not move with the Go field names) and absent fields
// for nothing, so that a nil result reads back nil, not "null".
type record struct {
	ID              string                     `json:"id"`
	Owner           string                     `json:"owner,omitempty"`
	Scope           string                     `json:"scope,omitempty"`
	Design          string                     `json:"design,omitempty"`
	Tool            string                     `json:"tool,omitempty"`
	Status          tasks.Status               `json:"status"`
	StatusMessage   string                     `json:"statusMessage,omitempty"`
	CreatedAt       time.Time                  `json:"createdAt,omitzero"`
	LastUpdatedAt   time.Time                  `json:"lastUpdatedAt,omitzero"`
	TTL             time.Duration              `json:"ttlNs,omitempty"`
	PollInterval    time.Duration              `json:"pollIntervalNs,omitempty"`
	Result          json.RawMessage            `json:"result,omitempty"`
	Error           json.RawMessage            `json:"error,omitempty"`
	InputRequests   map[string]json.RawMessage `json:"inputRequests,omitempty"`
	Responses       map[string]json.RawMessage `json:"responses,omitempty"`
	Refusals        map[string]json.RawMessage `json:"refusals,omitempty"`
	Keys            int                        `json:"keys,omitempty"`
	CancelRequested bool                       `json:"cancelRequested,omitempty"`
	EndedAt         time.Time                  `json:"endedAt,omitzero"`
}

// stored is what the task's key holds: a head the scripts read with
// GETRANGE (its first bytes) without loading the whole record, then the
// record. The head is the task's revision (1 at its creation, one more
// at every write: the order of its events) and two flags derived from
// the record, ended and cancel: the lease renewal reads only these.
// encoding/json writes the fields in this order, so the head is always
// `{"rev":N,` then `"ended":true,` and `"cancel":true,` when set.
type stored struct {
	Rev    uint64 `json:"rev"`
	Ended  bool   `json:"ended,omitempty"`
	Cancel bool   `json:"cancel,omitempty"`
	record
}

// headBytes is how much of a record the scripts read to know its head.
const headBytes = 64

// revHead is how a record of revision rev starts: what a
// compare-and-set script compares (the record has changed when its
// revision has).
func revHead(rev uint64) string { return `{"rev":` + strconv.FormatUint(rev, 10) + `,` }

func encodeStored(t *tasks.Task, rev uint64) ([]byte, error) {
	b, err := json.Marshal(stored{Rev: rev, Ended: t.Status.Terminal(), Cancel: t.CancelRequested, record: record(*t)})
	if err != nil {
		return nil, fmt.Errorf("redisstate: encoding task %s: %w", t.ID, err)
	}
	return b, nil
}

func decodeStored(id string, b []byte) (*tasks.Task, uint64, error) {
	var r stored
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, 0, fmt.Errorf("redisstate: task %s: a record that is not a task: %w", id, err)
	}
	t := tasks.Task(r.record)
	return &t, r.Rev, nil
}

// encodeTask is encodeStored of revision 0 (a revision not known: its
// events are delivered whatever was delivered before).
func encodeTask(t *tasks.Task) ([]byte, error) { return encodeStored(t, 0) }

func decodeTask(id string, b []byte) (*tasks.Task, error) {
	t, _, err := decodeStored(id, b)
	return t, err
}
