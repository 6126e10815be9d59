package bridge

import (
	"context"
	"encoding/json"
	"errors"
	"github.com/agentwire/agentwire/internal/mapshrink"
	"github.com/agentwire/agentwire/mcp"
	"github.com/agentwire/agentwire/mcp/host"
	"sync"

	"github.com/agentwire/agentwire/internal/relay"
	"github.com/agentwire/agentwire/jsonrpc"
	"github.com/agentwire/agentwire/rpc"
)

// The bridge's listen streams are shared: every HTTP client that asks for
// the same notifications hangs off one subscriptions/listen stream on the
// server, opened for the first of them and closed after the last one
// leaves. A thousand clients watching the tool list cost the shared server
// one stream, not a thousand of its stream budget, and cannot use that
// budget up for each other. Each client still sees only its own
// subscription id, and a client that does not read its event stream is
// dropped alone (relayQueue), never stalling the others. A legacy
// session (SessionHandler) hangs off the same hubs for its list changes
// and its resources/subscribe: it is told on its connection, outside any
// request, without the subscription id it never asked for.

// listenHub is one upstream stream and the clients hanging off it.
type listenHub struct {
	key   string
	ready chan struct{} // closed once the upstream stream is acknowledged or failed

	// set before ready is closed
	sub *host.Subscription
	err error

	mu      sync.Mutex
	clients map[any]*hubClient // by the client's listen request, or its session
	peak    int                // (shrunk)
}

// hubClient is one client of a hub: a listen request (id and rl) or a
// legacy session (sess).
type hubClient struct {
	id   jsonrpc.ID // the client's listen request id: its subscription id
	rl   *relay.Relay[relayMsg]
	sess *bridgeSession
}

// deliver passes one of the stream's notifications on to the client. It
// runs on the shared session's reader: it never waits.
func (c *hubClient) deliver(method string, params json.RawMessage) {
	if c.sess != nil {
		c.sess.enqueue(method, withoutSubscriptionID(params))
		return
	}
	c.rl.Send(relayMsg{method, withSubscriptionID(params, json.RawMessage(c.id))})
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
	hub, err := b.joinHub(ctx, filter, req, &hubClient{id: req.ID, rl: rl})
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

// joinHub adds a client (known in the hub by key) to the hub for filter,
// opening the upstream stream if it is the first, and queues a listen
// client's acknowledgment first on its relay, so that it precedes every
// notification.
func (b *Bridge) joinHub(ctx context.Context, filter host.ListenFilter, key any, c *hubClient) (*listenHub, error) {
	keyRaw, _ := json.Marshal(filter)
	fkey := string(keyRaw)
	for {
		b.mu.Lock()
		if b.hubs == nil {
			b.hubs = map[string]*listenHub{}
		}
		hub := b.hubs[fkey]
		opener := hub == nil
		if opener {
			hub = &listenHub{key: fkey, ready: make(chan struct{}), clients: map[any]*hubClient{}}
			b.hubs[fkey] = hub
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
			if b.hubs[fkey] == hub {
				delete(b.hubs, fkey)
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
		if c.rl != nil {
			c.rl.Send(relayMsg{mcp.MethodAcknowledged, map[string]any{
				"_meta":         map[string]any{mcp.MetaSubscriptionID: c.id},
				"notifications": hub.sub.Honored(),
			}})
		}
		hub.clients[key] = c
		hub.peak = max(hub.peak, len(hub.clients))
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
			c.deliver(method, params)
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
func (b *Bridge) leaveHub(hub *listenHub, key any) {
	b.mu.Lock()
	hub.mu.Lock()
	if _, ok := hub.clients[key]; !ok {
		hub.mu.Unlock()
		b.mu.Unlock()
		return // gone already (a hub the server ended and a client left)
	}
	delete(hub.clients, key)
	last := len(hub.clients) == 0
	if !last {
		hub.clients = mapshrink.Shrunk(hub.clients, &hub.peak)
	}
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

// withoutSubscriptionID returns notification params without _meta's
// subscription id (and without _meta when nothing else is in it), for a
// legacy client, which never opened a listen stream; nil when nothing is
// left.
func withoutSubscriptionID(raw json.RawMessage) json.RawMessage {
	var obj map[string]json.RawMessage
	if json.Unmarshal(raw, &obj) != nil {
		return nil
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(obj["_meta"], &m) == nil && m != nil {
		delete(m, mcp.MetaSubscriptionID)
		if len(m) == 0 {
			delete(obj, "_meta")
		} else {
			obj["_meta"], _ = json.Marshal(m)
		}
	}
	if len(obj) == 0 {
		return nil
	}
	out, _ := json.Marshal(obj)
	return out
}
