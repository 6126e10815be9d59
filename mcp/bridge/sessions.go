package bridge

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/agentwire/agentwire/internal/mapshrink"
	"github.com/agentwire/agentwire/jsonrpc"
	"github.com/agentwire/agentwire/mcp"
	"github.com/agentwire/agentwire/mcp/host"
	"github.com/agentwire/agentwire/rpc"
)

// Legacy sessions. A legacy Streamable HTTP session is one long-lived
// connection (SessionHandler) fed by the session's POSTs. Its requests
// are forwarded as ExchangeHandler forwards them, but what is the
// session's own stays with it: logging/setLevel and resources/subscribe
// are answered by the bridge and never reach the shared server, where
// they would change what every other client hears. The server's changes
// are then relayed to each session on its connection, outside any
// request (its GET stream): list changes to every session, and a
// resource's update to the sessions subscribed to it. A legacy server's
// log lines are not relayed: it sends them outside any request, so the
// bridge cannot tell whose call one is about, and it must not show one
// client's log lines to another. From a 2026-07-28 server they come through the shared listen
// streams (bridgelisten.go): one for the list changes, one per subscribed
// URI, shared with every other session and listen client that wants the
// same. From a legacy server they come from the shared session's
// notifications; the bridge subscribes upstream once per URI, for the
// first session that asks, and unsubscribes after the last one leaves.
//
// An idle session costs entries in tables and no goroutine: a session is
// told from the goroutine that read the server's notification, through a
// bounded queue of its own (relayQueue; beyond it notifications are
// dropped, counted in Stats.SessionDrops) that one goroutine empties
// while there is something in it, and a session's entries go when its
// connection ends, through a hook on the connection's context.

// maxSessionSubscriptions bounds the URIs one session may be subscribed
// to at once; beyond it resources/subscribe is refused (-32000, data.reason
// "too_many_subscriptions", Stats.SubscriptionsRefused).
const maxSessionSubscriptions = 1024

// sessionNotifyTimeout bounds the wait to hand one notification to a
// session's connection.
const sessionNotifyTimeout = 10 * time.Second

// listChanges is the filter of the shared stream sessions hear list
// changes on, from a 2026-07-28 server.
var listChanges = host.ListenFilter{ToolsListChanged: true, PromptsListChanged: true, ResourcesListChanged: true}

// SessionHandler returns the handler of one legacy Streamable HTTP
// session's connection (streamable.SessionBackend). It forwards the
// session's requests as ExchangeHandler does (at the version the route's
// note names, or the one initialize negotiated), answers the session's
// logging/setLevel and resources/subscribe and resources/unsubscribe
// itself, and relays the server's list changes and the updates of the
// resources the session subscribed to, outside any request (a legacy
// server's log lines are not relayed: they name no request, and one
// client must not see another's). A session's subscriptions end with it.
//
// The session's restorable state is what these messages built:
// initialize, the last logging/setLevel and each resources/subscribe not
// since undone; replayed into a new session connection, they restore it.
//
// From a legacy server the bridge hears the server's notifications
// outside calls through host.Session.OnNotification.
func (b *Bridge) SessionHandler() rpc.Handler {
	b.wireServerNotifications()
	return &bridgeSession{b: b}
}

// wireServerNotifications starts hearing a legacy server's notifications,
// once.
func (b *Bridge) wireServerNotifications() {
	b.wireOnce.Do(func() {
		b.sess.OnNotification(b.fromServer)
	})
}

// bridgeSession is the handler of one session, and what the bridge keeps
// of it.
type bridgeSession struct {
	b *Bridge

	mu       sync.Mutex
	conn     *rpc.Conn // the session's connection, once a request came through
	version  string    // what initialize negotiated
	watching bool      // initialized: told of list changes and log messages
	subs     map[string]*listenHub
	lists    *listenHub // the list-change stream (a 2026-07-28 server)
	gone     bool       // the connection ended
	// What is waiting to be told, in order, and whether a goroutine is
	// telling it.
	queue   []relayMsg
	sending bool
}

