package acpclient

import (
	"context"
	"sync"
	"sync/atomic"
	"weak"

	"github.com/agentwire/agentwire/rpc"
)

// watermark makes calls return after their updates, for one connection to
// one agent process: recv counts the updates admitted in receive order,
// handled the ones whose handler returned. A call whose answer was read
// waits until handled reaches what recv was then: every update received
// before the answer is among them (later ones only lengthen the wait).
// An agent restarted gets a fresh watermark; the old one is ended, which
// releases its waiters (the updates it still counted will never be
// handled).
type watermark struct {
	conn     *rpc.Conn
	recv     atomic.Int64
	handled  atomic.Int64
	nwaiters atomic.Int64
	ended    chan struct{}

	mu      sync.Mutex
	waiters []waiter
}

type waiter struct {
	target int64
	ch     chan struct{}
}

func newWatermark(conn *rpc.Conn) *watermark {
	return &watermark{conn: conn, ended: make(chan struct{})}
}

// watermarkFor returns the watermark of the agent connection a message
// came on, starting a fresh one when it is new (the first message of a
// restarted agent), or nil for a message of an agent already replaced.
func (c *Conn) watermarkFor(conn *rpc.Conn) *watermark {
	for {
		w := c.wm.Load()
		if w != nil && w.conn == conn {
			return w
		}
		if w != nil && c.wmOld(conn) {
			return nil
		}
		nw := newWatermark(conn)
		if c.wm.CompareAndSwap(w, nw) {
			if w != nil {
				c.retire(w)
			}
			return nw
		}
	}
}

// wmOld reports a connection whose watermark has been retired.
func (c *Conn) wmOld(conn *rpc.Conn) bool {
	p := weak.Make(conn)
	c.retiredMu.Lock()
	defer c.retiredMu.Unlock()
	for _, r := range c.retired {
		if r == p {
			return true
		}
	}
	return false
}

// retire ends a replaced agent connection's watermark. The connection is
// remembered weakly (one word per restart, bounded by the restart policy),
// so the old connection's memory is not kept for it.
func (c *Conn) retire(w *watermark) {
	c.retiredMu.Lock()
	c.retired = append(c.retired, weak.Make(w.conn))
	c.retiredMu.Unlock()
	close(w.ended)
}

func (w *watermark) handledOne() {
	w.handled.Add(1)
	if w.nwaiters.Load() > 0 {
		w.wake()
	}
}

// wake releases the waiters whose updates have all been handled.
func (w *watermark) wake() {
	done := w.handled.Load()
	w.mu.Lock()
	kept := w.waiters[:0]
	for _, x := range w.waiters {
		if x.target <= done {
			close(x.ch)
			w.nwaiters.Add(-1)
		} else {
			kept = append(kept, x)
		}
	}
	clear(w.waiters[len(kept):])
	w.waiters = kept
	w.mu.Unlock()
}

// waitUpdates returns once every update received so far has been handled.
// A call made from an update handler does not wait (the updates behind it
// are held until it returns).
func (c *Conn) waitUpdates(ctx context.Context) {
	if isNested(ctx) {
		return
	}
	w := c.wm.Load()
	if w == nil {
		return
	}
	target := w.recv.Load()
	if w.handled.Load() >= target {
		return
	}
	ch := make(chan struct{})
	w.mu.Lock()
	w.waiters = append(w.waiters, waiter{target, ch})
	w.nwaiters.Add(1)
	w.mu.Unlock()
	if w.handled.Load() >= target {
		w.wake()
	}
	select {
	case <-ch:
	case <-w.ended:
	case <-ctx.Done():
	case <-c.cl.Done():
	}
}
