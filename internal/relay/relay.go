// Package relay hands values from a goroutine that must not wait (a
// connection's reader) to a function that may take its time, in the order
// they were sent, on a goroutine of its own, with a bound on what waits.
// Finish waits until everything sent has been delivered: whoever answers
// after it (a call's result after its progress, a response after its
// notifications) is never overtaken by what came before.
package relay

import "sync"

// Relay delivers the values sent to it, in order, to its function.
type Relay[T any] struct {
	full   func() bool
	mu     sync.Mutex
	closed bool
	ch     chan T
	done   chan struct{}
}

// New starts a relay that calls deliver with each value sent, in order.
// At most bound values wait; a value sent when they do is dropped and full
// is called (when it is set): if full returns true, the relay takes no
// more values.
func New[T any](bound int, deliver func(T), full func() bool) *Relay[T] {
	r := &Relay[T]{full: full, ch: make(chan T, bound), done: make(chan struct{})}
	go func() {
		defer close(r.done)
		for v := range r.ch {
			deliver(v)
		}
	}()
	return r
}

// Send queues v without waiting. Values sent after Finish, or after full
// has stopped the relay, are dropped.
func (r *Relay[T]) Send(v T) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return
	}
	select {
	case r.ch <- v:
	default:
		if r.full != nil && r.full() {
			r.closed = true
			close(r.ch)
		}
	}
}

// Finish stops taking values and waits until every value queued has been
// delivered.
func (r *Relay[T]) Finish() {
	r.mu.Lock()
	if !r.closed {
		r.closed = true
		close(r.ch)
	}
	r.mu.Unlock()
	<-r.done
}
