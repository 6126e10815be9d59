package server_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"

	"github.com/agentwire/agentwire/internal/wiretest"
	"github.com/agentwire/agentwire/mcp"
	"github.com/agentwire/agentwire/mcp/internal/mcptest"
	"github.com/agentwire/agentwire/mcp/server"
)

// memBus is a Bus in memory that several servers share; down makes it
// refuse, as an unreachable one does.
type memBus struct {
	mu   sync.Mutex
	subs map[int]func([]byte)
	next int
	down atomic.Bool
}

func (b *memBus) Publish(ctx context.Context, msg []byte) error {
	if b.down.Load() {
		return errors.New("bus down")
	}
	b.mu.Lock()
	var fs []func([]byte)
	for _, f := range b.subs {
		fs = append(fs, f)
	}
	b.mu.Unlock()
	for _, f := range fs {
		go f(msg)
	}
	return nil
}

func (b *memBus) Subscribe(ctx context.Context, deliver func([]byte)) (func(), error) {
	if b.down.Load() {
		return nil, errors.New("bus down")
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.subs == nil {
		b.subs = map[int]func([]byte){}
	}
	b.next++
	id := b.next
	b.subs[id] = deliver
	return func() { b.mu.Lock(); delete(b.subs, id); b.mu.Unlock() }, nil
}

// Issue 18 (listen fan-out): a resource updated and a tool list changed
// on one instance reach the listen stream held by another, once; a bus
// that refuses costs the local streams nothing and is counted.
func TestAChangeOnOneInstanceReachesListenStreamsOnAnother(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		bus := &memBus{}
		a := mcptest.NewServer(&server.Options{Bus: bus})
		b := mcptest.NewServer(&server.Options{Bus: bus})
		defer a.Shutdown(context.Background())
		defer b.Shutdown(context.Background())
		for _, s := range []*server.Server{a, b} {
			s.AddResource(mcp.Resource{URI: "test://r", Name: "r"}, func(ctx context.Context, r *server.ReadRequest) ([]mcp.ResourceContents, error) {
				return []mcp.ResourceContents{{URI: "test://r", Text: "x"}}, nil
			})
		}
		synctest.Wait() // the registrations' own fan-out settles
		wb := wiretest.Start(t, b.Handler(), b.ConnOptions(nil), true)
		defer wb.Finish()
		wb.Exchange(`{"jsonrpc":"2.0","id":"L","method":"subscriptions/listen","params":{` + mcptest.Meta + `,"notifications":{"toolsListChanged":true,"resourceSubscriptions":["test://r"]}}}`)

		a.ResourceUpdated("test://r")
		synctest.Wait()
		wb.Settle()
		got := wb.Take()
		if len(got) != 1 || !strings.Contains(got[0], `"method":"notifications/resources/updated"`) || !strings.Contains(got[0], `"uri":"test://r"`) {
			t.Fatalf("b's stream after a's update: %q", got)
		}
		a.RemoveTool("fails")
		synctest.Wait()
		wb.Settle()
		if got := wb.Take(); len(got) != 1 || !strings.Contains(got[0], "notifications/tools/list_changed") {
			t.Fatalf("b's stream after a's tool change: %q", got)
		}
		if st := b.BusStats(); st.Received < 2 {
			t.Fatalf("b's bus stats %+v", st)
		}

		bus.down.Store(true)
		b.ResourceUpdated("test://r") // b's own stream still hears it
		synctest.Wait()
		wb.Settle()
		if got := wb.Take(); len(got) != 1 || !strings.Contains(got[0], "notifications/resources/updated") {
			t.Fatalf("b's own update with the bus down: %q", got)
		}
		if st := b.BusStats(); st.Failed != 1 {
			t.Fatalf("a refused publish is not counted: %+v", st)
		}
	})
}
