package server

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// Bus carries a server's changes to the other instances of a fleet: a
// tool, prompt or resource list that changed, a resource that was
// updated. Every instance publishes what is raised on it and delivers
// what the others raised to the listen streams (and legacy subscribers)
// it holds, so a client hears of a change wherever its stream landed.
// Delivery is at most once: listen streams are not resumable, and a
// client that missed a list change lists again when it reconnects.
//
// Publish must not block for long (the server bounds each call); a Bus
// that has lost its connection returns an error, and the server counts
// the change as not shared. Subscribe calls deliver, on a goroutine of the
// bus's own, with every message published by any instance (this one's
// included, which the server skips) until stop is called.
type Bus interface {
	Publish(ctx context.Context, msg []byte) error
	Subscribe(ctx context.Context, deliver func(msg []byte)) (stop func(), err error)
}

// BusStats counts what a server's Bus carried.
type BusStats struct {
	Published int64 // changes sent to the bus
	Received  int64 // changes from other instances, delivered here
	Dropped   int64 // changes not sent: the queue to a slow bus was full
	Failed    int64 // changes the bus refused (unreachable)
}

// busQueue bounds the changes waiting for a slow bus.
const busQueue = 1024

// busPublishTimeout bounds one Publish.
const busPublishTimeout = 5 * time.Second

// busMessage is what instances tell each other.
type busMessage struct {
	Origin string `json:"o"`           // the instance that raised it
	Kind   string `json:"k"`           // tools, prompts, resources (a list changed) or updated
	URI    string `json:"u,omitempty"` // the resource, for updated
}

// fanout is a server's link to its Bus: a bounded queue and one goroutine
// that publishes it, and the subscription that delivers the others'.
type fanout struct {
	bus   Bus
	self  string
	log   *slog.Logger
	queue chan busMessage
	stop  func()
	once  sync.Once

	published, received, dropped, failed atomic.Int64
}

// startFanout links s to bus: it subscribes and starts the publisher.
// When the subscription cannot start (the bus is down), changes are still
// published as they come and the subscription is tried again.
func (s *Server) startFanout(bus Bus) {
	var id [12]byte
	rand.Read(id[:])
	f := &fanout{bus: bus, self: base64.RawURLEncoding.EncodeToString(id[:]), log: s.opts.Logger,
		queue: make(chan busMessage, busQueue)}
	s.fan = f
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		f.publishLoop(ctx)
	}()
	go func() {
		defer wg.Done()
		f.subscribeLoop(ctx, s.fromBus)
	}()
	f.stop = func() {
		cancel()
		wg.Wait()
	}
}

func (f *fanout) publishLoop(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case m := <-f.queue:
			b, _ := json.Marshal(m)
			pctx, cancel := context.WithTimeout(ctx, busPublishTimeout)
			err := f.bus.Publish(pctx, b)
			cancel()
			if err != nil {
				if f.failed.Add(1) == 1 || f.failed.Load()%1000 == 0 {
					f.log.Warn("mcp: a change was not shared with the other instances: the bus refused it", "kind", m.Kind, "error", err, "failed", f.failed.Load())
				}
				continue
			}
			f.published.Add(1)
		}
	}
}

// subscribeLoop keeps a subscription open, trying again (at most every
// few seconds) while the bus cannot take one.
func (f *fanout) subscribeLoop(ctx context.Context, deliver func([]byte)) {
	wait := 100 * time.Millisecond
	for {
		stop, err := f.bus.Subscribe(ctx, deliver)
		if err == nil {
			<-ctx.Done()
			stop()
			return
		}
		f.log.Warn("mcp: cannot hear the other instances' changes yet: subscribing to the bus failed", "error", err, "retry_in", wait)
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		wait = min(wait*2, 5*time.Second)
	}
}

// share queues a change raised here for the other instances; a full queue
// drops it (counted and logged).
func (f *fanout) share(kind, uri string) {
	if f == nil {
		return
	}
	select {
	case f.queue <- busMessage{Origin: f.self, Kind: kind, URI: uri}:
	default:
		if f.dropped.Add(1) == 1 || f.dropped.Load()%1000 == 0 {
			f.log.Warn("mcp: a change was not shared with the other instances: the bus is behind", "kind", kind, "dropped", f.dropped.Load())
		}
	}
}

// fromBus delivers another instance's change here, as if it had been
// raised here (but without sharing it again).
func (s *Server) fromBus(b []byte) {
	var m busMessage
	if json.Unmarshal(b, &m) != nil || m.Origin == s.fan.self {
		return
	}
	switch m.Kind {
	case kindTools, kindPrompts, kindResources:
		s.fan.received.Add(1)
		s.mu.Lock()
		s.wakeLocked(m.Kind)
		s.mu.Unlock()
	case kindUpdated:
		s.fan.received.Add(1)
		s.resourceUpdated(m.URI)
	}
}

// kindUpdated is a resource update on the bus.
const kindUpdated = "updated"

// BusStats reports what the server's Bus carried (zero without one).
func (s *Server) BusStats() BusStats {
	f := s.fan
	if f == nil {
		return BusStats{}
	}
	return BusStats{Published: f.published.Load(), Received: f.received.Load(), Dropped: f.dropped.Load(), Failed: f.failed.Load()}
}
