package bridge

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"runtime"
	"strings"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/agentwire/agentwire/client"
	"github.com/agentwire/agentwire/internal/wiretest"
	"github.com/agentwire/agentwire/jsonrpc"
	"github.com/agentwire/agentwire/mcp"
	"github.com/agentwire/agentwire/mcp/host"
	"github.com/agentwire/agentwire/mcp/internal/mcptest"
	"github.com/agentwire/agentwire/mcp/server"
	"github.com/agentwire/agentwire/rpc"
)

// Legacy sessions through the bridge: each session is one long-lived
// connection of SessionHandler's, fed raw wire lines with the route's
// note, as the Streamable HTTP transport makes it; what it writes is
// recorded with the request it belongs to (Outbound.Related: "" for the
// session's GET stream).

type sent struct {
	kind    jsonrpc.Kind
	method  string
	related string
	line    string
}

type sessionWire struct {
	t    *testing.T
	conn *rpc.Conn
	mu   sync.Mutex
	out  []sent
}

func (w *sessionWire) WriteMessage(m *rpc.Outbound) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.out = append(w.out, sent{kind: m.Kind, method: m.Method, related: string(m.Related), line: string(m.AppendTo(nil))})
	return nil
}

func (w *sessionWire) post(line string) {
	w.t.Helper()
	raw := []byte(line)
	msg, err := jsonrpc.Decode(raw, nil)
	if err != nil {
		w.t.Fatalf("bad test line %s: %v", line, err)
	}
	n := &mcp.Routed{Era: mcp.Legacy, Version: "2025-11-25"}
	mcp.ParseRequestParams(msg.Params, &n.Params)
	if err := w.conn.ReceiveDecoded(raw, &msg, n); err != nil {
		w.t.Fatalf("push: %v", err)
	}
}

func (w *sessionWire) take() []sent {
	synctest.Wait()
	w.mu.Lock()
	defer w.mu.Unlock()
	out := w.out
	w.out = nil
	return out
}

// call posts a request and returns its one answer.
func (w *sessionWire) call(line string) string {
	w.t.Helper()
	w.post(line)
	got := w.take()
	if len(got) != 1 || (got[0].kind != jsonrpc.KindResult && got[0].kind != jsonrpc.KindError) {
		w.t.Fatalf("%s answered %+v", line, got)
	}
	return got[0].line
}

// bridged is a bridge in front of an in-memory server of the given era.
type bridged struct {
	t  *testing.T
	up *server.Server
	b  *Bridge
}

// runBridged builds the server, its session and the bridge inside a
// bubble, and ends them all before the bubble does.
func runBridged(t *testing.T, eras mcp.Eras, f func(t *testing.T, br *bridged)) {
	synctest.Test(t, func(t *testing.T) {
		up := mcptest.NewServer(&server.Options{Eras: eras, Logger: wiretest.Quiet})
		for _, u := range []string{"test://a", "test://b"} {
			up.AddResource(mcp.Resource{URI: u, Name: u}, func(context.Context, *server.ReadRequest) ([]mcp.ResourceContents, error) {
				return []mcp.ResourceContents{{URI: u, Text: "x"}}, nil
			})
		}
		c2sR, c2sW := io.Pipe()
		s2cR, s2cW := io.Pipe()
		conn := rpc.New(c2sR, s2cW, up.Handler(), up.ConnOptions(&rpc.Options{Logger: wiretest.Quiet}))
		copts := &host.Options{Transport: &client.Options{Logger: wiretest.Quiet}}
		if eras == mcp.LegacyOnly {
			copts.Eras = mcp.LegacyOnly
		}
		sess, err := host.NewClient(context.Background(), s2cR, c2sW, copts)
		if err != nil {
			t.Fatal(err)
		}
		if want := map[mcp.Eras]mcp.Era{mcp.BothEras: mcp.Modern, mcp.LegacyOnly: mcp.Legacy}[eras]; sess.Era() != want {
			t.Fatalf("the bridge's session is %s", sess.Era())
		}
		defer func() { // also after a failed check: nothing is left in the bubble
			synctest.Wait()
			sess.Close()
			conn.Wait()
		}()
		br := &bridged{t: t, up: up, b: New(sess)}
		f(t, br)
	})
}

// open makes a session and initializes it.
func (br *bridged) open() *sessionWire {
	w := &sessionWire{t: br.t}
	w.conn = rpc.NewMessages(nil, w, br.b.SessionHandler(), br.b.ExchangeOptions(&rpc.Options{Logger: wiretest.Quiet}))
	got := w.call(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}`)
	if !strings.Contains(got, `"protocolVersion":"2025-11-25"`) {
		br.t.Fatalf("initialize: %s", got)
	}
	w.post(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	return w
}

func subscribe(w *sessionWire, id int, uri string, on bool) {
	w.t.Helper()
	method := "resources/subscribe"
	if !on {
		method = "resources/unsubscribe"
	}
	if got := w.call(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":%q,"params":{"uri":%q}}`, id, method, uri)); !strings.Contains(got, `"result":{}`) {
		w.t.Fatalf("%s %s: %s", method, uri, got)
	}
}

