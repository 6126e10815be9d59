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
	// script or a transaction touches share a slot.
	Prefix string
	// Lease is how long a task created through this State stays alive
	// in the store without this State renewing it: the instance renews
	// every Lease/3, and once a lease has lapsed any instance's sweeper
	// fails the task ("the server instance running the task was lost"),
	// provided that sweeper has had Redis answering for a whole Lease.
	// Lease deadlines are kept on the Redis server's clock. Default
	// 15 s. It bounds how long a killed instance's tasks look alive
	// (about Lease + Lease/3).
	Lease time.Duration
	// MaxTaskBytes bounds one task's payload (tasks.Task.Size): a Create
	// or an Update past it fails with tasks.ErrTooLarge and writes
	// nothing. Default 8 MiB.
	MaxTaskBytes int64
	// Logger receives a line for every refusal and loss (too large,
	// Redis out of memory, an update overtaken too often, a task failed
	// for its lost instance, events dropped, a sweep held or cut short)
	// and, at most once a second, for failing Redis commands. Nil means
	// slog.Default().
	Logger *slog.Logger
	// Now is the clock of the tasks' timestamps (createdAt,
	// lastUpdatedAt, endedAt) and so of their expiry: an ended task is
	// kept for what is left of its TTL by this clock, handed to Redis as
	// a relative PEXPIRE. Leases do not use it (they are on the Redis
	// server's clock). Nil means time.Now.
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
	// Stats.EventsDropped, logged). Default 4096. The queue between the
	// Pub/Sub connection and the dispatcher holds at least 4096.
	EventBuffer int
	// EventBufferBytes bounds the same queues by the bytes they hold (a
	// task event weighs its task's Size, a bus message its length, plus
	// a little for each): past it the oldest are dropped, counted in
	// Stats.EventsDropped. An item larger than the bound alone is kept
	// alone. Default 16 MiB; the dispatcher's queue holds at least
	// 16 MiB.
	EventBufferBytes int64
}

// Stats counts what a State has done and refused.
type Stats struct {
	Created          int64 // tasks created through this State
	Updated          int64 // updates written
	UpdateRetries    int64 // optimistic retries: another writer changed the task between read and write
	Conflicts        int64 // updates given up after maxTries retries
	TooLarge         int64 // creates and updates refused: past MaxTaskBytes
	Published        int64 // task events published (with the writes that made them)
	EventsReceived   int64 // task events received from the shared Pub/Sub connection (decoded only when a subscriber keeps its task)
	EventsDropped    int64 // events and bus messages a slow local subscriber (or the dispatcher) lost: past EventBuffer or EventBufferBytes
	EventsSuperseded int64 // task events not delivered: a later version of the task had been delivered already (read by id)
	OrderForgotten   int64 // delivered versions forgotten early (past maxOrderMarks): an older event of those tasks could follow a newer one
	BusPublished     int64 // bus messages published
	BusReceived      int64 // bus messages received
	LeasesRenewed    int64 // lease renewals of tasks running here
	LeasesRestored   int64 // renewals that found a live task's lease missing from Redis (evicted, or Redis lost it) and put it back
	Swept            int64 // tasks this State's sweeper failed: their instance was lost
	SweepsHeld       int64 // sweeps that took no lapsed lease: Redis had not answered this State for a whole Lease (or the State is younger)
	SweepsCut        int64 // sweeps that stopped at their time budget (Lease/6) with work left for the next
	Expired          int64 // expired tasks taken out of the owner indexes
	Rotations        int64 // requestState key rotations this State made
	Resubscribed     int64 // times the Pub/Sub connection was subscribed again after it was lost
	RedisErrors      int64 // Redis commands that failed (unreachable, timed out, refused)

	StreamEventsAppended int64 // events appended to resumable streams (Events), priming events included
	StreamEventsTooLarge int64 // events Append refused: past EventOptions.MaxEventBytes
	StreamGaps           int64 // replays and follows refused with streamable.ErrUnknownEvent: the Last-Event-ID names nothing retained of the session
	FollowsRefused       int64 // Follow calls refused: EventOptions.MaxFollows were running
	Following            int64 // Follow calls running now (a blocked read left running included)
	SessionsCorrupt      int64 // session records Load could not read
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
	born   time.Time // monotonic: when New ran

	mu       sync.Mutex
	closed   bool
	ps       *redis.PubSub
	taskSubs map[*subscriber[tasks.Event]]struct{}
	busSubs  map[*subscriber[[]byte]]struct{}
	local    map[string]struct{} // live tasks created here: this instance renews their leases
	rings    []*keyRing

	inbox   *queue[inItem] // received (and rechecks), for the dispatcher
	kick    chan struct{}  // renew (and recheck) the local tasks now
	store   *store
	order   marks                      // the dispatcher's: versions delivered ahead of the event stream
	keepBuf []*subscriber[tasks.Event] // the dispatcher's: the task subscribers of one event

	listening atomic.Bool
	errAt     atomic.Int64 // ns since born of the last Redis error, +1 (0: none yet)
	lastLog   atomic.Int64 // unix ns of the last Redis error logged
	dropLog   limiter
	superLog  limiter
	forgotLog limiter
	cutLog    limiter
	held      atomic.Bool // the sweeper is holding (logged once per outage)

	created, updated, retries, conflicts, tooLarge, published, received, dropped, superseded, forgotten atomic.Int64
	busPublished, busReceived, renewed, restored, swept, sweepsHeld, sweepsCut, expired                 atomic.Int64
	rotations, resubscribed, redisErrors                                                                atomic.Int64
	sess                                                                                                sessionCounters // the event and session stores' (events.go)
}

