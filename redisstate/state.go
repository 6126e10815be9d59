package redisstate

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentwire/agentwire/mcp/tasks"
	"github.com/redis/go-redis/v9"
)

// Options configures a State. The zero value (or nil) means the
// documented defaults.
type Options struct {
	// Prefix starts every key and channel the State uses. Default
	// "agentwire:". Give every instance of a fleet the same prefix, and
	// different fleets on one Redis different ones. On Redis Cluster the
	// prefix must be a hash tag ("{agentwire}:"), so that the keys a
	// transaction touches share a slot.
	Prefix string
	// Lease is how long a task created through this State stays alive
	// in the store without this State renewing it: the instance renews
	// every Lease/3, and once a lease has lapsed any instance's sweeper
	// fails the task ("the server instance running the task was lost").
	// Default 15 s. It bounds how long a killed instance's tasks look
	// alive (about Lease + Lease/3), and how long Redis may be out
	// before the tasks running here are given up.
	Lease time.Duration
	// MaxTaskBytes bounds one task's payload (tasks.Task.Size): a Create
	// or an Update past it fails with tasks.ErrTooLarge and writes
	// nothing. Default 8 MiB.
	MaxTaskBytes int64
	// Logger receives a line for every refusal (too large, Redis out of
	// memory, an update overtaken too often, a task failed for its lost
	// instance) and, at most once a second, for failing Redis commands.
	// Nil means slog.Default().
	Logger *slog.Logger
	// Now is the clock of the tasks' timestamps, of expiry and of leases.
	// Nil means time.Now. The instances of a fleet compare each other's
	// lease deadlines, so their clocks must agree to well within Lease.
	Now func() time.Time
	// OpTimeout bounds every Redis command (a transaction's round trips
	// together): with Redis unreachable a method fails within about
	// OpTimeout instead of hanging. Default 2 s. It bounds reads and
	// writes on the socket only when the client was made with
	// ContextTimeoutEnabled (see the package documentation); otherwise
	// the client's ReadTimeout and WriteTimeout do.
	OpTimeout time.Duration
	// EventBuffer is how many events (or bus messages) may wait for one
	// slow local subscriber before the oldest are dropped (counted in
	// Stats.EventsDropped). Default 4096.
	EventBuffer int
}

// Stats counts what a State has done and refused.
type Stats struct {
	Created        int64 // tasks created through this State
	Updated        int64 // updates written
	UpdateRetries  int64 // optimistic retries: another writer changed the task between read and write
	Conflicts      int64 // updates given up after maxTries retries
	TooLarge       int64 // creates and updates refused: past MaxTaskBytes
	Published      int64 // task events published (with the writes that made them)
	EventsReceived int64 // task events received from the shared Pub/Sub connection
	EventsDropped  int64 // events and bus messages a slow local subscriber (or the dispatcher) lost
	BusPublished   int64 // bus messages published
	BusReceived    int64 // bus messages received
	LeasesRenewed  int64 // lease renewals of tasks running here
	Swept          int64 // tasks this State's sweeper failed: their instance was lost
	Rotations      int64 // requestState key rotations this State made
	Resubscribed   int64 // times the Pub/Sub connection was subscribed again after it was lost
	RedisErrors    int64 // Redis commands that failed (unreachable, timed out, refused)
	// Listening is whether the shared Pub/Sub connection is subscribed
	// now (a readiness probe may want it).
	Listening bool
}

// State is one process's link to the Redis a fleet shares: the task
// store, the bus, and the requestState key ring, over one Redis client
// and one Pub/Sub connection. Make one per process with New, and Close it
// after the Servers using it have shut down.
type State struct {
	client redis.UniversalClient
	opts   Options
	log    *slog.Logger
	k      keys

	ctx    context.Context // ends at Close
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu       sync.Mutex
	closed   bool
	ps       *redis.PubSub
	taskSubs map[*subscriber[tasks.Event]]struct{}
	busSubs  map[*subscriber[[]byte]]struct{}
	local    map[string]struct{} // live tasks created here: this instance renews their leases
	rings    []*keyRing

	inbox *queue[*redis.Message] // received, for the dispatcher
	kick  chan struct{}          // renew (and recheck) the local tasks now
	store *store

	listening atomic.Bool
	lastLog   atomic.Int64 // unix ns of the last Redis error logged

	created, updated, retries, conflicts, tooLarge, published, received, dropped    atomic.Int64
	busPublished, busReceived, renewed, swept, rotations, resubscribed, redisErrors atomic.Int64
}