func (bs *bridgeSession) Handle(ctx context.Context, req *rpc.Request) (any, error) {
	if req.IsNotification() {
		return nil, nil
	}
	b := bs.b
	n := mcp.RoutedOf(req.Note())
	modern := false
	version := ""
	if n != nil {
		modern, version = n.Era == mcp.Modern, n.Version
	} else {
		// No route (a connection over a stream): its _meta says.
		var p mcp.RequestParams
		mcp.ParseRequestParams(req.Params, &p)
		modern = p.Meta != nil && p.Meta.ProtocolVersion != nil
	}
	if modern {
		return b.modern(ctx, req)
	}
	if version == "" {
		bs.mu.Lock()
		version = bs.version
		bs.mu.Unlock()
	}
	switch req.Method {
	case mcp.MethodInitialize:
		res, err := b.legacy(ctx, req, version)
		if err == nil {
			bs.initialized(ctx, req)
		}
		return res, err
	case "logging/setLevel":
		return bs.setLevel(req.Params)
	case "resources/subscribe", "resources/unsubscribe":
		var p mcp.RequestParams
		if n != nil {
			p = n.Params
		} else {
			mcp.ParseRequestParams(req.Params, &p)
		}
		uri, ok := jsonrpc.StringValue(p.URI)
		if !ok || uri == "" {
			return nil, mcp.InvalidParams("invalid params: a uri is required")
		}
		if req.Method == "resources/subscribe" {
			return bs.subscribe(ctx, req.Conn(), uri)
		}
		bs.unsubscribe(uri)
		return struct{}{}, nil
	}
	return b.legacy(ctx, req, version)
}

// initialized records the session's version and connection, and starts
// relaying the server's changes to it.
func (bs *bridgeSession) initialized(ctx context.Context, req *rpc.Request) {
	b := bs.b
	p, _ := mcp.ParseInitialize(req.Params)
	bs.mu.Lock()
	if p != nil {
		bs.version = mcp.LegacyVersionFor(p.ProtocolVersion)
	}
	bs.attachLocked(req.Conn())
	first := !bs.watching && !bs.gone
	bs.watching = true
	bs.mu.Unlock()
	if !first {
		return
	}
	b.mu.Lock()
	if b.sessions == nil {
		b.sessions = map[*bridgeSession]struct{}{}
	}
	b.sessions[bs] = struct{}{}
	b.sessPeak = max(b.sessPeak, len(b.sessions))
	b.mu.Unlock()
	bs.mu.Lock()
	gone := bs.gone
	bs.mu.Unlock()
	if gone { // ended meanwhile, before it was in the table
		b.forgetSession(bs)
		return
	}
	if b.sess.Era() != mcp.Modern {
		return
	}
	hub, err := b.joinHub(ctx, listChanges, bs, &hubClient{sess: bs})
	if err != nil {
		b.logger().Warn("bridge: a session will not hear of the server's list changes: the server's listen stream failed", "error", err)
		return
	}
	bs.mu.Lock()
	gone = bs.gone
	if !gone {
		bs.lists = hub
	}
	bs.mu.Unlock()
	if gone { // ended meanwhile: end saw no hub to leave
		b.leaveHub(hub, bs)
	}
}

// attachLocked learns the session's connection, the first time, and
// hooks the session's end on it: the hook runs on a goroutine of its own
// once the connection has shut down, and until then costs none.
func (bs *bridgeSession) attachLocked(conn *rpc.Conn) {
	if bs.conn == nil {
		bs.conn = conn
		context.AfterFunc(conn.Context(), bs.end)
	}
}

// setLevel is the session's logging/setLevel: checked and answered here,
// never forwarded, since on the shared server it would change what every
// other client hears. The server's log lines are not relayed to sessions
// (see SessionHandler), so the level has nothing to filter.
func (bs *bridgeSession) setLevel(raw []byte) (any, error) {
	var p struct {
		Level string `json:"level"`
	}
	if json.Unmarshal(raw, &p) != nil || !slices.Contains(mcp.LogLevels, p.Level) {
		return nil, mcp.InvalidParams("invalid params: level must be one of %s", strings.Join(mcp.LogLevels, ", "))
	}
	return struct{}{}, nil
}

