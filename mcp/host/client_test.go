package host_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/agentwire/agentwire/jsonrpc"
	"github.com/agentwire/agentwire/mcp"
	"github.com/agentwire/agentwire/mcp/host"
	"github.com/agentwire/agentwire/mcp/internal/mcptest"
	"github.com/agentwire/agentwire/mcp/server"
	"github.com/agentwire/agentwire/rpc"
)

// discoverErr makes server/discover fail with the given error and passes
// everything else to a dual-era server.
func discoverErr(e *jsonrpc.Error) func(*server.Server) rpc.Handler {
	return func(s *server.Server) rpc.Handler {
		h := s.Handler()
		return rpc.HandlerFunc(func(ctx context.Context, r *rpc.Request) (any, error) {
			if r.Method == "server/discover" {
				return nil, e
			}
			return h.Handle(ctx, r)
		})
	}
}

func discoverResult(raw string) func(*server.Server) rpc.Handler {
	return func(s *server.Server) rpc.Handler {
		h := s.Handler()
		return rpc.HandlerFunc(func(ctx context.Context, r *rpc.Request) (any, error) {
			if r.Method == "server/discover" {
				return json.RawMessage(raw), nil
			}
			return h.Handle(ctx, r)
		})
	}
}

// guarantee E2: a result is modern.
func TestProbeModern(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sess, rec, err := mcptest.ConnectTo(t, nil, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		if sess.Era() != mcp.Modern || sess.ProtocolVersion() != "2026-07-28" || sess.Probe() != host.ProbeResult ||
			sess.ServerInfo().Name != "test-server" {
			t.Fatalf("era %s %s probe %s info %+v", sess.Era(), sess.ProtocolVersion(), sess.Probe(), sess.ServerInfo())
		}
		if got := rec.Saw(); len(got) != 1 || got[0] != "server/discover" {
			t.Fatalf("server saw %q", got)
		}
		tools, err := sess.ListTools(context.Background())
		if err != nil || len(tools) != 3 {
			t.Fatalf("tools %v %v", tools, err)
		}
		var steps []float64
		res, err := sess.CallTool(context.Background(), "slow", map[string]int{"steps": 3},
			host.WithProgress(func(p, total float64, _ string) { steps = append(steps, p) }))
		if err != nil || res.Content[0].Text != "done" || len(steps) != 3 || steps[2] != 3 {
			t.Fatalf("call %+v %v progress %v", res, err, steps)
		}
	})
}

// guarantee E2: any other error is legacy, whatever its code.
func TestProbeErrorFallsBackToLegacy(t *testing.T) {
	for _, code := range []int64{-32601, -32602, -32600, -32000, 0} {
		t.Run(string(jsonrpc.Int64ID(code)), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				sess, rec, err := mcptest.ConnectTo(t, nil, discoverErr(jsonrpc.Errorf(code, "initialize first")), nil)
				if err != nil {
					t.Fatal(err)
				}
				if sess.Era() != mcp.Legacy || sess.ProtocolVersion() != "2025-11-25" || sess.Probe() != host.ProbeError {
					t.Fatalf("era %s %s probe %s", sess.Era(), sess.ProtocolVersion(), sess.Probe())
				}
				synctest.Wait()
				if got := strings.Join(rec.Saw(), " "); got != "server/discover initialize notifications/initialized" {
					t.Fatalf("server saw %s", got)
				}
				res, err := sess.CallTool(context.Background(), "echo", map[string]string{"text": "legacy"})
				if err != nil || res.Content[0].Text != "legacy" {
					t.Fatalf("%+v %v", res, err)
				}
			})
		})
	}
}

// guarantee E2: -32022 is modern evidence; with no common version the client
// fails and never sends initialize.
func TestUnsupportedVersionNeverFallsBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := jsonrpc.NewError(mcp.CodeUnsupportedProtocolVersion, "Unsupported protocol version",
			map[string]any{"supported": []string{"2099-01-01"}, "requested": "2026-07-28"})
		_, rec, err := mcptest.ConnectTo(t, nil, discoverErr(e), nil)
		if !errors.Is(err, host.ErrNoCommonVersion) {
			t.Fatalf("err = %v", err)
		}
		synctest.Wait()
		for _, m := range rec.Saw() {
			if m == "initialize" {
				t.Fatal("the client fell back to initialize after -32022")
			}
		}
	})
}

