package redisstate

import (
	"context"

	"github.com/agentwire/agentwire/mcp/server"
)

// Bus returns the fleet's server.Bus: Publish is a PUBLISH on the
// prefix's "bus" channel, and Subscribe delivers what arrives on it over
// the State's one Pub/Sub connection (every instance's messages, this
// one's included), at most once, through a bounded queue per subscriber.
func (s *State) Bus() server.Bus { return (*bus)(s) }

type bus State

var _ server.Bus = (*bus)(nil)

// Publish sends msg to every instance subscribed, within ctx and
// OpTimeout; an unreachable Redis is an error.
func (b *bus) Publish(ctx context.Context, msg []byte) error {
	s := (*State)(b)
	if err := ctx.Err(); err != nil {
		return err
	}
	octx, cancel := s.op(ctx)
	defer cancel()
	if err := s.client.Publish(octx, s.k.bus, msg).Err(); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return s.redisErr("publish (bus)", err)
	}
	s.busPublished.Add(1)
	return nil
}

// Subscribe calls deliver, on a goroutine of the subscription's own, with
// every message published on the bus until ctx is done or stop is
// called. It registers locally and never waits for Redis: while the
// Pub/Sub connection is down, messages are lost.
func (b *bus) Subscribe(ctx context.Context, deliver func([]byte)) (func(), error) {
	s := (*State)(b)
	return subscribe(s, ctx, s.busSubs, busSize, nil, deliver)
}