// subscribe adds uri to the session's subscriptions: through the shared
// listen stream for it (a 2026-07-28 server) or the shared session's
// subscription (a legacy server).
func (bs *bridgeSession) subscribe(ctx context.Context, conn *rpc.Conn, uri string) (any, error) {
	b := bs.b
	bs.mu.Lock()
	bs.attachLocked(conn) // a session that skipped initialize is told all the same
	_, held := bs.subs[uri]
	n := len(bs.subs)
	bs.mu.Unlock()
	if held {
		return struct{}{}, nil
	}
	if n >= maxSessionSubscriptions {
		b.subsRefused.Add(1)
		b.subsLog.Refused("bridge: a resources/subscribe was refused: the session holds the most subscriptions allowed", "limit", maxSessionSubscriptions)
		return nil, jsonrpc.NewError(jsonrpc.CodeServerBusy,
			fmt.Sprintf("server busy: this session is subscribed to %d resources, the most allowed; unsubscribe from one first", maxSessionSubscriptions),
			map[string]any{"reason": "too_many_subscriptions", "limit": maxSessionSubscriptions})
	}
	var hub *listenHub
	if b.sess.Era() == mcp.Modern {
		h, err := b.joinHub(ctx, host.ListenFilter{ResourceSubscriptions: []string{uri}}, bs, &hubClient{sess: bs})
		if err != nil {
			return b.result(nil, err)
		}
		hub = h
	} else if err := b.subscribeUpstream(ctx, bs, uri); err != nil {
		return b.result(nil, err)
	}
	bs.mu.Lock()
	if bs.subs == nil {
		bs.subs = map[string]*listenHub{}
	}
	// A concurrent subscribe of the same URI may have got there first:
	// the hold is the session's either way (a hub and the upstream
	// subscription know the session once), unless it went to another hub
	// (the first one's ended in between), which is let go.
	first, twice := bs.subs[uri]
	gone := bs.gone
	if !twice && !gone {
		bs.subs[uri] = hub
	}
	bs.mu.Unlock()
	if gone || (twice && hub != nil && first != hub) {
		bs.drop(uri, hub)
	}
	return struct{}{}, nil
}

// unsubscribe removes uri from the session's subscriptions.
func (bs *bridgeSession) unsubscribe(uri string) {
	bs.mu.Lock()
	hub, held := bs.subs[uri]
	delete(bs.subs, uri)
	bs.mu.Unlock()
	if held {
		bs.drop(uri, hub)
	}
}

// drop gives up the session's hold on uri's upstream subscription.
func (bs *bridgeSession) drop(uri string, hub *listenHub) {
	if hub != nil {
		bs.b.leaveHub(hub, bs)
		return
	}
	if bs.b.sess.Era() != mcp.Modern {
		bs.b.unsubscribeUpstream(bs, uri)
	}
}

// end forgets an ended session: its subscriptions and its place on the
// shared streams.
func (bs *bridgeSession) end() {
	b := bs.b
	bs.mu.Lock()
	bs.gone = true
	subs, lists := bs.subs, bs.lists
	bs.subs, bs.lists, bs.queue = nil, nil, nil
	bs.mu.Unlock()
	b.forgetSession(bs)
	for uri, hub := range subs {
		bs.drop(uri, hub)
	}
	if lists != nil {
		b.leaveHub(lists, bs)
	}
}

// forgetSession takes a session out of the bridge's table.
func (b *Bridge) forgetSession(bs *bridgeSession) {
	b.mu.Lock()
	if _, ok := b.sessions[bs]; ok {
		delete(b.sessions, bs)
		b.sessions = mapshrink.Shrunk(b.sessions, &b.sessPeak)
	}
	b.mu.Unlock()
}

// enqueue queues a notification for the session without waiting, and
// starts telling it if nothing is under way.
func (bs *bridgeSession) enqueue(method string, params json.RawMessage) {
	var p any
	if len(params) > 0 {
		p = params
	}
	bs.mu.Lock()
	if bs.gone || bs.conn == nil {
		bs.mu.Unlock()
		return
	}
	if len(bs.queue) >= relayQueue {
		bs.mu.Unlock()
		bs.b.sessionDrops.Add(1)
		bs.b.dropLog.Refused("bridge: a session fell behind on its notifications; one is dropped", "limit", relayQueue, "method", method)
		return
	}
	bs.queue = append(bs.queue, relayMsg{method, p})
	start := !bs.sending
	bs.sending = true
	bs.mu.Unlock()
	if start {
		go bs.send()
	}
}

// send tells the session what is queued until nothing is, then ends.
func (bs *bridgeSession) send() {
	for {
		bs.mu.Lock()
		q, conn := bs.queue, bs.conn
		bs.queue = nil
		if len(q) == 0 || bs.gone {
			bs.sending = false
			bs.mu.Unlock()
			return
		}
		bs.mu.Unlock()
		for _, m := range q {
			ctx, cancel := context.WithTimeout(context.Background(), sessionNotifyTimeout)
			err := conn.Notify(ctx, m.method, m.params)
			cancel()
			if err != nil && conn.Context().Err() == nil {
				bs.b.sessionDrops.Add(1)
				bs.b.dropLog.Refused("bridge: a notification to a session was not sent", "method", m.method, "error", err)
			}
		}
	}
}