// guarantees E2, E3: silence past the probe timeout is legacy (the silent legacy
// legacy server that ignores what it does not know), after exactly ProbeTimeout.
func TestSilentServerTimesOutToLegacy(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		sess, _, err := mcptest.ConnectTo(t, &server.Options{Eras: mcp.LegacyOnly, LegacySilent: true}, nil,
			&host.Options{ProbeTimeout: 500 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		if d := time.Since(start); sess.Era() != mcp.Legacy || sess.Probe() != host.ProbeTimeout || d != 500*time.Millisecond {
			t.Fatalf("era %s probe %s after %v", sess.Era(), sess.Probe(), d)
		}
	})
}

// ModernOnly does not fall back.
func TestModernModeRefusesLegacy(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, _, err := mcptest.ConnectTo(t, &server.Options{Eras: mcp.LegacyOnly}, nil, &host.Options{Eras: mcp.ModernOnly})
		if !errors.Is(err, host.ErrNotModern) {
			t.Fatalf("err = %v", err)
		}
	})
}

// LegacyOnly goes straight to initialize.
func TestLegacyModeSkipsProbe(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sess, rec, err := mcptest.ConnectTo(t, nil, nil, &host.Options{Eras: mcp.LegacyOnly})
		if err != nil || sess.Era() != mcp.Legacy || sess.Probe() != host.ProbeNone {
			t.Fatalf("%v %v", sess, err)
		}
		if got := rec.Saw(); got[0] != "initialize" {
			t.Fatalf("server saw %q", got)
		}
	})
}

// A malformed discover result is not modern evidence.
func TestMalformedDiscoverResultFallsBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cache := host.NewMemoryEraCache(nil)
		sess, _, err := mcptest.ConnectTo(t, nil, discoverResult(`{"resultType":"complete"}`), &host.Options{Cache: cache, CacheKey: "k"})
		if err != nil || sess.Era() != mcp.Legacy || sess.Probe() != host.ProbeError {
			t.Fatalf("%v %v", sess, err)
		}
		if _, ok := cache.Get("k"); ok {
			t.Error("a malformed probe response was cached")
		}
	})
}

