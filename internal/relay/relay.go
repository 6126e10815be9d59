// Package relay hands values from a goroutine that must not wait (a
// connection's reader) to a function that may take its time, in the order
// they were sent, on a goroutine of its own, with a bound on what waits.
// Finish waits until everything sent has been delivered: whoever answers
// after it (a call's result after its progress, a response after its
// notifications) is never overtaken by what came before.
//
// A relay with nothing to deliver holds no goroutine and no buffer: the
// delivering goroutine is started by the first value of a burst and ends
// when the queue is empty, and the queue grows only as values wait. A
// relay lives as long as what it serves (a bridged listen stream, a call
// with progress), most of that time idle: an idle one costs its struct.
package relay

import "sync"

// Relay delivers the values sent to it, in order, to its function.
type Relay[T any] struct {
	deliver func(T)
	full    func() bool
	bound   int

	mu      sync.Mutex
	closed  bool          // Finish was called, or full stopped the relay
	queue   []T           // waiting, in order (not the one being delivered)
	running bool          // a goroutine is delivering
	drained chan struct{} // made by Finish while running; closed when the queue is empty
}

// New makes a relay that calls deliver with each value sent, in order.
// At most bound values wait; a value sent when they do is dropped and full
// is called (when it is set): if full returns true, the relay takes no
// more values.
func New[T any](bound int, deliver func(T), full func() bool) *Relay[T] {
	return &Relay[T]{deliver: deliver, full: full, bound: bound}
}

// Send queues v without waiting. Values sent after Finish, or after full
// has stopped the relay, are dropped.
func (r *Relay[T]) Send(v T) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return
	}
	if len(r.queue) >= r.bound {
		if r.full != nil && r.full() {
			r.closed = true
		}
		return
	}
	r.queue = append(r.queue, v)
	if !r.running {
		r.running = true
		go r.run()
	}
}

// run delivers until the queue is empty, then ends: the next Send starts
// another. One runs at a time, so the order is kept.
func (r *Relay[T]) run() {
	var zero T
	r.mu.Lock()
	for len(r.queue) > 0 {
		v := r.queue[0]
		r.queue[0] = zero // the queue keeps nothing delivered
		r.queue = r.queue[1:]
		r.mu.Unlock()
		r.deliver(v)
		r.mu.Lock()
	}
	r.queue = nil // an idle relay keeps no buffer
	r.running = false
	if r.drained != nil {
		close(r.drained)
		r.drained = nil
	}
	r.mu.Unlock()
}

// Finish stops taking values and waits until every value queued has been
// delivered.
func (r *Relay[T]) Finish() {
	r.mu.Lock()
	r.closed = true
	if !r.running {
		r.mu.Unlock()
		return
	}
	if r.drained == nil {
		r.drained = make(chan struct{})
	}
	drained := r.drained
	r.mu.Unlock()
	<-drained
}