// updated checks that w was told, outside any request, exactly of uris'
// updates, in order.
func updated(t *testing.T, w *sessionWire, uris ...string) {
	t.Helper()
	got := w.take()
	var seen []string
	for _, m := range got {
		if m.method != "notifications/resources/updated" || m.related != "" {
			t.Errorf("not an update outside any request: %+v", m)
			continue
		}
		var p struct {
			Params map[string]json.RawMessage `json:"params"`
		}
		json.Unmarshal([]byte(m.line), &p)
		if _, ok := p.Params["_meta"]; ok {
			t.Errorf("a legacy session is told a subscription id it never had: %s", m.line)
		}
		var uri string
		json.Unmarshal(p.Params["uri"], &uri)
		seen = append(seen, uri)
	}
	if strings.Join(seen, " ") != strings.Join(uris, " ") {
		t.Errorf("told of %q, want %q", seen, uris)
	}
}

// Two sessions with different subscriptions each hear only of their own
// resources' updates, through a 2026-07-28 server's shared listen
// streams; the server's stream for a URI closes when its last session
// unsubscribes or ends, and neither subscribe nor setLevel reaches the
// server.
func TestBridgeSessionsHearOnlyTheirOwnUpdatesFromAModernServer(t *testing.T) {
	runBridged(t, mcp.BothEras, func(t *testing.T, br *bridged) {
		a, b := br.open(), br.open()
		defer a.conn.Close()
		lists := br.b.Stats().SharedStreams // the sessions' list-change stream
		if lists != 1 {
			t.Fatalf("the sessions share %d list-change streams", lists)
		}
		subscribe(a, 1, "test://a", true)
		subscribe(b, 1, "test://b", true)
		subscribe(b, 2, "test://a", true)
		if st := br.b.Stats(); st.SharedStreams != 3 {
			t.Fatalf("streams %+v", st)
		}
		br.up.ResourceUpdated("test://b")
		updated(t, a)
		updated(t, b, "test://b")
		br.up.ResourceUpdated("test://a")
		updated(t, a, "test://a")
		updated(t, b, "test://a")

		subscribe(b, 3, "test://b", false)
		synctest.Wait()
		if st := br.b.Stats(); st.SharedStreams != 2 {
			t.Fatalf("after the last session left test://b: %+v", st)
		}
		br.up.ResourceUpdated("test://b")
		updated(t, b)
		b.conn.Close()
		synctest.Wait()
		if st := br.b.Stats(); st.SharedStreams != 2 || st.Sessions != 1 {
			t.Fatalf("after b ended (a still holds test://a): %+v", st)
		}
		br.up.ResourceUpdated("test://a")
		updated(t, a, "test://a")
		// The server was never asked to subscribe: its own table is empty.
		if st := br.up.LegacyStats(); st.Subscriptions != 0 {
			t.Errorf("the server holds %d legacy subscriptions", st.Subscriptions)
		}
		a.conn.Close()
		synctest.Wait()
		if st := br.b.Stats(); st.SharedStreams != 0 || st.Sessions != 0 {
			t.Fatalf("after the last session ended: %+v", st)
		}
	})
}

// Sessions hear of the server's list changes outside any request.
func TestBridgeSessionsHearOfListChangesFromAModernServer(t *testing.T) {
	runBridged(t, mcp.BothEras, func(t *testing.T, br *bridged) {
		a := br.open()
		defer a.conn.Close()
		br.up.AddTool(mcp.Tool{Name: "late"}, nil)
		got := a.take()
		if len(got) != 1 || got[0].related != "" {
			t.Fatalf("after AddTool: %+v", got)
		}
		mcptest.JSONEq(t, got[0].line, `{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}`)
	})
}

