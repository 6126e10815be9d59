package tasks

import (
	"cmp"
	"container/heap"
	"context"
	"encoding/base64"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"time"
)

// MemoryOptions bounds a Memory store. The zero value (or nil) means the
// documented defaults.
type MemoryOptions struct {
	// MaxTasks is the most tasks kept, live and ended. Default 10,000.
	// When it is reached, the ended task closest to its expiry is
	// forgotten early to make room (counted in Stats.Evicted); when every
	// task is live, Create fails with ErrFull.
	MaxTasks int
	// MaxBytes bounds the payloads of all tasks together (results,
	// errors, input requests and answers; Task.Size). Default 64 MiB;
	// enforced like MaxTasks.
	MaxBytes int64
	// MaxTaskBytes bounds one task's payload: an update that would make a
	// task larger fails with ErrTooLarge. Default 8 MiB; never more than
	// MaxBytes (a task the whole store cannot hold is too large, and does
	// not evict the ended tasks trying to fit).
	MaxTaskBytes int64
	// Now is the clock (expiry); nil means time.Now. Tests inject one.
	Now func() time.Time
	// Logger receives a line for every refusal and early eviction; nil
	// means slog.Default().
	Logger *slog.Logger
	// EventBuffer is how many events may wait for a slow subscriber
	// before the oldest are dropped (Stats.EventsDropped). Default 4096.
	EventBuffer int
}

// MemoryStats counts what a Memory store holds and has refused.
type MemoryStats struct {
	Tasks         int   // tasks held now
	Live          int   // of those, not ended
	Bytes         int64 // their payloads
	Created       int64
	Expired       int64 // forgotten at their expiry
	Evicted       int64 // forgotten before it, to make room
	Refused       int64 // Create or Update failed with ErrFull
	TooLarge      int64 // updates refused with ErrTooLarge
	EventsDropped int64 // events a slow subscriber lost
}

// Memory is a Store in this process's memory, bounded in tasks and bytes,
// that forgets ended tasks at their expiry. It has no goroutine of its
// own but one per subscriber; expiry is checked as it is used (and by
// Sweep).
type Memory struct {
	opts MemoryOptions

	mu                                           sync.Mutex
	tasks                                        map[string]*entry
	expiry                                       expiryHeap // ended tasks, soonest expiry first
	seq                                          uint64
	bytes                                        int64
	live                                         int
	subs                                         map[*subscriber]struct{}
	created, expired, evicted, refused, tooLarge int64
	dropped                                      int64 // events lost by subscribers that have stopped
}

type entry struct {
	t     *Task
	seq   uint64
	index int // in expiry; -1 when not there
	size  int64
}

// NewMemory returns an empty store.
func NewMemory(opts *MemoryOptions) *Memory {
	m := &Memory{tasks: map[string]*entry{}, subs: map[*subscriber]struct{}{}}
	if opts != nil {
		m.opts = *opts
	}
	if m.opts.MaxTasks <= 0 {
		m.opts.MaxTasks = 10_000
	}
	if m.opts.MaxBytes <= 0 {
		m.opts.MaxBytes = 64 << 20
	}
	if m.opts.MaxTaskBytes <= 0 {
		m.opts.MaxTaskBytes = 8 << 20
	}
	m.opts.MaxTaskBytes = min(m.opts.MaxTaskBytes, m.opts.MaxBytes)
	if m.opts.Now == nil {
		m.opts.Now = time.Now
	}
	if m.opts.Logger == nil {
		m.opts.Logger = slog.Default()
	}
	if m.opts.EventBuffer <= 0 {
		m.opts.EventBuffer = 4096
	}
	return m
}

// Stats reports what the store holds and has refused.
func (m *Memory) Stats() MemoryStats {
	m.mu.Lock()
	defer m.mu.Unlock()
	dropped := m.dropped
	for s := range m.subs {
		s.mu.Lock()
		dropped += s.dropped
		s.mu.Unlock()
	}
	return MemoryStats{Tasks: len(m.tasks), Live: m.live, Bytes: m.bytes, Created: m.created, Expired: m.expired,
		Evicted: m.evicted, Refused: m.refused, TooLarge: m.tooLarge, EventsDropped: dropped}
}

// Sweep forgets the ended tasks whose expiry has passed.
func (m *Memory) Sweep() {
	m.mu.Lock()
	m.sweepLocked(m.opts.Now())
	m.mu.Unlock()
}

func (m *Memory) sweepLocked(now time.Time) {
	for len(m.expiry) > 0 {
		e := m.expiry[0]
		if now.Before(e.t.ExpiresAt()) {
			return
		}
		m.removeLocked(e)
		m.expired++
	}
}

