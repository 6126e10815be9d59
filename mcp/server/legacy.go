package server

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentwire/agentwire/internal/mapshrink"
	"github.com/agentwire/agentwire/internal/refusal"
	"github.com/agentwire/agentwire/jsonrpc"
	"github.com/agentwire/agentwire/mcp"
	"github.com/agentwire/agentwire/rpc"
)

// The long-lived legacy connections: a stdio connection, or a Streamable
// HTTP session's connection (SessionHandler). Once initialized, such a
// connection is told of list changes, as the listChanged capabilities
// promise, and of updates to the resources it subscribed to. A server may
// hold thousands of them, most of them idle for minutes (an HTTP session
// whose client went away waits for its idle timeout), so an idle one costs
// an entry in a table and no goroutine: a change is told from where it
// happens, and the entry goes when the connection ends through a hook on
// the connection's context (context.AfterFunc), not a goroutine waiting
// for it. Telling is asynchronous and coalesced per connection: the change
// marks what each connection is to hear and starts one goroutine for a
// connection that has nothing in flight; that goroutine sends what is
// marked, and what is marked meanwhile, then ends. So a change never waits
// for a connection, a slow connection costs one goroutine however many
// changes it misses, and one that does not take a notification within
// legacyNotifyTimeout (a full output queue on a stream) loses it, counted.

// legacyNotifyTimeout bounds the wait for room to send one notification
// to a legacy connection. (Over Streamable HTTP a session's writer bounds
// its own writes.)
const legacyNotifyTimeout = 10 * time.Second

// The lists whose changes a legacy connection hears of, in the order it
// hears of several.
var legacyLists = [...]struct {
	kind   string
	method string
}{
	{kindTools, mcp.MethodToolsListChanged},
	{kindPrompts, "notifications/prompts/list_changed"},
	{kindResources, "notifications/resources/list_changed"},
}

// LegacyStats counts what a server keeps for its long-lived legacy
// connections (stdio connections and Streamable HTTP sessions) and what
// it told them.
type LegacyStats struct {
	// Connections is the number of legacy connections the server keeps
	// an entry for: initialized, or holding a subscription.
	Connections int
	// Subscriptions is the number of resources/subscribe URIs held, over
	// all connections.
	Subscriptions int
	// Notified counts list-change and resources/updated notifications
	// sent to them.
	Notified int64
	// Dropped counts those not sent: the connection did not take one
	// within 10 s, or failed.
	Dropped int64
	// SubscriptionsRefused counts resources/subscribe requests refused for
	// Options.MaxResourceSubscriptions.
	SubscriptionsRefused int64
}

// LegacyStats reports the server's legacy connections.
func (s *Server) LegacyStats() LegacyStats {
	t := &s.legacy
	t.mu.Lock()
	st := LegacyStats{Connections: len(t.conns), Subscriptions: t.subscriptions}
	t.mu.Unlock()
	st.Notified, st.Dropped, st.SubscriptionsRefused = t.notified.Load(), t.dropped.Load(), t.refused.Load()
	return st
}

// legacyTable is the Server's table of legacy connections.
type legacyTable struct {
	maxSubs int

	// mu is taken after Server.mu where both are held (a list change is
	// told under Server.mu); nothing holding mu takes Server.mu.
	mu            sync.Mutex
	conns         map[*rpc.Conn]*legacyConn
	peak          int // the most conns has held since it was last made (shrunk)
	byURI         map[string]*subscribers
	uriPeak       int // (shrunk)
	subscriptions int

	notified, dropped, refused atomic.Int64
	dropLog, refuseLog         refusal.Log
}

// subscribers are the connections subscribed to one URI.
type subscribers struct {
	conns map[*legacyConn]struct{}
	peak  int // (shrunk)
}

// legacyConn is the entry of one connection. Its fields are guarded by the
// table's mu.
type legacyConn struct {
	conn     *rpc.Conn
	watching bool                // initialized: told of list changes
	subs     map[string]struct{} // resources/subscribe
	// What the connection is still to be told: the lists changed (bits
	// of legacyLists) and the subscribed URIs updated, each once.
	changed uint8
	updated []string
	sending bool // a goroutine is telling it
	gone    bool // the connection ended
}

func (t *legacyTable) init(s *Server) {
	t.maxSubs = s.opts.MaxResourceSubscriptions
	if t.maxSubs <= 0 {
		t.maxSubs = DefaultMaxResourceSubscriptions
	}
	t.dropLog.Logger, t.refuseLog.Logger = s.opts.Logger, s.opts.Logger
}

// entryLocked returns conn's entry, making it, with the hook that removes
// it when conn ends, if there is none.
func (t *legacyTable) entryLocked(conn *rpc.Conn) *legacyConn {
	if lc := t.conns[conn]; lc != nil {
		return lc
	}
	if t.conns == nil {
		t.conns = map[*rpc.Conn]*legacyConn{}
	}
	lc := &legacyConn{conn: conn}
	t.conns[conn] = lc
	t.peak = max(t.peak, len(t.conns))
	// Runs on a goroutine of its own once conn has shut down, at once if
	// it already has; until then it costs no goroutine.
	context.AfterFunc(conn.Context(), func() { t.forget(lc) })
	return lc
}