// With a legacy server, the bridge subscribes upstream once per URI for
// all the sessions that want it and unsubscribes after the last one
// leaves (by unsubscribing or ending); each session hears only of its own
// URIs' updates and every session of list changes; the server's log lines,
// which name no request, reach no session (regression: they were fanned
// out to every session, showing one client's log lines to all others).
func TestBridgeSessionsShareALegacyServersSubscriptions(t *testing.T) {
	runBridged(t, mcp.LegacyOnly, func(t *testing.T, br *bridged) {
		a, b := br.open(), br.open()
		defer a.conn.Close()
		subscribe(a, 1, "test://a", true)
		subscribe(b, 1, "test://b", true)
		subscribe(b, 2, "test://a", true)
		subscribe(b, 3, "test://a", true) // held already
		if st := br.up.LegacyStats(); st.Subscriptions != 2 {
			t.Fatalf("the server holds %d subscriptions, want one per URI", st.Subscriptions)
		}
		// What the shared session hears outside its calls (its
		// OnNotification) is fanned out.
		br.b.fromServer("notifications/resources/updated", json.RawMessage(`{"uri":"test://b"}`))
		updated(t, a)
		updated(t, b, "test://b")
		br.b.fromServer("notifications/resources/updated", json.RawMessage(`{"uri":"test://a"}`))
		updated(t, a, "test://a")
		updated(t, b, "test://a")

		if got := a.call(`{"jsonrpc":"2.0","id":9,"method":"logging/setLevel","params":{"level":"error"}}`); !strings.Contains(got, `"result":{}`) {
			t.Fatalf("setLevel: %s", got)
		}
		// A legacy server's log line names no request: whose it is cannot
		// be told, so no session is shown it (it may be another
		// client's).
		br.b.fromServer("notifications/message", json.RawMessage(`{"level":"error","data":"someone else's"}`))
		for _, w := range []*sessionWire{a, b} {
			if got := w.take(); len(got) != 0 {
				t.Errorf("a legacy server's log line was fanned out to a session: %+v", got)
			}
		}
		br.b.fromServer(mcp.MethodToolsListChanged, nil)
		for _, w := range []*sessionWire{a, b} {
			if got := w.take(); len(got) != 1 || got[0].method != mcp.MethodToolsListChanged {
				t.Errorf("list change: %+v", got)
			}
		}

		subscribe(b, 4, "test://b", false)
		if st := br.up.LegacyStats(); st.Subscriptions != 1 {
			t.Fatalf("after the last session left test://b the server holds %d", st.Subscriptions)
		}
		b.conn.Close()
		synctest.Wait()
		if st := br.up.LegacyStats(); st.Subscriptions != 1 {
			t.Fatalf("after b ended, a still holds test://a: the server holds %d", st.Subscriptions)
		}
		a.conn.Close()
		synctest.Wait()
		if st := br.up.LegacyStats(); st.Subscriptions != 0 {
			t.Fatalf("after the last session ended the server holds %d", st.Subscriptions)
		}
		if st := br.b.Stats(); st.Sessions != 0 || st.UpstreamSubscriptions != 0 {
			t.Fatalf("bridge %+v", st)
		}
	})
}

// A session's requests other than its own state are forwarded: a call's
// progress belongs to that call.
func TestBridgeSessionForwardsCallsWithTheirProgress(t *testing.T) {
	for _, eras := range []mcp.Eras{mcp.BothEras, mcp.LegacyOnly} {
		t.Run(fmt.Sprint(eras), func(t *testing.T) {
			runBridged(t, eras, func(t *testing.T, br *bridged) {
				a := br.open()
				defer a.conn.Close()
				a.post(`{"jsonrpc":"2.0","id":"c","method":"tools/call","params":{"name":"slow","arguments":{"steps":2},"_meta":{"progressToken":"p"}}}`)
				got := a.take()
				if len(got) != 3 || got[2].kind != jsonrpc.KindResult || !strings.Contains(got[2].line, "done") {
					t.Fatalf("the call wrote %+v", got)
				}
				for _, m := range got {
					if m.related != `"c"` {
						t.Errorf("belongs to %q, not the call: %s", m.related, m.line)
					}
				}
			})
		})
	}
}

// Idle sessions cost the bridge no goroutine each.
func TestBridgeIdleSessionsCostNoGoroutines(t *testing.T) {
	runBridged(t, mcp.LegacyOnly, func(t *testing.T, br *bridged) {
		synctest.Wait()
		before := runtime.NumGoroutine()
		ws := make([]*sessionWire, 500)
		for i := range ws {
			ws[i] = br.open()
			subscribe(ws[i], 1, "test://a", true)
		}
		synctest.Wait()
		if grown := runtime.NumGoroutine() - before; grown > 10 {
			t.Errorf("500 idle sessions run %d goroutines", grown)
		}
		for _, w := range ws {
			w.conn.Close()
		}
		synctest.Wait()
		if st := br.b.Stats(); st.Sessions != 0 || st.UpstreamSubscriptions != 0 {
			t.Fatalf("after they closed: %+v", st)
		}
		if st := br.up.LegacyStats(); st.Subscriptions != 0 {
			t.Fatalf("the server still holds %d subscriptions", st.Subscriptions)
		}
	})
}

// A legacy server's notifications outside calls reach the bridge's
// sessions through the upstream session itself (host.Session's
// OnNotification), not only when handed to the bridge: the server's
// resources/updated for a subscribed URI and its list change arrive on
// the session's connection, outside any request.
func TestBridgeSessionsHearALegacyServersOwnNotifications(t *testing.T) {
	runBridged(t, mcp.LegacyOnly, func(t *testing.T, br *bridged) {
		a := br.open()
		defer a.conn.Close()
		subscribe(a, 1, "test://a", true)
		br.up.ResourceUpdated("test://b") // not subscribed
		br.up.ResourceUpdated("test://a")
		synctest.Wait()
		updated(t, a, "test://a")
		br.up.RemoveResource("test://b")
		synctest.Wait()
		if got := a.take(); len(got) != 1 || got[0].method != "notifications/resources/list_changed" || got[0].related != "" {
			t.Errorf("list change: %+v", got)
		}
	})
}
