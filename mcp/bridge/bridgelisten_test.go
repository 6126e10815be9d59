package bridge_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/agentwire/agentwire/client"
	"github.com/agentwire/agentwire/internal/wiretest"
	"github.com/agentwire/agentwire/mcp"
	"github.com/agentwire/agentwire/mcp/bridge"
	"github.com/agentwire/agentwire/mcp/host"
	"github.com/agentwire/agentwire/mcp/internal/mcptest"
	"github.com/agentwire/agentwire/mcp/streamable"
	"github.com/agentwire/agentwire/rpc"
)

// Clients that listen for the same notifications through the bridge share
// one stream on the server: 60 listeners fit a server whose stream budget
// is 2, each gets the change under its own subscription id, and the
// upstream stream closes after the last one leaves.
func TestBridgeListenersShareOneUpstreamStream(t *testing.T) {
	s := mcptest.NewServer(nil)
	c2sR, c2sW := io.Pipe()
	s2cR, s2cW := io.Pipe()
	up := rpc.New(c2sR, s2cW, s.Handler(), s.ConnOptions(&rpc.Options{Logger: wiretest.Quiet, MaxStreams: 2}))
	child, err := host.NewClient(context.Background(), s2cR, c2sW, &host.Options{Transport: &client.Options{Logger: wiretest.Quiet}})
	if err != nil {
		t.Fatal(err)
	}
	defer up.Close()
	defer child.Close()
	b := bridge.New(child)
	h := streamable.NewHandler(b, nil)
	srv := httptest.NewServer(h)
	defer func() {
		h.Shutdown(context.Background())
		srv.Close()
	}()
	sess, err := streamable.Connect(t.Context(), srv.URL+"/mcp", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()

	const n = 60
	var mu sync.Mutex
	seen := map[string]int{} // subscription id -> changes seen
	subs := make([]*host.Subscription, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sub, err := sess.Listen(t.Context(), host.ListenFilter{ToolsListChanged: true}, func(method string, p json.RawMessage) {
				var m struct {
					Meta map[string]json.RawMessage `json:"_meta"`
				}
				json.Unmarshal(p, &m)
				mu.Lock()
				seen[string(m.Meta[mcp.MetaSubscriptionID])]++
				mu.Unlock()
			})
			if err != nil {
				t.Errorf("listener %d: %v", i, err)
				return
			}
			if !sub.Honored().ToolsListChanged {
				t.Errorf("listener %d: honored %+v", i, sub.Honored())
			}
			subs[i] = sub
		}()
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	if st := up.Stats(); st.Streams != 1 || st.StreamsRefused != 0 {
		t.Fatalf("upstream streams: %+v", st)
	}
	if st := b.Stats(); st.SharedStreams != 1 {
		t.Errorf("bridge Stats %+v", st)
	}
	s.RemoveTool("fails")
	deadline := time.Now().Add(10 * time.Second)
	for {
		mu.Lock()
		got := len(seen)
		mu.Unlock()
		if got == n {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d listeners heard the change: %v", got, n, seen)
		}
		time.Sleep(10 * time.Millisecond)
	}
	for id, c := range seen {
		if c != 1 {
			t.Errorf("subscription %s heard %d changes", id, c)
		}
	}
	for _, sub := range subs {
		sub.Close()
	}
	// Once everyone has left, a new listener opens a new upstream stream.
	for time.Now().Before(deadline) {
		sub, err := sess.Listen(t.Context(), host.ListenFilter{ToolsListChanged: true}, nil)
		if err != nil {
			t.Fatal(err)
		}
		sub.Close()
		if up.Stats().Streams == 2 {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("the upstream stream was not reopened: %+v", up.Stats())
}