// forget removes an ended connection's entry.
func (t *legacyTable) forget(lc *legacyConn) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.conns[lc.conn] == lc {
		delete(t.conns, lc.conn)
		t.conns = mapshrink.Shrunk(t.conns, &t.peak)
	}
	for uri := range lc.subs {
		t.unindexLocked(lc, uri)
	}
	lc.subs, lc.updated, lc.changed, lc.gone = nil, nil, 0, true
}

// watch makes conn hear of list changes from now on.
func (t *legacyTable) watch(conn *rpc.Conn) {
	t.mu.Lock()
	t.entryLocked(conn).watching = true
	t.mu.Unlock()
}

// subscribe adds uri to conn's subscriptions (on) or removes it.
func (t *legacyTable) subscribe(conn *rpc.Conn, uri string, on bool) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	lc := t.conns[conn]
	if !on {
		if lc != nil {
			if _, ok := lc.subs[uri]; ok {
				delete(lc.subs, uri)
				t.unindexLocked(lc, uri)
			}
		}
		return nil
	}
	if lc == nil {
		lc = t.entryLocked(conn)
	}
	if _, ok := lc.subs[uri]; ok || lc.gone {
		return nil
	}
	if len(lc.subs) >= t.maxSubs {
		t.refused.Add(1)
		t.refuseLog.Refused("mcp: a resources/subscribe was refused: the connection holds the most subscriptions allowed", "limit", t.maxSubs)
		return jsonrpc.NewError(jsonrpc.CodeServerBusy,
			fmt.Sprintf("server busy: this connection is subscribed to %d resources, the most allowed; unsubscribe from one first", t.maxSubs),
			map[string]any{"reason": "too_many_subscriptions", "limit": t.maxSubs})
	}
	if lc.subs == nil {
		lc.subs = map[string]struct{}{}
	}
	lc.subs[uri] = struct{}{}
	if t.byURI == nil {
		t.byURI = map[string]*subscribers{}
	}
	set := t.byURI[uri]
	if set == nil {
		set = &subscribers{conns: map[*legacyConn]struct{}{}}
		t.byURI[uri] = set
		t.uriPeak = max(t.uriPeak, len(t.byURI))
	}
	set.conns[lc] = struct{}{}
	set.peak = max(set.peak, len(set.conns))
	t.subscriptions++
	return nil
}

func (t *legacyTable) unindexLocked(lc *legacyConn, uri string) {
	set := t.byURI[uri]
	if set == nil {
		return
	}
	if _, ok := set.conns[lc]; !ok {
		return
	}
	delete(set.conns, lc)
	if len(set.conns) == 0 {
		delete(t.byURI, uri)
		t.byURI = mapshrink.Shrunk(t.byURI, &t.uriPeak)
	} else {
		set.conns = mapshrink.Shrunk(set.conns, &set.peak)
	}
	t.subscriptions--
}

// listChanged tells every initialized connection that a list changed.
func (t *legacyTable) listChanged(kind string) {
	var bit uint8
	for i, l := range legacyLists {
		if l.kind == kind {
			bit = 1 << i
		}
	}
	if bit == 0 {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, lc := range t.conns {
		if lc.watching {
			lc.changed |= bit
			t.startLocked(lc)
		}
	}
}

// updated tells the connections subscribed to uri that it changed.
func (t *legacyTable) updated(uri string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	set := t.byURI[uri]
	if set == nil {
		return
	}
	for lc := range set.conns {
		// An update still waiting covers this one: the client reads the
		// resource after it anyway.
		if !slices.Contains(lc.updated, uri) {
			lc.updated = append(lc.updated, uri)
		}
		t.startLocked(lc)
	}
}

// startLocked starts telling lc what is marked, unless that is under way.
func (t *legacyTable) startLocked(lc *legacyConn) {
	if !lc.sending {
		lc.sending = true
		go t.send(lc)
	}
}

// send tells lc what is marked until nothing is, then ends.
func (t *legacyTable) send(lc *legacyConn) {
	for {
		t.mu.Lock()
		changed, updated := lc.changed, lc.updated
		lc.changed, lc.updated = 0, nil
		if lc.gone || (changed == 0 && len(updated) == 0) {
			lc.sending = false
			t.mu.Unlock()
			return
		}
		t.mu.Unlock()
		for i, l := range legacyLists {
			// List changes are told until the connection's input ends, as
			// long as the client can still ask for the list again.
			if changed&(1<<i) != 0 && !isDone(lc.conn.InputDone()) {
				t.notify(lc.conn, l.method, nil)
			}
		}
		for _, uri := range updated {
			t.notify(lc.conn, "notifications/resources/updated", map[string]any{"uri": uri})
		}
	}
}

func (t *legacyTable) notify(conn *rpc.Conn, method string, params any) {
	ctx, cancel := context.WithTimeout(context.Background(), legacyNotifyTimeout)
	err := conn.Notify(ctx, method, params)
	cancel()
	if err == nil {
		t.notified.Add(1)
		return
	}
	if isDone(conn.InputDone()) {
		return // the connection is ending: nobody left to tell
	}
	t.dropped.Add(1)
	t.dropLog.Refused("mcp: a notification to a legacy connection was dropped", "method", method, "error", err)
}

func isDone(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}