// guarantees E4 and E5, with a fake clock: what each outcome teaches the cache.
func TestEraCacheRules(t *testing.T) {
	now := time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	newCache := func() *host.MemoryEraCache { return host.NewMemoryEraCache(&host.MemoryEraCacheOptions{Now: clock}) }

	t.Run("silence is not cached", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			cache := newCache()
			mcptest.ConnectTo(t, &server.Options{Eras: mcp.LegacyOnly, LegacySilent: true}, nil,
				&host.Options{Cache: cache, CacheKey: "k", ProbeTimeout: time.Second})
			if e, ok := cache.Get("k"); ok {
				t.Fatalf("silence cached %+v", e)
			}
		})
	})
	t.Run("a definitive rejection caches legacy, and the next connect skips the probe", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			cache := newCache()
			mcptest.ConnectTo(t, &server.Options{Eras: mcp.LegacyOnly}, nil, &host.Options{Cache: cache, CacheKey: "k"})
			if e, ok := cache.Get("k"); !ok || e.Era != mcp.Legacy {
				t.Fatalf("cache %+v %v", e, ok)
			}
			sess, rec, err := mcptest.ConnectTo(t, &server.Options{Eras: mcp.LegacyOnly}, nil, &host.Options{Cache: cache, CacheKey: "k"})
			if err != nil || sess.Probe() != host.ProbeCached || rec.Saw()[0] != "initialize" {
				t.Fatalf("second connect: %v probe %s saw %q", err, sess.Probe(), rec.Saw())
			}
		})
	})
	t.Run("legacy expires five minutes after the probe even while connections succeed", func(t *testing.T) {
		cache := newCache()
		cache.Put("k", host.EraEntry{Era: mcp.Legacy})
		for _, step := range []time.Duration{time.Minute, 2 * time.Minute, time.Minute, 59 * time.Second} {
			now = now.Add(step)
			if _, ok := cache.Get("k"); !ok {
				t.Fatalf("expired early, at +%v", step)
			}
		}
		now = now.Add(time.Second) // exactly 5 minutes after Put
		if _, ok := cache.Get("k"); ok {
			t.Fatal("legacy entry outlived its 5 minutes")
		}
	})
	t.Run("the lifetime is configurable", func(t *testing.T) {
		cache := host.NewMemoryEraCache(&host.MemoryEraCacheOptions{Now: clock, LegacyLifetime: time.Second})
		cache.Put("k", host.EraEntry{Era: mcp.Legacy})
		now = now.Add(time.Second)
		if _, ok := cache.Get("k"); ok {
			t.Fatal("custom lifetime ignored")
		}
	})
	t.Run("modern stays until forgotten, and is checked by the probe", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			cache := newCache()
			mcptest.ConnectTo(t, nil, nil, &host.Options{Cache: cache, CacheKey: "k"})
			now = now.Add(24 * time.Hour)
			e, ok := cache.Get("k")
			if !ok || e.Era != mcp.Modern || e.Version != "2026-07-28" {
				t.Fatalf("cache %+v %v", e, ok)
			}
			sess, rec, err := mcptest.ConnectTo(t, nil, nil, &host.Options{Cache: cache, CacheKey: "k"})
			if err != nil || sess.Era() != mcp.Modern || sess.ServerInfo().Name != "test-server" || rec.Saw()[0] != "server/discover" {
				t.Fatalf("cached modern: %v %s %q", err, sess.Probe(), rec.Saw())
			}
		})
	})
	t.Run("a failed negotiation forgets modern", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			cache := newCache()
			cache.Put("k", host.EraEntry{Era: mcp.Modern, Version: "2026-07-28"})
			rejectAll := func(s *server.Server) rpc.Handler {
				return rpc.HandlerFunc(func(ctx context.Context, r *rpc.Request) (any, error) {
					return nil, jsonrpc.NewError(mcp.CodeUnsupportedProtocolVersion, "Unsupported protocol version",
						map[string]any{"supported": []string{"2099-01-01"}, "requested": "2026-07-28"})
				})
			}
			if _, _, err := mcptest.ConnectTo(t, nil, rejectAll, &host.Options{Cache: cache, CacheKey: "k"}); !errors.Is(err, host.ErrNoCommonVersion) {
				t.Fatalf("err %v", err)
			}
			if e, ok := cache.Get("k"); ok {
				t.Fatalf("modern entry kept after a failed negotiation: %+v", e)
			}
		})
	})
	t.Run("a request refused for its version forgets modern", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			cache := newCache()
			rejectCalls := func(s *server.Server) rpc.Handler {
				h := s.Handler()
				return rpc.HandlerFunc(func(ctx context.Context, r *rpc.Request) (any, error) {
					if r.Method == "tools/call" {
						return nil, jsonrpc.NewError(mcp.CodeUnsupportedProtocolVersion, "Unsupported protocol version",
							map[string]any{"supported": []string{"2099-01-01"}, "requested": "2026-07-28"})
					}
					return h.Handle(ctx, r)
				})
			}
			sess, _, err := mcptest.ConnectTo(t, nil, rejectCalls, &host.Options{Cache: cache, CacheKey: "k"})
			if err != nil {
				t.Fatal(err)
			}
			if _, ok := cache.Get("k"); !ok {
				t.Fatal("modern not cached")
			}
			if _, err := sess.CallTool(context.Background(), "echo", map[string]string{"text": "x"}); err == nil {
				t.Fatal("call succeeded")
			}
			if _, ok := cache.Get("k"); ok {
				t.Fatal("CallTool's -32022 did not forget the cached era")
			}
		})
	})
	t.Run("cached legacy on an upgraded server is forgotten and the probe runs", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			cache := newCache()
			cache.Put("k", host.EraEntry{Era: mcp.Legacy})
			sess, rec, err := mcptest.ConnectTo(t, &server.Options{Eras: mcp.ModernOnly}, nil, &host.Options{Cache: cache, CacheKey: "k"})
			if err != nil || sess.Era() != mcp.Modern {
				t.Fatalf("%v %v saw %q", sess, err, rec.Saw())
			}
			if e, ok := cache.Get("k"); !ok || e.Era != mcp.Modern {
				t.Fatalf("cache %+v %v", e, ok)
			}
		})
	})
	t.Run("an explicit legacy-only version list caches legacy", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			cache := newCache()
			sess, _, err := mcptest.ConnectTo(t, nil, discoverResult(`{"resultType":"complete","supportedVersions":["2025-11-25"],"capabilities":{}}`),
				&host.Options{Cache: cache, CacheKey: "k"})
			if err != nil || sess.Era() != mcp.Legacy {
				t.Fatalf("%v %v", sess, err)
			}
			if e, ok := cache.Get("k"); !ok || e.Era != mcp.Legacy {
				t.Fatalf("cache %+v %v", e, ok)
			}
		})
	})
}

