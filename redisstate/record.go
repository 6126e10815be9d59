package redisstate

import (
	"encoding/json"
	"fmt"
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

func encodeTask(t *tasks.Task) ([]byte, error) {
	b, err := json.Marshal(record(*t))
	if err != nil {
		return nil, fmt.Errorf("redisstate: encoding task %s: %w", t.ID, err)
	}
	return b, nil
}

func decodeTask(id string, b []byte) (*tasks.Task, error) {
	var r record
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("redisstate: task %s: a record that is not a task: %w", id, err)
	}
	t := tasks.Task(r)
	return &t, nil
}