// limiter lets a log line through at most once a second.
type limiter struct{ last atomic.Int64 }

func (l *limiter) allow() bool {
	now := time.Now().UnixNano()
	last := l.last.Load()
	return now-last >= int64(time.Second) && l.last.CompareAndSwap(last, now)
}

// keys are the names of everything the State keeps in Redis.
type keys struct {
	prefix    string
	seq       string // INCR: the creation sequence that orders List
	epoch     string // made with the sequence's first value: which sequence a List cursor counts in
	live      string // ZSET id -> lease deadline (unix ms, Redis's clock)
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
		local: map[string]struct{}{}, kick: make(chan struct{}, 1), born: time.Now()}
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
	if s.opts.EventBufferBytes <= 0 {
		s.opts.EventBufferBytes = 16 << 20
	}
	s.log = s.opts.Logger
	p := s.opts.Prefix
	s.k = keys{prefix: p, seq: p + "seq", epoch: p + "epoch", live: p + "live", ended: p + "ended", events: p + "events", bus: p + "bus", stateKeys: p + "statekeys"}
	s.inbox = newQueue(max(s.opts.EventBuffer, 4096), max(s.opts.EventBufferBytes, 16<<20), func(m inItem) int64 { return int64(len(m.payload)) + itemOverhead })
	s.order.m = map[string]mark{}
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
		EventsSuperseded: s.superseded.Load(), OrderForgotten: s.forgotten.Load(),
		BusPublished: s.busPublished.Load(), BusReceived: s.busReceived.Load(), LeasesRenewed: s.renewed.Load(), LeasesRestored: s.restored.Load(),
		Swept: s.swept.Load(), SweepsHeld: s.sweepsHeld.Load(), SweepsCut: s.sweepsCut.Load(), Expired: s.expired.Load(),
		Rotations: s.rotations.Load(), Resubscribed: s.resubscribed.Load(), RedisErrors: s.redisErrors.Load(), Listening: s.listening.Load(),
		StreamEventsAppended: s.sess.appended.Load(), StreamEventsTooLarge: s.sess.tooLarge.Load(), StreamGaps: s.sess.gaps.Load(),
		FollowsRefused: s.sess.followsRefused.Load(), Following: s.sess.following.Load(), SessionsCorrupt: s.sess.corrupt.Load(),
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
// memory (OOM) is tasks.ErrFull. Any failure holds this State's sweeper
// back for a Lease (healthy).
func (s *State) redisErr(what string, err error) error {
	s.errAt.Store(int64(time.Since(s.born)) + 1)
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

// healthy reports whether Redis has answered this State for a whole
// Lease: the State is at least that old and no command has failed
// since. Only then does its sweeper take a lapsed lease for a lost
// instance: after an outage every instance has had a Lease to renew.
func (s *State) healthy() bool {
	up := time.Since(s.born)
	at := s.errAt.Load()
	if up < s.opts.Lease {
		return false
	}
	return at == 0 || up-time.Duration(at-1) >= s.opts.Lease
}

// isOOM reports whether Redis refused a write for memory (maxmemory).
func isOOM(err error) bool {
	msg := err.Error()
	return strings.HasPrefix(msg, "OOM ") || strings.Contains(msg, " OOM ")
}

// noteDropped counts items a queue dropped and logs it (at most once a
// second).
func (s *State) noteDropped(n int, where string) {
	if n == 0 {
		return
	}
	total := s.dropped.Add(int64(n))
	if s.dropLog.allow() {
		s.log.Warn("redisstate: events were dropped: a queue was full (EventBuffer, EventBufferBytes)", "queue", where, "events_dropped", total,
			"event_buffer", s.opts.EventBuffer, "event_buffer_bytes", s.opts.EventBufferBytes)
	}
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
	lose := func(err error) {
		if s.listening.Swap(false) {
			s.log.Warn("redisstate: the Pub/Sub connection was lost; events published until it is back are not received", "error", err)
		}
		lost = true
	}
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
				if perr := ps.Ping(pctx); perr != nil && s.ctx.Err() == nil {
					// go-redis reconnects (and resubscribes) a connection
					// whose ping failed: what was published meanwhile is lost.
					s.redisErr("PING (pubsub)", perr)
					lose(perr)
				}
				cancel()
				pinged = true
				continue
			}
			lose(err)
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
					s.kickRenew()
				}
			}
		case *redis.Message:
			kind := itemEvent
			if m.Channel == s.k.bus {
				kind = itemBus
			} else if m.Channel != s.k.events {
				continue
			}
			s.noteDropped(s.inbox.push(inItem{kind: kind, payload: m.Payload}), "dispatcher")
		}
	}
}

