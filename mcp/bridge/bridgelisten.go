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
// upstream stream for its filter. Its frame stays on the stack of the
// client's HTTP request for as long as the stream is open, so it only
// waits: the setup (openListen) and each way out are functions of their
// own, and the stack stays in its first 8 KiB.
func (b *Bridge) listen(ctx context.Context, req *rpc.Request, params map[string]json.RawMessage) (any, error) {
	l, res, err := b.openListen(ctx, req, params)
	if l == nil {
		return res, err
	}
	defer l.close(b, req)
	select {
	case <-l.ctx.Done():
		return l.cancelled()
	case <-req.Conn().InputDone():
		return listenFinal(req), nil // the bridge shuts this exchange down
	case <-l.hub.sub.Done():
		return b.hubEnded(l.hub, req)
	}
}

// bridgeListen is what an open bridged listen stream keeps.
type bridgeListen struct {
	ctx    context.Context // the stream's: cancelled when its client is too slow
	cancel context.CancelCauseFunc
	rl     *relay.Relay[relayMsg]
	hub    *listenHub
}

// openListen detaches the request, reads its filter and joins the hub
// for it. A nil stream means the request is answered with res, err.
//
//go:noinline
func (b *Bridge) openListen(ctx context.Context, req *rpc.Request, params map[string]json.RawMessage) (*bridgeListen, any, error) {
	if err := req.Detach(); err != nil {
		return nil, nil, err
	}
	var filter host.ListenFilter
	if raw, ok := params["notifications"]; ok {
		if err := json.Unmarshal(raw, &filter); err != nil {
			return nil, nil, mcp.InvalidParams("invalid params: notifications: %v", err)
		}
	}
	l := &bridgeListen{}
	l.ctx, l.cancel = context.WithCancelCause(ctx)
	l.rl = newRelay(req, b.slowClient(l.cancel))
	hub, err := b.joinHub(l.ctx, filter, req, &hubClient{id: req.ID, rl: l.rl})
	if err != nil {
		l.rl.Finish()
		l.cancel(nil)
		res, err := b.result(nil, err)
		return nil, res, err
	}
	l.hub = hub
	return l, nil, nil
}

// close leaves the hub, delivers what the relay holds and releases the
// stream's context, in that order.
func (l *bridgeListen) close(b *Bridge, req *rpc.Request) {
	b.leaveHub(l.hub, req)
	l.rl.Finish()
	l.cancel(nil)
}

// cancelled is the answer of a stream whose context ended: an error for
// a client too slow to take its notifications, else none (the client
// cancelled: nothing more is written).
//
//go:noinline
func (l *bridgeListen) cancelled() (any, error) {
	if errors.Is(context.Cause(l.ctx), errSlowClient) {
		return nil, errSlowClient
	}
	return nil, l.ctx.Err()
}

// hubEnded is the answer of a stream whose upstream stream ended.
//
//go:noinline
func (b *Bridge) hubEnded(hub *listenHub, req *rpc.Request) (any, error) {
	if err := hub.sub.Err(); err != nil && !errors.Is(err, host.ErrSubscriptionCancelled) {
		return b.result(nil, err)
	}
	return listenFinal(req), nil
}

// listenFinal is a listen stream's final result.
func listenFinal(req *rpc.Request) map[string]any {
	return map[string]any{"resultType": mcp.ResultTypeComplete, "_meta": map[string]any{mcp.MetaSubscriptionID: req.ID}}
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