func (m *Memory) removeLocked(e *entry) {
	if e.index >= 0 {
		heap.Remove(&m.expiry, e.index)
	}
	if !e.t.Status.Terminal() {
		m.live--
	}
	m.bytes -= e.size
	delete(m.tasks, e.t.ID)
}

// makeRoomLocked forgets ended tasks, soonest expiry first, until one more
// task of size bytes fits; false when only live tasks are left.
func (m *Memory) makeRoomLocked(size int64) bool {
	for len(m.tasks) >= m.opts.MaxTasks || m.bytes+size > m.opts.MaxBytes {
		if len(m.expiry) == 0 {
			return false
		}
		e := m.expiry[0]
		m.opts.Logger.Warn("tasks: an ended task is forgotten before its expiry to make room",
			"task", e.t.ID, "tasks", len(m.tasks), "max_tasks", m.opts.MaxTasks, "bytes", m.bytes, "max_bytes", m.opts.MaxBytes)
		m.removeLocked(e)
		m.evicted++
	}
	return true
}

// Create stores t (a copy), or fails with ErrExists, ErrTooLarge or
// ErrFull.
func (m *Memory) Create(ctx context.Context, t *Task) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c := t.Clone()
	size := c.Size()
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.opts.Now()
	m.sweepLocked(now)
	if c.Status.Terminal() && c.EndedAt.IsZero() {
		c.EndedAt = now
	}
	if _, ok := m.tasks[c.ID]; ok {
		return ErrExists
	}
	if size > m.opts.MaxTaskBytes {
		m.tooLarge++
		return ErrTooLarge
	}
	if !m.makeRoomLocked(size) {
		m.refused++
		m.opts.Logger.Warn("tasks: a task is refused: the store is full of live tasks",
			"tasks", len(m.tasks), "max_tasks", m.opts.MaxTasks, "bytes", m.bytes, "max_bytes", m.opts.MaxBytes)
		return fmt.Errorf("%w (%d tasks, %d bytes)", ErrFull, len(m.tasks), m.bytes)
	}
	m.seq++
	e := &entry{t: c, seq: m.seq, index: -1, size: size}
	m.tasks[c.ID] = e
	m.bytes += size
	m.created++
	if c.Status.Terminal() {
		heap.Push(&m.expiry, e)
	} else {
		m.live++
	}
	m.publishLocked(c)
	return nil
}

// Get returns a copy of the task, or ErrNotFound.
func (m *Memory) Get(ctx context.Context, id string) (*Task, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.sweepLocked(m.opts.Now())
	e, ok := m.tasks[id]
	if !ok {
		return nil, ErrNotFound
	}
	return e.t.Clone(), nil
}

// Update changes the task with f, atomically; see Store.
func (m *Memory) Update(ctx context.Context, id string, f func(*Task) error) (*Task, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.opts.Now()
	m.sweepLocked(now)
	e, ok := m.tasks[id]
	if !ok {
		return nil, ErrNotFound
	}
	c := e.t.Clone()
	if err := f(c); err != nil {
		return nil, err
	}
	c.ID = id // not f's to change
	wasLive := !e.t.Status.Terminal()
	if e.t.Status.Terminal() && c.Status != e.t.Status {
		c.Status = e.t.Status // an ended task stays ended
	}
	size := c.Size()
	if size > m.opts.MaxTaskBytes {
		m.tooLarge++
		m.opts.Logger.Warn("tasks: an update is refused: the task would exceed its size limit",
			"task", id, "bytes", size, "max_task_bytes", m.opts.MaxTaskBytes)
		return nil, fmt.Errorf("%w (%d bytes, at most %d)", ErrTooLarge, size, m.opts.MaxTaskBytes)
	}
	if grow := size - e.size; grow > 0 && m.bytes+grow > m.opts.MaxBytes {
		// Make room among the others; this one is not a candidate.
		idx := e.index
		if idx >= 0 {
			heap.Remove(&m.expiry, idx)
		}
		delete(m.tasks, id)
		m.bytes -= e.size
		if wasLive {
			m.live--
		}
		ok := m.makeRoomLocked(size)
		m.tasks[id] = e
		m.bytes += e.size
		if wasLive {
			m.live++
		}
		if idx >= 0 {
			heap.Push(&m.expiry, e)
		}
		if !ok {
			m.refused++
			m.opts.Logger.Warn("tasks: an update is refused: the store is full", "task", id, "bytes", m.bytes, "max_bytes", m.opts.MaxBytes)
			return nil, fmt.Errorf("%w (%d bytes held)", ErrFull, m.bytes)
		}
	}
	if c.Status.Terminal() && wasLive {
		if c.EndedAt.IsZero() {
			c.EndedAt = now
		}
		m.live--
	}
	m.bytes += size - e.size
	e.t, e.size = c, size
	if c.Status.Terminal() {
		if e.index >= 0 {
			heap.Fix(&m.expiry, e.index)
		} else {
			heap.Push(&m.expiry, e)
		}
	}
	m.publishLocked(c)
	return c.Clone(), nil
}