// kickRenew makes the lease loop renew (and recheck) now.
func (s *State) kickRenew() {
	select {
	case s.kick <- struct{}{}:
	default:
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

// ----- the dispatcher -----

// What the dispatcher's queue holds.
const (
	itemEvent   = iota // a task event from the events channel
	itemBus            // a bus message
	itemRecheck        // a task running here to read and tell (the lease renewal found it cancelled or ended)
)

// itemOverhead is what an item weighs in a queue besides its payload.
const itemOverhead = 64

type inItem struct {
	kind    int
	payload string // the message, or the id of a recheck
}

// dispatch hands what the receiver queued to the local subscribers, in
// the order it arrived: task events (fetching a task whose event carried
// only its id) and bus messages. A task event that no subscriber keeps
// (tasks.Selective) is counted and not read.
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
			switch m.kind {
			case itemEvent:
				s.onEvent(m.payload)
				s.received.Add(1) // once delivered (or dropped): a count to wait on
			case itemRecheck:
				s.recheck(m.payload)
			case itemBus:
				s.busReceived.Add(1)
				n := 0
				s.mu.Lock()
				for sub := range s.busSubs {
					n += sub.q.push([]byte(m.payload))
				}
				s.mu.Unlock()
				s.noteDropped(n, "bus subscriber")
			}
			if s.ctx.Err() != nil {
				return
			}
		}
		s.forgetOrder(s.order.prune(time.Now(), s.inbox.poppedCount()))
	}
}

// keepers returns the task subscribers that keep the changes of task id
// (their keep is asked outside the State's lock). The slice is the
// dispatcher's, valid until its next call.
func (s *State) keepers(id string) []*subscriber[tasks.Event] {
	clear(s.keepBuf)
	all := s.keepBuf[:0]
	s.mu.Lock()
	for sub := range s.taskSubs {
		all = append(all, sub)
	}
	s.mu.Unlock()
	s.keepBuf = all
	out := all[:0]
	for _, sub := range all {
		if sub.keep == nil || sub.keep(id) {
			out = append(out, sub)
		}
	}
	return out
}