// ----- a legacy server: the shared session's notifications -----

// upstreamSub is the shared session's subscription to one URI, held for
// the sessions subscribed to it.
type upstreamSub struct {
	// op serialises the URI's upstream subscribe and unsubscribe, so that
	// the server's state follows the last of them.
	op         sync.Mutex
	subscribed bool // the server holds it (guarded by op)

	// Guarded by Bridge.mu.
	sessions map[*bridgeSession]struct{}
	peak     int // (shrunk)
	holds    int // goroutines between looking the entry up and done with it
}

// subscribeUpstream adds bs to uri's subscribers, subscribing the shared
// session first if it is the first.
func (b *Bridge) subscribeUpstream(ctx context.Context, bs *bridgeSession, uri string) error {
	b.mu.Lock()
	if b.upSubs == nil {
		b.upSubs = map[string]*upstreamSub{}
	}
	e := b.upSubs[uri]
	if e == nil {
		e = &upstreamSub{sessions: map[*bridgeSession]struct{}{}}
		b.upSubs[uri] = e
		b.upPeak = max(b.upPeak, len(b.upSubs))
	}
	e.holds++
	b.mu.Unlock()
	e.op.Lock()
	defer e.op.Unlock()
	var err error
	if !e.subscribed {
		if _, err = b.sess.Request(ctx, "resources/subscribe", map[string]any{"uri": uri}); err == nil {
			e.subscribed = true
		}
	}
	b.mu.Lock()
	if err == nil {
		if e.sessions == nil { // emptied (shrunk) while the server still held it
			e.sessions = map[*bridgeSession]struct{}{}
		}
		e.sessions[bs] = struct{}{}
		e.peak = max(e.peak, len(e.sessions))
	}
	b.releaseLocked(uri, e)
	b.mu.Unlock()
	return err
}

// unsubscribeUpstream removes bs from uri's subscribers, unsubscribing
// the shared session after the last.
func (b *Bridge) unsubscribeUpstream(bs *bridgeSession, uri string) {
	b.mu.Lock()
	e := b.upSubs[uri]
	if e == nil {
		b.mu.Unlock()
		return
	}
	delete(e.sessions, bs)
	e.sessions = mapshrink.Shrunk(e.sessions, &e.peak)
	e.holds++
	b.mu.Unlock()
	e.op.Lock()
	defer e.op.Unlock()
	b.mu.Lock()
	last := len(e.sessions) == 0
	b.mu.Unlock()
	if last && e.subscribed {
		ctx, cancel := context.WithTimeout(context.Background(), sessionNotifyTimeout)
		_, err := b.sess.Request(ctx, "resources/unsubscribe", map[string]any{"uri": uri})
		cancel()
		if err != nil {
			// Forgotten all the same: an update the server still sends
			// for it reaches no session.
			b.logger().Warn("bridge: the server's subscription to a resource no session wants was not ended", "error", err)
		}
		e.subscribed = false
	}
	b.mu.Lock()
	b.releaseLocked(uri, e)
	b.mu.Unlock()
}

// releaseLocked ends a hold on e, forgetting e when nothing is left of it.
func (b *Bridge) releaseLocked(uri string, e *upstreamSub) {
	e.holds--
	if e.holds == 0 && len(e.sessions) == 0 && !e.subscribed && b.upSubs[uri] == e {
		delete(b.upSubs, uri)
		b.upSubs = mapshrink.Shrunk(b.upSubs, &b.upPeak)
	}
}

// fromServer relays one of a legacy server's notifications outside calls
// to the sessions it concerns. It runs on the shared session's reader.
func (b *Bridge) fromServer(method string, params json.RawMessage) {
	var to []*bridgeSession
	switch method {
	case mcp.MethodToolsListChanged, "notifications/prompts/list_changed", "notifications/resources/list_changed":
		b.mu.Lock()
		for bs := range b.sessions {
			to = append(to, bs)
		}
		b.mu.Unlock()
	case "notifications/resources/updated":
		var p struct {
			URI string `json:"uri"`
		}
		if json.Unmarshal(params, &p) != nil {
			return
		}
		b.mu.Lock()
		if e := b.upSubs[p.URI]; e != nil {
			for bs := range e.sessions {
				to = append(to, bs)
			}
		}
		b.mu.Unlock()
	default:
		return
	}
	for _, bs := range to {
		bs.enqueue(method, params)
	}
}
