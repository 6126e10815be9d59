package interop

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"
)

// streamCutter is a reverse proxy in front of an MCP endpoint that can
// drop the GET streams passing through it (abruptly, as a lost network
// would) and hold back their reconnection until released.
type streamCutter struct {
	proxy *httputil.ReverseProxy

	mu      sync.Mutex
	streams map[*http.Request]context.CancelFunc
	hold    chan struct{} // closed: GETs pass; open: they wait
	gets    int           // GET streams seen
	resumed []string      // the Last-Event-ID of each GET that carried one
}

func newStreamCutter(target string) *streamCutter {
	u, _ := url.Parse(target)
	c := &streamCutter{streams: map[*http.Request]context.CancelFunc{}, hold: make(chan struct{})}
	close(c.hold)
	c.proxy = &httputil.ReverseProxy{
		Rewrite:       func(r *httputil.ProxyRequest) { r.SetURL(&url.URL{Scheme: u.Scheme, Host: u.Host}) },
		FlushInterval: -1, // event streams pass through as they come
		ErrorLog:      nil,
	}
	return c
}

func (c *streamCutter) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		c.proxy.ServeHTTP(w, r)
		return
	}
	c.mu.Lock()
	hold := c.hold
	c.mu.Unlock()
	<-hold
	ctx, cancel := context.WithCancel(r.Context())
	r = r.WithContext(ctx)
	c.mu.Lock()
	c.gets++
	if id := r.Header.Get("Last-Event-ID"); id != "" {
		c.resumed = append(c.resumed, id)
	}
	c.streams[r] = cancel
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		delete(c.streams, r)
		c.mu.Unlock()
		cancel()
	}()
	c.proxy.ServeHTTP(w, r)
	if ctx.Err() != nil && r.Context().Err() != nil {
		// Cut: end the client's connection without ending the response,
		// as a dropped network does.
		panic(http.ErrAbortHandler)
	}
}

// cut drops every GET stream open now and holds new ones back.
func (c *streamCutter) cut() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.hold = make(chan struct{})
	n := len(c.streams)
	for _, cancel := range c.streams {
		cancel()
	}
	return n
}

func (c *streamCutter) release() {
	c.mu.Lock()
	defer c.mu.Unlock()
	close(c.hold)
}

func (c *streamCutter) open() (open, seen int, resumed []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.streams), c.gets, append([]string(nil), c.resumed...)
}

// sessionsClient is sessions-client.mjs: a TypeScript SDK v1 client
// driven one command at a time.
type sessionsClient struct {
	t      *testing.T
	in     io.WriteCloser
	events chan map[string]any
	n      int
}

func startSessionsClient(t *testing.T, endpoint string) (*sessionsClient, map[string]any) {
	t.Helper()
	cmd := exec.Command("node", "sessions-client.mjs", endpoint)
	in, _ := cmd.StdinPipe()
	out, _ := cmd.StdoutPipe()
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := &sessionsClient{t: t, in: in, events: make(chan map[string]any, 100)}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			var m map[string]any
			if json.Unmarshal(sc.Bytes(), &m) == nil {
				c.events <- m
			}
		}
		close(c.events)
	}()
	t.Cleanup(func() {
		in.Close()
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			t.Logf("sessions-client.mjs stderr:\n%s", stderr.String())
		}
	})
	ready := c.next(func(m map[string]any) bool { return m["ready"] == true }, "ready")
	return c, ready
}

// next waits for the first event that matches, failing on a timeout.
// Events that do not match are kept for later calls in order.
func (c *sessionsClient) next(match func(map[string]any) bool, what string) map[string]any {
	c.t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		select {
		case m, ok := <-c.events:
			if !ok {
				c.t.Fatalf("the client ended before %s", what)
			}
			if match(m) {
				return m
			}
			c.t.Logf("client: %v", m)
		case <-deadline:
			c.t.Fatalf("no %s within 30s", what)
		}
	}
}

// do runs a command and waits for its answer; notifications that arrive
// meanwhile are returned too, in order.
func (c *sessionsClient) do(op map[string]any) (result map[string]any, seen []map[string]any) {
	c.t.Helper()
	c.n++
	op["n"] = c.n
	line, _ := json.Marshal(op)
	if _, err := c.in.Write(append(line, '\n')); err != nil {
		c.t.Fatal(err)
	}
	deadline := time.After(30 * time.Second)
	for {
		select {
		case m, ok := <-c.events:
			if !ok {
				c.t.Fatalf("the client ended during %v", op)
			}
			if n, ok := m["done"].(float64); ok && int(n) == c.n {
				if e, ok := m["error"]; ok {
					c.t.Fatalf("%v: %v", op, e)
				}
				return m, seen
			}
			seen = append(seen, m)
		case <-deadline:
			c.t.Fatalf("%v: no answer within 30s", op)
		}
	}
}