// onEvent delivers one task event to the subscribers that keep its task,
// unless a later version of the task has been delivered already; an
// event that carries only the task's id is read (and may read a later
// version: then the older events still on their way are not delivered).
func (s *State) onEvent(payload string) {
	kind, id, rev, rec, ok := parseEvent(payload)
	if !ok {
		s.log.Warn("redisstate: an event could not be read", "event", payload[:min(len(payload), 80)])
		return
	}
	subs := s.keepers(id)
	if len(subs) == 0 || s.behind(id, rev) {
		return
	}
	if kind == eventTask {
		t, _, err := decodeStored(id, []byte(rec))
		if err != nil {
			s.log.Warn("redisstate: an event could not be read", "error", err)
			return
		}
		s.deliver(t, subs)
		return
	}
	t, got, err := s.store.get(s.ctx, id)
	if err != nil {
		if errors.Is(err, tasks.ErrNotFound) {
			s.order.drop(id)
		} else if s.ctx.Err() == nil {
			s.log.Warn("redisstate: a large task's event could not be read", "task", id, "error", err)
		}
		return
	}
	if got > rev {
		s.forgetOrder(s.order.set(id, got, time.Now(), s.inbox.pushedCount()))
	}
	s.deliver(t, subs)
}

// recheck reads a task running here that the lease renewal found
// cancelled or ended, and delivers it unless that version (or a later
// one) has been delivered already.
func (s *State) recheck(id string) {
	subs := s.keepers(id)
	if len(subs) == 0 {
		return
	}
	t, got, err := s.store.get(s.ctx, id)
	if err != nil {
		return // gone, or counted and logged by get
	}
	if m, ok := s.order.get(id); ok && got != 0 && got <= m {
		return
	}
	if got != 0 {
		s.forgetOrder(s.order.set(id, got, time.Now(), s.inbox.pushedCount()))
	}
	s.deliver(t, subs)
}

// behind reports (and counts) an event of revision rev that is not to be
// delivered: a version as late or later was delivered already. It drops
// the mark once the events have caught up with it.
func (s *State) behind(id string, rev uint64) bool {
	if rev == 0 {
		return false // a record of no known revision
	}
	m, ok := s.order.get(id)
	if !ok {
		return false
	}
	if rev > m {
		s.order.drop(id)
		return false
	}
	if rev == m {
		s.order.drop(id)
	}
	n := s.superseded.Add(1)
	if s.superLog.allow() {
		s.log.Debug("redisstate: a task event was not delivered: a later version of the task had been delivered", "task", id, "events_superseded", n)
	}
	return true
}

func (s *State) forgetOrder(n int) {
	if n == 0 {
		return
	}
	total := s.forgotten.Add(int64(n))
	if s.forgotLog.allow() {
		s.log.Warn("redisstate: versions delivered ahead of their events were forgotten early (too many at once); older events of those tasks may follow", "order_forgotten", total, "max", maxOrderMarks)
	}
}

// deliver gives each of subs its own copy of t.
func (s *State) deliver(t *tasks.Task, subs []*subscriber[tasks.Event]) {
	n := 0
	for _, sub := range subs {
		n += sub.q.push(tasks.Event{Task: t.Clone()})
	}
	s.noteDropped(n, "task subscriber")
}

// ----- delivery order: versions delivered ahead of the events -----

// maxOrderMarks bounds the tasks whose delivered version is remembered
// because it was read ahead of the event stream; past it the oldest are
// forgotten (Stats.OrderForgotten).
const maxOrderMarks = 1 << 16

// markHold is how long a mark is kept at least (and until the events
// queued when it was made have been dispatched): the older events of
// that task published before the read arrive within it.
const markHold = 10 * time.Second

type mark struct {
	rev  uint64
	at   time.Time
	upTo uint64 // the dispatcher's queue had taken this many items when the mark was made
}

type markRef struct {
	id  string
	rev uint64
}

// marks are, by task, the revision delivered after a read (an event by
// id, a recheck) that may be ahead of the events still on their way:
// those are not delivered. Only the dispatcher uses them.
type marks struct {
	m    map[string]mark
	q    []markRef // in the order made; some no longer in m
	head int
}