// keys are the names of everything the State keeps in Redis.
type keys struct {
	prefix    string
	seq       string // INCR: the creation sequence that orders List
	live      string // ZSET id -> lease deadline (unix ms)
	ended     string // ZSET index entry -> expiry (unix ms): the owner indexes' cleanup
	events    string // channel: task changes
	bus       string // channel: server.Bus
	stateKeys string // HASH current, previous, rotated_at
}

func (k keys) task(id string) string { return k.prefix + "task:" + id }

// index is the owner index a task is listed in: an owner's tasks
// whatever their scope, or, for no owner, one scope's.
func (k keys) index(owner, scope string) string {
	if owner != "" {
		scope = ""
	}
	return k.prefix + "owner:" + owner + "\x00" + scope
}

// New returns a State over client and starts its goroutines: the Pub/Sub
// receiver and its dispatcher, the lease renewer and the sweeper (Close
// stops them). It does not wait for Redis: a Redis that is down at New
// is retried in the background, and methods fail until it answers. The
// client stays the caller's (Close does not close it).
func New(client redis.UniversalClient, opts *Options) *State {
	s := &State{client: client, taskSubs: map[*subscriber[tasks.Event]]struct{}{}, busSubs: map[*subscriber[[]byte]]struct{}{},
		local: map[string]struct{}{}, kick: make(chan struct{}, 1)}
	if opts != nil {
		s.opts = *opts
	}
	if s.opts.Prefix == "" {
		s.opts.Prefix = "agentwire:"
	}
	if s.opts.Lease <= 0 {
		s.opts.Lease = 15 * time.Second
	}
	if s.opts.MaxTaskBytes <= 0 {
		s.opts.MaxTaskBytes = 8 << 20
	}
	if s.opts.Logger == nil {
		s.opts.Logger = slog.Default()
	}
	if s.opts.Now == nil {
		s.opts.Now = time.Now
	}
	if s.opts.OpTimeout <= 0 {
		s.opts.OpTimeout = 2 * time.Second
	}
	if s.opts.EventBuffer <= 0 {
		s.opts.EventBuffer = 4096
	}
	s.log = s.opts.Logger
	p := s.opts.Prefix
	s.k = keys{prefix: p, seq: p + "seq", live: p + "live", ended: p + "ended", events: p + "events", bus: p + "bus", stateKeys: p + "statekeys"}
	s.inbox = newQueue[*redis.Message](max(s.opts.EventBuffer, 4096))
	s.store = &store{s: s}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.wg.Add(4)
	go s.receive()
	go s.dispatch()
	go s.leaseLoop()
	go s.sweepLoop()
	return s
}

// Close stops every goroutine the State started (subscribers' included)
// and waits for them. Tasks created through it and not ended stay in
// Redis with their leases, which lapse: the other instances' sweepers
// then fail them. Shut the Servers down first, so that their handlers
// record how their tasks ended. Close is idempotent; it does not close
// the Redis client.
func (s *State) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.cancel()
	ps := s.ps
	s.mu.Unlock()
	if ps != nil {
		ps.Close() // unblocks the receiver
	}
	s.wg.Wait()
	s.listening.Store(false)
	return nil
}

// Stats reports what the State has done.
func (s *State) Stats() Stats {
	return Stats{
		Created: s.created.Load(), Updated: s.updated.Load(), UpdateRetries: s.retries.Load(), Conflicts: s.conflicts.Load(),
		TooLarge: s.tooLarge.Load(), Published: s.published.Load(), EventsReceived: s.received.Load(), EventsDropped: s.dropped.Load(),
		BusPublished: s.busPublished.Load(), BusReceived: s.busReceived.Load(), LeasesRenewed: s.renewed.Load(), Swept: s.swept.Load(),
		Rotations: s.rotations.Load(), Resubscribed: s.resubscribed.Load(), RedisErrors: s.redisErrors.Load(), Listening: s.listening.Load(),
	}
}

