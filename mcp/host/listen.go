package host

import (
	"context"
	"encoding/json"
	"errors"
	"github.com/agentwire/agentwire/mcp"
	"sync"

	"github.com/agentwire/agentwire/client"
	"github.com/agentwire/agentwire/jsonrpc"
)

// ListenFilter says which notifications a subscription asks for.
type ListenFilter struct {
	ToolsListChanged      bool     `json:"toolsListChanged,omitempty"`
	PromptsListChanged    bool     `json:"promptsListChanged,omitempty"`
	ResourcesListChanged  bool     `json:"resourcesListChanged,omitempty"`
	ResourceSubscriptions []string `json:"resourceSubscriptions,omitempty"`
	// TaskIDs asks for notifications/tasks about these tasks (the tasks
	// extension; the request declares it).
	TaskIDs []string `json:"taskIds,omitempty"`
}

// Errors of a subscription's end.
var (
	// ErrListenNeedsModern: subscriptions/listen exists only in 2026-07-28.
	ErrListenNeedsModern = errors.New("mcp: subscriptions/listen needs the modern era")
	// ErrSubscriptionCancelled: the server ended the stream with
	// notifications/cancelled rather than a final result. Both are
	// accepted as an end (guarantee E6); this one says the server tore it down.
	ErrSubscriptionCancelled = errors.New("mcp: the server cancelled the subscription")
)

// Subscription is an open subscriptions/listen stream.
type Subscription struct {
	id       string // the listen request's id, raw JSON
	notify   func(method string, params json.RawMessage)
	ack      chan struct{}
	done     chan struct{}
	cancel   context.CancelFunc
	mu       sync.Mutex
	honored  ListenFilter
	acked    bool
	byServer bool
	err      error
}

// Honored returns the part of the filter the server acknowledged.
func (s *Subscription) Honored() ListenFilter {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.honored
}

// Done is closed when the stream has ended.
func (s *Subscription) Done() <-chan struct{} { return s.done }

// Err says how the stream ended: nil for the server's graceful final
// result or the client's own Close, ErrSubscriptionCancelled for the
// server's notifications/cancelled, or the connection's error.
func (s *Subscription) Err() error {
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// Close ends the stream from the client's side (notifications/cancelled
// referencing the listen request) and waits for it to end.
func (s *Subscription) Close() error {
	s.cancel()
	<-s.done
	return nil
}

// Listen opens a subscriptions/listen stream (guarantee E6) and returns once the
// server has acknowledged it. Every notification carrying the
// subscription's id is passed to onNotify (on the connection's reading
// goroutine: keep it short). When the server process is lost and the
// client's restart policy starts a new one, the stream is opened again on
// it (its acknowledgment is not passed on again).
func (s *Session) Listen(ctx context.Context, filter ListenFilter, onNotify func(method string, params json.RawMessage)) (*Subscription, error) {
	if s.era != mcp.Modern {
		return nil, ErrListenNeedsModern
	}
	lctx, cancel := context.WithCancel(context.Background())
	sub := &Subscription{notify: onNotify, ack: make(chan struct{}), done: make(chan struct{}), cancel: cancel}
	var extra map[string]any
	if len(filter.TaskIDs) > 0 {
		extra = map[string]any{mcp.MetaClientCapabilities: s.tasksCapabilities()}
	}
	params, err := s.withMeta(map[string]any{"notifications": filter}, extra)
	if err != nil {
		cancel()
		return nil, err
	}
	go func() {
		var err error
		for {
			_, err = s.t.Call(lctx, mcp.MethodListen, params, func(id jsonrpc.ID) {
				sub.id = string(id)
				s.subs.Store(sub.id, sub)
			})
			s.subs.Delete(sub.id)
			if !s.reopen(lctx, sub, err) {
				break
			}
		}
		sub.mu.Lock()
		switch {
		case sub.byServer:
			sub.err = ErrSubscriptionCancelled
		case err != nil && lctx.Err() == nil:
			sub.err = err
		}
		sub.mu.Unlock()
		cancel()
		close(sub.done)
	}()
	select {
	case <-sub.ack:
		return sub, nil
	case <-sub.done:
		if err := sub.Err(); err != nil {
			return nil, err
		}
		return nil, errors.New("mcp: the subscription ended before it was acknowledged")
	case <-ctx.Done():
		sub.Close()
		return nil, context.Cause(ctx)
	}
}

// reopen reports whether a stream that ended with err should be opened
// again: when the server process was lost and the client's restart policy
// started a new one (a stream does not survive its server), once it had
// been acknowledged; never after Close or the server's own end.
func (s *Session) reopen(ctx context.Context, sub *Subscription, err error) bool {
	sub.mu.Lock()
	acked, byServer := sub.acked, sub.byServer
	sub.mu.Unlock()
	if err == nil || ctx.Err() != nil || byServer || !acked || s.c == nil || !errors.Is(err, client.ErrConnectionLost) {
		return false
	}
	return s.c.Ready(ctx) == nil
}

// routeSubscription delivers a notification that belongs to a
// subscription; it reports whether it did.
func (s *Session) routeSubscription(method string, params json.RawMessage) bool {
	var p struct {
		Meta struct {
			ID json.RawMessage `json:"io.modelcontextprotocol/subscriptionId"`
		} `json:"_meta"`
		RequestID     json.RawMessage `json:"requestId"`
		Notifications ListenFilter    `json:"notifications"`
	}
	if json.Unmarshal(params, &p) != nil {
		return false
	}
	if method == mcp.MethodCancelled {
		v, ok := s.subs.Load(string(p.RequestID))
		if !ok {
			return false
		}
		sub := v.(*Subscription)
		sub.mu.Lock()
		sub.byServer = true
		sub.mu.Unlock()
		sub.cancel()
		return true
	}
	if p.Meta.ID == nil {
		return false
	}
	v, ok := s.subs.Load(string(p.Meta.ID))
	if !ok {
		return false
	}
	sub := v.(*Subscription)
	if method == mcp.MethodAcknowledged {
		sub.mu.Lock()
		if !sub.acked {
			sub.acked = true
			sub.honored = p.Notifications
			close(sub.ack)
		}
		sub.mu.Unlock()
		return true
	}
	if sub.notify != nil {
		sub.notify(method, params)
	}
	return true
}