// List returns a page of the tasks of owner (and scope); see Store.
func (m *Memory) List(ctx context.Context, owner, scope, cursor string, limit int) ([]*Task, string, error) {
	if err := ctx.Err(); err != nil {
		return nil, "", err
	}
	var after uint64
	if cursor != "" {
		b, err := base64.RawURLEncoding.DecodeString(cursor)
		if err == nil {
			after, err = strconv.ParseUint(string(b), 10, 64)
		}
		if err != nil {
			return nil, "", ErrInvalidCursor
		}
	}
	if limit <= 0 {
		limit = 100
	}
	m.mu.Lock()
	m.sweepLocked(m.opts.Now())
	var es []*entry
	for _, e := range m.tasks {
		if e.seq > after && e.t.Owner == owner && (owner != "" || e.t.Scope == scope) {
			es = append(es, e)
		}
	}
	slices.SortFunc(es, func(a, b *entry) int { return cmp.Compare(a.seq, b.seq) })
	next := ""
	if len(es) > limit {
		es = es[:limit]
		next = base64.RawURLEncoding.EncodeToString([]byte(strconv.FormatUint(es[limit-1].seq, 10)))
	}
	out := make([]*Task, len(es))
	for i, e := range es {
		out[i] = e.t.Clone()
	}
	m.mu.Unlock()
	return out, next, nil
}

// Subscribe delivers every change to f on a goroutine of the
// subscription's own; see Store.
func (m *Memory) Subscribe(ctx context.Context, f func(Event)) (func(), error) {
	return m.SubscribeSelected(ctx, nil, f)
}

// SubscribeSelected is Subscribe for the changes of the tasks keep
// accepts (nil: all of them); see Selective.
func (m *Memory) SubscribeSelected(ctx context.Context, keep func(id string) bool, f func(Event)) (func(), error) {
	s := &subscriber{f: f, keep: keep, wake: make(chan struct{}, 1), done: make(chan struct{}), max: m.opts.EventBuffer}
	m.mu.Lock()
	m.subs[s] = struct{}{}
	m.mu.Unlock()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			m.mu.Lock()
			delete(m.subs, s)
			// What it lost stays counted (a counter never goes down): no
			// event reaches s once it is out of subs.
			s.mu.Lock()
			m.dropped += s.dropped
			s.mu.Unlock()
			m.mu.Unlock()
			close(s.done)
		})
	}
	go s.run(ctx, stop)
	return stop, nil
}

func (m *Memory) publishLocked(t *Task) {
	var ev Event
	for s := range m.subs {
		if s.keep != nil && !s.keep(t.ID) {
			continue
		}
		if ev.Task == nil {
			ev.Task = t.Clone() // one copy, shared by the subscribers that keep it
		}
		s.push(ev)
	}
}

// subscriber is one Subscribe: a bounded queue and the goroutine that
// drains it into f.
type subscriber struct {
	f    func(Event)
	keep func(id string) bool // nil: every task
	wake chan struct{}
	done chan struct{}
	max  int

	mu      sync.Mutex
	queue   []Event
	dropped int64
}

func (s *subscriber) push(ev Event) {
	s.mu.Lock()
	if len(s.queue) >= s.max {
		s.queue = s.queue[1:]
		s.dropped++
	}
	s.queue = append(s.queue, ev)
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

func (s *subscriber) run(ctx context.Context, stop func()) {
	defer stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.done:
			return
		case <-s.wake:
		}
		for {
			s.mu.Lock()
			if len(s.queue) == 0 {
				s.queue = nil
				s.mu.Unlock()
				break
			}
			ev := s.queue[0]
			s.queue = s.queue[1:]
			s.mu.Unlock()
			s.f(ev)
		}
	}
}

// expiryHeap orders ended tasks by expiry.
type expiryHeap []*entry

func (h expiryHeap) Len() int { return len(h) }
func (h expiryHeap) Less(i, j int) bool {
	return h[i].t.ExpiresAt().Before(h[j].t.ExpiresAt())
}
func (h expiryHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index, h[j].index = i, j
}
func (h *expiryHeap) Push(x any) {
	e := x.(*entry)
	e.index = len(*h)
	*h = append(*h, e)
}
func (h *expiryHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	old[len(old)-1] = nil
	e.index = -1
	*h = old[:len(old)-1]
	return e
}