// guarantee E6, client side: a listen stream is acknowledged, notifications with
// its id reach the callback, and the client's Close ends it.
func TestClientListen(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := mcptest.NewServer(nil)
		sess, _, err := mcptest.ConnectTo(t, nil, func(*server.Server) rpc.Handler { return srv.Handler() }, nil)
		if err != nil {
			t.Fatal(err)
		}
		var mu sync.Mutex
		var got []string
		sub, err := sess.Listen(context.Background(), host.ListenFilter{ToolsListChanged: true, PromptsListChanged: true},
			func(method string, _ json.RawMessage) {
				mu.Lock()
				got = append(got, method)
				mu.Unlock()
			})
		if err != nil {
			t.Fatal(err)
		}
		if h := sub.Honored(); !h.ToolsListChanged || h.PromptsListChanged {
			t.Errorf("honored %+v", h)
		}
		srv.AddTool(mcp.Tool{Name: "new"}, nil)
		synctest.Wait()
		mu.Lock()
		if len(got) != 1 || got[0] != "notifications/tools/list_changed" {
			t.Errorf("notifications %q", got)
		}
		mu.Unlock()
		sub.Close()
		if err := sub.Err(); err != nil {
			t.Errorf("Err after Close = %v", err)
		}
	})
}

// The server may end a stream with a final result or with
// notifications/cancelled; the client accepts both (guarantee E6).
func TestClientListenEndedByServer(t *testing.T) {
	for _, how := range []string{"result", "cancelled"} {
		t.Run(how, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ender := func(s *server.Server) rpc.Handler {
					h := s.Handler()
					return rpc.HandlerFunc(func(ctx context.Context, r *rpc.Request) (any, error) {
						if r.Method != "subscriptions/listen" {
							return h.Handle(ctx, r)
						}
						meta := map[string]any{"io.modelcontextprotocol/subscriptionId": r.ID}
						r.Notify("notifications/subscriptions/acknowledged", map[string]any{"_meta": meta, "notifications": map[string]any{}})
						time.Sleep(time.Second)
						if how == "result" {
							return map[string]any{"resultType": "complete", "_meta": meta}, nil
						}
						r.Conn().Notify(ctx, "notifications/cancelled", map[string]any{"requestId": r.ID})
						return nil, rpc.ErrNoResponse
					})
				}
				sess, _, err := mcptest.ConnectTo(t, nil, ender, nil)
				if err != nil {
					t.Fatal(err)
				}
				sub, err := sess.Listen(context.Background(), host.ListenFilter{ToolsListChanged: true}, nil)
				if err != nil {
					t.Fatal(err)
				}
				<-sub.Done()
				want := error(nil)
				if how == "cancelled" {
					want = host.ErrSubscriptionCancelled
				}
				if err := sub.Err(); !errors.Is(err, want) && err != want {
					t.Fatalf("Err = %v, want %v", err, want)
				}
			})
		})
	}
}

func TestListenNeedsModern(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sess, _, err := mcptest.ConnectTo(t, nil, nil, &host.Options{Eras: mcp.LegacyOnly})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := sess.Listen(context.Background(), host.ListenFilter{}, nil); !errors.Is(err, host.ErrListenNeedsModern) {
			t.Fatalf("err = %v", err)
		}
	})
}

// A legacy server's list change names no subscription: it reaches
// Options.OnNotification, which is where nothing else takes it.
func TestALegacyListChangeReachesOnNotification(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := mcptest.NewServer(nil)
		got := make(chan string, 4)
		sess, err := mcptest.ConnectServerWith(t, s, &host.Options{Eras: mcp.LegacyOnly,
			OnNotification: func(method string, _ json.RawMessage) { got <- method }})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := sess.ListTools(t.Context()); err != nil {
			t.Fatal(err)
		}
		s.RemoveTool("fails")
		if m := <-got; m != mcp.MethodToolsListChanged {
			t.Errorf("OnNotification got %s", m)
		}
	})
}

// Session.OnNotification adds a hearer of the notifications nothing else
// takes, beside Options.OnNotification; after stop it hears no more.
func TestOnNotificationHearsUntilStopped(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := mcptest.NewServer(nil)
		opt := make(chan string, 4)
		sess, err := mcptest.ConnectServerWith(t, s, &host.Options{Eras: mcp.LegacyOnly,
			OnNotification: func(method string, _ json.RawMessage) { opt <- method }})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := sess.ListTools(t.Context()); err != nil {
			t.Fatal(err)
		}
		heard := make(chan string, 4)
		stop := sess.OnNotification(func(method string, _ json.RawMessage) { heard <- method })
		s.RemoveTool("fails")
		if m := <-heard; m != mcp.MethodToolsListChanged {
			t.Errorf("the hearer got %s", m)
		}
		<-opt
		stop()
		s.RemoveTool("echo")
		<-opt // Options.OnNotification still hears it
		synctest.Wait()
		if len(heard) != 0 {
			t.Errorf("a stopped hearer heard %s", <-heard)
		}
	})
}
