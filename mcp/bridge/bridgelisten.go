package bridge

import (
	"context"
	"encoding/json"
	"errors"
	"github.com/agentwire/agentwire/mcp"
	"github.com/agentwire/agentwire/mcp/host"
	"sync"

	"github.com/agentwire/agentwire/internal/relay"
	"github.com/agentwire/agentwire/rpc"
)

// The bridge's listen streams are shared: every HTTP client that asks for
// the same notifications hangs off one subscriptions/listen stream on the
// server, opened for the first of them and closed after the last one
// leaves. A thousand clients watching the tool list cost the shared server
// one stream, not a thousand of its stream budget, and cannot use that
// budget up for each other. Each client still sees only its own
// subscription id, and a client that does not read its event stream is
// dropped alone (relayQueue), never stalling the others.

// listenHub is one upstream stream and the clients hanging off it.
type listenHub struct {
	key   string
	ready chan struct{} // closed once the upstream stream is acknowledged or failed

	// set before ready is closed
	sub *host.Subscription
	err error

	mu      sync.Mutex
	clients map[*rpc.Request]*hubClient
}

type hubClient struct {
	id json.RawMessage // the client's listen request id: its subscription id
	rl *relay.Relay[relayMsg]
}

// listen serves a modern client's subscriptions/listen through the shared
// upstream stream for its filter.
func (b *Bridge) listen(ctx context.Context, req *rpc.Request, params map[string]json.RawMessage) (any, error) {
	if err := req.Detach(); err != nil {
		return nil, err
	}
	var filter host.ListenFilter
	if raw, ok := params["notifications"]; ok {
		if err := json.Unmarshal(raw, &filter); err != nil {
			return nil, mcp.InvalidParams("invalid params: notifications: %v", err)
		}
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	rl := newRelay(req, b.slowClient(cancel))
	defer rl.Finish()
	hub, err := b.joinHub(ctx, filter, req, rl)
	if err != nil {
		return b.result(nil, err)
	}
	defer b.leaveHub(hub, req)
	final := map[string]any{"resultType": mcp.ResultTypeComplete, "_meta": map[string]any{mcp.MetaSubscriptionID: req.ID}}
	select {
	case <-ctx.Done():
		if errors.Is(context.Cause(ctx), errSlowClient) {
			return nil, errSlowClient
		}
		return nil, ctx.Err() // the client cancelled: nothing more is written
	case <-req.Conn().InputDone():
		return final, nil // the bridge shuts this exchange down
	case <-hub.sub.Done():
		if err := hub.sub.Err(); err != nil && !errors.Is(err, host.ErrSubscriptionCancelled) {
			return b.result(nil, err)
		}
		return final, nil
	}
}

// joinHub adds a client to the hub for filter, opening the upstream stream
// if it is the first, and queues the client's acknowledgment first on its
// relay, so that it precedes every notification.
func (b *Bridge) joinHub(ctx context.Context, filter host.ListenFilter, req *rpc.Request, rl *relay.Relay[relayMsg]) (*listenHub, error) {
	keyRaw, _ := json.Marshal(filter)
	key := string(keyRaw)
	for {
		b.mu.Lock()
		if b.hubs == nil {
			b.hubs = map[string]*listenHub{}
		}
		hub := b.hubs[key]
		opener := hub == nil
		if opener {
			hub = &listenHub{key: key, ready: make(chan struct{}), clients: map[*rpc.Request]*hubClient{}}
			b.hubs[key] = hub
		}
		b.mu.Unlock()
		if opener {
			go b.openHub(hub, filter)
		}
		select {
		case <-hub.ready:
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		}
		if hub.err != nil {
			return nil, hub.err
		}
		select {
		case <-hub.sub.Done():
			// Ended by the server a moment ago: open anew.
			b.mu.Lock()
			if b.hubs[key] == hub {
				delete(b.hubs, key)
			}
			b.mu.Unlock()
			continue
		default:
		}
		hub.mu.Lock()
		if hub.clients == nil {
			// The last client left and the stream is closing: open anew.
			hub.mu.Unlock()
			continue
		}
		rl.Send(relayMsg{mcp.MethodAcknowledged, map[string]any{
			"_meta":         map[string]any{mcp.MetaSubscriptionID: req.ID},
			"notifications": hub.sub.Honored(),
		}})
		hub.clients[req] = &hubClient{id: json.RawMessage(req.ID), rl: rl}
		hub.mu.Unlock()
		return hub, nil
	}
}

// openHub opens the upstream stream of a new hub and fans its
// notifications out, each renamed to its client's subscription id.
func (b *Bridge) openHub(hub *listenHub, filter host.ListenFilter) {
	sub, err := b.sess.Listen(context.Background(), filter, func(method string, params json.RawMessage) {
		hub.mu.Lock()
		defer hub.mu.Unlock()
		for _, c := range hub.clients {
			c.rl.Send(relayMsg{method, withSubscriptionID(params, c.id)})
		}
	})
	if err != nil {
		b.mu.Lock()
		if b.hubs[hub.key] == hub {
			delete(b.hubs, hub.key)
		}
		b.mu.Unlock()
		hub.err = err
		close(hub.ready)
		return
	}
	hub.sub = sub
	close(hub.ready)
	// A stream the server ends takes the hub with it; the next client
	// opens a new one.
	go func() {
		<-sub.Done()
		b.mu.Lock()
		if b.hubs[hub.key] == hub {
			delete(b.hubs, hub.key)
		}
		b.mu.Unlock()
	}()
}

// leaveHub removes a client; the last one out closes the upstream stream.
func (b *Bridge) leaveHub(hub *listenHub, req *rpc.Request) {
	b.mu.Lock()
	hub.mu.Lock()
	delete(hub.clients, req)
	last := len(hub.clients) == 0
	if last {
		hub.clients = nil // joinHub sees the hub closing
		if b.hubs[hub.key] == hub {
			delete(b.hubs, hub.key)
		}
	}
	hub.mu.Unlock()
	b.mu.Unlock()
	if last {
		go hub.sub.Close()
	}
}

// withSubscriptionID returns notification params with _meta's subscription
// id replaced by id.
func withSubscriptionID(raw json.RawMessage, id json.RawMessage) json.RawMessage {
	var obj map[string]json.RawMessage
	if json.Unmarshal(raw, &obj) != nil {
		obj = map[string]json.RawMessage{}
	}
	var m map[string]json.RawMessage
	json.Unmarshal(obj["_meta"], &m)
	if m == nil {
		m = map[string]json.RawMessage{}
	}
	m[mcp.MetaSubscriptionID] = id
	obj["_meta"], _ = json.Marshal(m)
	out, _ := json.Marshal(obj)
	return out
}