// Tasks returns the Redis-backed task store (one per State).
func (s *State) Tasks() tasks.Store { return s.store }

// op bounds one Redis command (or transaction) by OpTimeout.
func (s *State) op(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, s.opts.OpTimeout)
}

// redisErr wraps a failed Redis command, counts it and logs it (at most
// once a second, with the count so far). Redis refusing a write for
// memory (OOM) is tasks.ErrFull.
func (s *State) redisErr(what string, err error) error {
	n := s.redisErrors.Add(1)
	if isOOM(err) {
		// A refusal: told every time, as tasks.Memory tells ErrFull.
		s.log.Warn("redisstate: Redis refused a write: it is out of memory (maxmemory)", "op", what, "error", err, "redis_errors", n)
		return fmt.Errorf("redisstate: %s: %w (%v)", what, tasks.ErrFull, err)
	}
	now := time.Now().UnixNano()
	if last := s.lastLog.Load(); now-last >= int64(time.Second) && s.lastLog.CompareAndSwap(last, now) {
		s.log.Warn("redisstate: a Redis command failed", "op", what, "error", err, "redis_errors", n)
	}
	return fmt.Errorf("redisstate: %s: %w", what, err)
}

// isOOM reports whether Redis refused a write for memory (maxmemory).
func isOOM(err error) bool {
	msg := err.Error()
	return strings.HasPrefix(msg, "OOM ") || strings.Contains(msg, " OOM ")
}

// ----- the shared Pub/Sub connection -----

// healthEvery is how often a quiet Pub/Sub connection is pinged; one
// that has not answered by the next beat is replaced.
func (s *State) healthEvery() time.Duration {
	return min(max(s.opts.Lease/3, 100*time.Millisecond), 5*time.Second)
}

// receive keeps one Pub/Sub connection subscribed to the events and bus
// channels and queues what arrives for the dispatcher. go-redis
// reconnects and resubscribes a connection that failed; a connection
// that stops answering pings is replaced.
func (s *State) receive() {
	defer s.wg.Done()
	ps := s.newPubSub()
	if ps == nil {
		return
	}
	wait := 50 * time.Millisecond
	pinged, lost := false, false
	for {
		// The context bounds a reconnection's dial too, and Close ends it.
		rctx, cancel := context.WithTimeout(s.ctx, s.healthEvery()+s.opts.OpTimeout)
		msg, err := ps.ReceiveTimeout(rctx, s.healthEvery())
		cancel()
		if s.ctx.Err() != nil {
			return
		}
		if err != nil {
			if isTimeout(err) && !pinged {
				pctx, cancel := s.op(s.ctx)
				if perr := ps.Ping(pctx); perr != nil {
					s.redisErr("PING (pubsub)", perr)
				}
				cancel()
				pinged = true
				continue
			}
			if s.listening.Swap(false) {
				s.log.Warn("redisstate: the Pub/Sub connection was lost; events published until it is back are not received", "error", err)
			}
			lost = true
			if isTimeout(err) {
				// No answer to a ping: a half-open connection. Start anew.
				ps.Close()
				if ps = s.newPubSub(); ps == nil {
					return
				}
				pinged = false
				continue
			}
			s.redisErr("RECEIVE (pubsub)", err)
			t := time.NewTimer(wait)
			select {
			case <-s.ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
			wait = min(wait*2, time.Second)
			continue
		}
		pinged, wait = false, 50*time.Millisecond
		switch m := msg.(type) {
		case *redis.Subscription:
			if m.Kind == "subscribe" && m.Count >= 2 { // both channels
				if !s.listening.Swap(true) && lost {
					lost = false
					s.resubscribed.Add(1)
					s.log.Info("redisstate: the Pub/Sub connection is subscribed again")
					// What was published meanwhile is lost: recheck the tasks
					// running here now rather than at the next renewal.
					select {
					case s.kick <- struct{}{}:
					default:
					}
				}
			}
		case *redis.Message:
			if s.inbox.push(m) {
				s.dropped.Add(1)
			}
		}
	}
}

// newPubSub subscribes a new Pub/Sub connection (nil once closed). A
// Redis that does not answer is tried again by Receive.
func (s *State) newPubSub() *redis.PubSub {
	ctx, cancel := s.op(s.ctx)
	defer cancel()
	ps := s.client.Subscribe(ctx, s.k.events, s.k.bus)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		ps.Close()
		return nil
	}
	s.ps = ps
	return ps
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// dispatch hands what the receiver queued to the local subscribers, in
// the order it arrived: task events (fetching a task whose event carried
// only its id) and bus messages.
func (s *State) dispatch() {
	defer s.wg.Done()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-s.inbox.wake:
		}
		for {
			m, ok := s.inbox.pop()
			if !ok {
				break
			}
			switch m.Channel {
			case s.k.events:
				t, err := s.store.decodeEvent(m.Payload)
				if err != nil {
					if !errors.Is(err, tasks.ErrNotFound) {
						s.log.Warn("redisstate: an event could not be read", "error", err)
					}
					continue
				}
				s.received.Add(1)
				s.deliver(t)
			case s.k.bus:
				s.busReceived.Add(1)
				s.mu.Lock()
				for sub := range s.busSubs {
					if sub.q.push([]byte(m.Payload)) {
						s.dropped.Add(1)
					}
				}
				s.mu.Unlock()
			}
		}
	}
}