func (o *marks) get(id string) (uint64, bool) {
	m, ok := o.m[id]
	return m.rev, ok
}

func (o *marks) drop(id string) { delete(o.m, id) }

// set marks id as delivered at rev, and returns how many marks it had
// to forget early to stay within maxOrderMarks.
func (o *marks) set(id string, rev uint64, now time.Time, upTo uint64) int {
	if m, ok := o.m[id]; ok && m.rev == rev {
		return 0
	}
	o.m[id] = mark{rev: rev, at: now, upTo: upTo}
	o.q = append(o.q, markRef{id, rev})
	return o.prune(now, 0)
}

// prune forgets the marks that have served (held markHold, and the
// items queued before them dispatched: popped), and the oldest past
// maxOrderMarks, which it counts.
func (o *marks) prune(now time.Time, popped uint64) (forgotten int) {
	for o.head < len(o.q) {
		ref := o.q[o.head]
		m, ok := o.m[ref.id]
		switch {
		case !ok || m.rev != ref.rev:
		case now.Sub(m.at) >= markHold && popped >= m.upTo:
			delete(o.m, ref.id)
		case len(o.m) > maxOrderMarks:
			delete(o.m, ref.id)
			forgotten++
		default:
			o.compact()
			return forgotten
		}
		o.q[o.head] = markRef{}
		o.head++
	}
	o.compact()
	return forgotten
}

// compact lets the consumed front of q go.
func (o *marks) compact() {
	if o.head == len(o.q) {
		o.q, o.head = o.q[:0], 0
		return
	}
	if o.head > 1024 && o.head > len(o.q)/2 {
		o.q = append(o.q[:0:0], o.q[o.head:]...)
		o.head = 0
	}
}

// ----- bounded queues and local subscribers -----

// queue is a bounded FIFO, in items and in bytes, that drops its oldest
// items when full.
type queue[T any] struct {
	mu       sync.Mutex
	items    []T
	bytes    int64
	max      int
	maxBytes int64
	size     func(T) int64
	pushed   uint64
	popped   uint64
	wake     chan struct{}
}

func newQueue[T any](max int, maxBytes int64, size func(T) int64) *queue[T] {
	return &queue[T]{max: max, maxBytes: maxBytes, size: size, wake: make(chan struct{}, 1)}
}

// push adds v, dropping the oldest items to make room for it, and
// returns how many it dropped. An item larger than maxBytes alone is
// kept alone.
func (q *queue[T]) push(v T) (dropped int) {
	n := q.size(v)
	q.mu.Lock()
	for len(q.items) > 0 && (len(q.items) >= q.max || q.bytes+n > q.maxBytes) {
		var zero T
		q.bytes -= q.size(q.items[0])
		q.items[0] = zero
		q.items = q.items[1:]
		dropped++
	}
	q.items = append(q.items, v)
	q.bytes += n
	q.pushed++
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
	q.bytes -= q.size(v)
	q.items[0] = zero
	q.items = q.items[1:]
	q.popped++
	return v, true
}

func (q *queue[T]) pushedCount() uint64 {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.pushed
}

func (q *queue[T]) poppedCount() uint64 {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.popped
}

// subscriber is one local subscription: its queue and the goroutine that
// drains it into f.
type subscriber[T any] struct {
	q    *queue[T]
	keep func(id string) bool // the tasks it wants (nil: all; tasks.Selective)
	f    func(T)
	done chan struct{}
	once sync.Once
}

// subscribe registers a subscriber in set and starts its goroutine,
// which ends with ctx, with stop, or with the State.
func subscribe[T any](s *State, ctx context.Context, set map[*subscriber[T]]struct{}, size func(T) int64, keep func(string) bool, f func(T)) (func(), error) {
	sub := &subscriber[T]{q: newQueue(s.opts.EventBuffer, s.opts.EventBufferBytes, size), keep: keep, f: f, done: make(chan struct{})}
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

func eventSize(e tasks.Event) int64 { return e.Task.Size() + 4*itemOverhead }

func busSize(m []byte) int64 { return int64(len(m)) + itemOverhead }
