package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"time"

	"github.com/redis/go-redis/v9"

	mcpserver "github.com/agentwire/agentwire/mcp/server"
	"github.com/agentwire/agentwire/mcp/streamable"
	"github.com/agentwire/agentwire/redisstate"
)

// redisFlags are serve mcp --http's flags for a fleet sharing one Redis.
type redisFlags struct {
	url    *string
	prefix *string
	lease  *time.Duration
	rotate *time.Duration
}

func addRedisFlags(fs *flag.FlagSet) *redisFlags {
	return &redisFlags{
		url:    fs.String("redis", "", "with --http: share tasks, listen notifications, the requestState keys and (with --sessions) legacy sessions and their resumable streams with the other instances through the Redis at this URL (redis://[user:password@]host:port/db, or rediss:// for TLS)"),
		prefix: fs.String("redis-prefix", "", `with --redis: the prefix of every key and channel (default "agentwire:"; one per fleet)`),
		lease:  fs.Duration("redis-lease", 0, "with --redis: how long an instance that stopped answering keeps its running tasks before another marks them failed (default 15s)"),
		rotate: fs.Duration("redis-rotate-keys", 0, "with --redis: rotate the requestState key this often, fleet-wide (0: never; at least 1h, the life of a requestState)"),
	}
}

// given lists the Redis flags on the command line other than --redis.
func (f *redisFlags) given(fs *flag.FlagSet) []string {
	var names []string
	fs.Visit(func(fl *flag.Flag) {
		switch fl.Name {
		case "redis", "redis-prefix", "redis-lease", "redis-rotate-keys":
			names = append(names, "--"+fl.Name)
		}
	})
	return names
}

// apply connects to Redis and makes so share what a fleet shares, and
// ho's legacy sessions and their resumable streams when it has them; the
// returned function closes it all, after the server has stopped.
func (f *redisFlags) apply(so *mcpserver.Options, ho *streamable.Options, logger *slog.Logger) (func(), error) {
	if *f.rotate != 0 && *f.rotate < time.Hour {
		return nil, fmt.Errorf("--redis-rotate-keys must be at least 1h (a requestState lives an hour), not %v", *f.rotate)
	}
	if *f.lease < 0 {
		return nil, fmt.Errorf("--redis-lease must be positive")
	}
	opt, err := redis.ParseURL(*f.url)
	if err != nil {
		// The URL may hold a password: say what is wrong, not what it was.
		return nil, fmt.Errorf("--redis: not a Redis URL (redis://host:port/db or rediss://...)")
	}
	// Every command bounded by its context (redisstate's OpTimeout), a
	// Redis that hangs as well as one that refuses.
	opt.ContextTimeoutEnabled = true
	client := redis.NewClient(opt)
	st := redisstate.New(client, &redisstate.Options{Prefix: *f.prefix, Lease: *f.lease, Logger: logger})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := client.Ping(ctx).Err(); err != nil {
		// Not fatal: the instance serves what needs no shared state, and
		// the rest once Redis answers.
		logger.Warn("serve mcp: Redis does not answer yet; tasks are refused until it does", "addr", opt.Addr, "error", err)
	}
	so.Tasks = &mcpserver.TaskOptions{Store: st.Tasks()}
	so.Bus = st.Bus()
	so.StateKeys = st.Keys(&redisstate.KeyOptions{RotateEvery: *f.rotate})
	if ho.Sessions != nil {
		// A session made on one instance is resumed on any other: its
		// record and its streams' events live in Redis.
		ho.Sessions.Events = st.Events(nil)
		ho.Sessions.Store = st.Sessions()
	}
	return func() {
		st.Close()
		client.Close()
	}, nil
}