// deliver gives every local task subscriber its own copy of t.
func (s *State) deliver(t *tasks.Task) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for sub := range s.taskSubs {
		if sub.q.push(tasks.Event{Task: t.Clone()}) {
			s.dropped.Add(1)
		}
	}
}

// ----- bounded queues and local subscribers -----

// queue is a bounded FIFO that drops its oldest item when full.
type queue[T any] struct {
	mu    sync.Mutex
	items []T
	max   int
	wake  chan struct{}
}

func newQueue[T any](max int) *queue[T] {
	return &queue[T]{max: max, wake: make(chan struct{}, 1)}
}

// push adds v, reporting whether the oldest item was dropped for it.
func (q *queue[T]) push(v T) (dropped bool) {
	q.mu.Lock()
	if len(q.items) >= q.max {
		var zero T
		q.items[0] = zero
		q.items = q.items[1:]
		dropped = true
	}
	q.items = append(q.items, v)
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
	return dropped
}

func (q *queue[T]) pop() (T, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	var zero T
	if len(q.items) == 0 {
		q.items = nil // let a grown backing array go
		return zero, false
	}
	v := q.items[0]
	q.items[0] = zero
	q.items = q.items[1:]
	return v, true
}

// subscriber is one local subscription: its queue and the goroutine that
// drains it into f.
type subscriber[T any] struct {
	q    *queue[T]
	f    func(T)
	done chan struct{}
	once sync.Once
}

// subscribe registers a subscriber in set and starts its goroutine,
// which ends with ctx, with stop, or with the State.
func subscribe[T any](s *State, ctx context.Context, set map[*subscriber[T]]struct{}, f func(T)) (func(), error) {
	sub := &subscriber[T]{q: newQueue[T](s.opts.EventBuffer), f: f, done: make(chan struct{})}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, errors.New("redisstate: the State is closed")
	}
	set[sub] = struct{}{}
	s.wg.Add(1)
	s.mu.Unlock()
	stop := func() {
		sub.once.Do(func() {
			s.mu.Lock()
			delete(set, sub)
			s.mu.Unlock()
			close(sub.done)
		})
	}
	go func() {
		defer s.wg.Done()
		defer stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-sub.done:
				return
			case <-s.ctx.Done():
				return
			case <-sub.q.wake:
			}
			for {
				v, ok := sub.q.pop()
				if !ok {
					break
				}
				select {
				case <-sub.done:
					return
				default:
				}
				sub.f(v)
			}
		}
	}()
	return stop, nil
}