func notificationsIn(events []map[string]any) []string {
	var out []string
	for _, m := range events {
		if n, ok := m["notification"].(string); ok {
			if p, ok := m["params"].(map[string]any); ok && p["uri"] != nil {
				n += " " + fmt.Sprint(p["uri"])
			}
			out = append(out, n)
		}
	}
	return out
}

// Issue acceptance: a 2025-11-25 client holding a session (the official
// TypeScript SDK v1) receives notifications/tools/list_changed and
// notifications/resources/updated on its GET stream, and after the stream
// drops (the network cuts it, and its reconnection is held back while
// more changes happen) it resumes with Last-Event-ID without losing an
// event.
func TestLegacySessionClientHearsChangesOnItsGETStreamAndResumes(t *testing.T) {
	for _, target := range []struct {
		name string
		args []string
	}{
		{"serve", []string{"serve", "mcp", "--fixtures", "conformance", "--http", "127.0.0.1:0", "--sessions"}},
		// The bridge in front of a 2026-07-28 stdio server (the session's
		// subscriptions ride its shared listen streams) and of a legacy
		// one (one upstream subscription, the server's own notifications).
		{"bridge-modern", []string{"bridge", "--http", "127.0.0.1:0", "--sessions", "--", binary, "serve", "mcp", "--fixtures", "conformance"}},
		{"bridge-legacy", []string{"bridge", "--http", "127.0.0.1:0", "--sessions", "--", binary, "serve", "mcp", "--fixtures", "conformance", "--era", "legacy"}},
	} {
		t.Run(target.name, func(t *testing.T) { sessionClientHearsAndResumes(t, target.args) })
	}
}

func sessionClientHearsAndResumes(t *testing.T, args []string) {
	backend := startHTTP(t, args...)
	cutter := newStreamCutter(backend)
	front := httptest.NewServer(cutter)
	defer front.Close()
	defer front.CloseClientConnections()
	u, _ := url.Parse(backend)
	c, ready := startSessionsClient(t, front.URL+u.Path)
	if s, _ := ready["session"].(string); s == "" {
		t.Fatalf("no Mcp-Session-Id: %v", ready)
	}
	if v := ready["protocolVersion"]; v != "2025-11-25" {
		t.Errorf("protocol version %v, want 2025-11-25", v)
	}
	waitFor(t, "the GET stream", func() bool { open, _, _ := cutter.open(); return open == 1 })

	c.do(map[string]any{"op": "subscribe", "uri": "test://watched-resource"})
	_, seen := c.do(map[string]any{"op": "call", "name": "test_trigger_tool_change"})
	_, more := c.do(map[string]any{"op": "call", "name": "test_trigger_resource_update", "arguments": map[string]any{"uri": "test://watched-resource"}})
	seen = append(seen, more...)
	want := []string{"notifications/tools/list_changed", "notifications/resources/updated test://watched-resource"}
	for _, w := range want {
		found := false
		for _, g := range notificationsIn(seen) {
			found = found || g == w
		}
		if !found {
			// Notifications on the GET stream may trail the POST's answer.
			c.next(func(m map[string]any) bool {
				return notificationsIn([]map[string]any{m}) != nil && notificationsIn([]map[string]any{m})[0] == w
			}, w)
		}
	}

	// The network drops the stream; three changes happen before the
	// client gets through again.
	if n := cutter.cut(); n != 1 {
		t.Fatalf("%d GET streams cut, want 1", n)
	}
	var during []map[string]any
	for _, call := range []map[string]any{
		{"op": "call", "name": "test_trigger_tool_change"},
		{"op": "call", "name": "test_trigger_resource_update", "arguments": map[string]any{"uri": "test://watched-resource"}},
		{"op": "call", "name": "test_trigger_tool_change"},
	} {
		_, s := c.do(call)
		during = append(during, s...)
	}
	if got := notificationsIn(during); len(got) > 0 {
		t.Fatalf("notifications arrived while the stream was cut: %v", got)
	}
	cutter.release()
	wantAfter := []string{"notifications/tools/list_changed", "notifications/resources/updated test://watched-resource", "notifications/tools/list_changed"}
	for i, w := range wantAfter {
		got := c.next(func(m map[string]any) bool { return m["notification"] != nil }, fmt.Sprintf("replayed event %d (%s)", i+1, w))
		if g := notificationsIn([]map[string]any{got}); len(g) != 1 || g[0] != w {
			t.Errorf("replayed event %d: %v, want %s", i+1, g, w)
		}
	}
	_, _, resumed := cutter.open()
	if len(resumed) == 0 {
		t.Error("the client reconnected without Last-Event-ID")
	}
	c.do(map[string]any{"op": "close"})
}

// waitFor polls cond (a state another process reaches) for up to 30 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("no %s within 30s", what)
}
