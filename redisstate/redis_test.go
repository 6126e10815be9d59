package redisstate

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/agentwire/agentwire/internal/debpkg"
	"github.com/agentwire/agentwire/mcp/tasks/storetest"
)

// TestMain checks that no test leaves a goroutine behind: a State's, a
// subscriber's, or a client's.
// go-redis logs a failed dial on its own (a test that stops Redis makes
// many): quiet here.
func TestMain(m *testing.M) {
	redis.SetLogger(quietRedis{})
	goleak.VerifyTestMain(m)
}

type quietRedis struct{}

func (quietRedis) Printf(context.Context, string, ...any) {}

var quiet = slog.New(slog.DiscardHandler)

// redisServer is a redis-server of one test's own (debpkg.StartRedis:
// Debian's, fetched into the tests' cache when none is installed), on a
// port of its own, that the test may stop and start again (the same
// port, empty: no persistence), pause and resume.
type redisServer struct{ *debpkg.Redis }

func startRedis(t *testing.T) *redisServer {
	t.Helper()
	return &redisServer{debpkg.StartRedis(t)}
}

// client returns a go-redis client to r, closed at cleanup: short
// timeouts, and ContextTimeoutEnabled so that OpTimeout bounds every
// command.
func (r *redisServer) client(t *testing.T) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{
		Addr: r.Addr(), ContextTimeoutEnabled: true,
		DialTimeout: time.Second, ReadTimeout: time.Second, WriteTimeout: time.Second,
		MaxRetries: 1, DialerRetries: 1,
	})
	t.Cleanup(func() { c.Close() })
	return c
}

// newState returns a State over a client of its own to r, closed at
// cleanup (before its client).
func newState(t *testing.T, r *redisServer, o Options) *State {
	t.Helper()
	c := r.client(t)
	if o.Logger == nil {
		o.Logger = quiet
	}
	if o.OpTimeout == 0 {
		o.OpTimeout = 500 * time.Millisecond
	}
	if o.Prefix == "" {
		o.Prefix = "test:"
	}
	s := New(c, &o)
	t.Cleanup(func() { s.Close() })
	return s
}

// eventually polls cond until it holds or the deadline passes.
var eventually = storetest.Eventually

// waitListening waits until the State's Pub/Sub connection is subscribed.
func waitListening(t *testing.T, s *State) {
	t.Helper()
	eventually(t, 5*time.Second, "the Pub/Sub connection is subscribed", func() bool { return s.Stats().Listening })
}

func dbsize(t *testing.T, r *redisServer) int64 {
	t.Helper()
	c := r.client(t)
	n, err := c.DBSize(context.Background()).Result()
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// A smoke test of the helper itself: a server that answers, stops (or is
// killed) and starts again on the same port, empty.
func TestTheRedisHelperStartsStopsAndRestarts(t *testing.T) {
	r := startRedis(t)
	c := r.client(t)
	ctx := context.Background()
	if err := c.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	r.Stop()
	if r.Ping() {
		t.Fatal("still answering after Stop")
	}
	r.Start()
	if v, err := c.Get(ctx, "k").Result(); err != redis.Nil {
		t.Fatalf("after a restart without persistence: %q %v", v, err)
	}
	if err := c.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	r.Kill()
	if r.Ping() {
		t.Fatal("still answering after Kill")
	}
	r.Restart()
	if n, err := r.Int("DBSIZE"); err != nil || n != 0 {
		t.Fatalf("DBSIZE after a kill and a restart: %d %v", n, err)
	}
}
