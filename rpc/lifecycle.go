package rpc

import (
	"errors"
	"fmt"
	"io"
	"reflect"
	"time"

	"github.com/agentwire/agentwire/framing"
	"github.com/agentwire/agentwire/internal/wait"
)

// The connection's life has three phases, driven by stop:
//
//	running  --input EOF-->  grace (EndOfStreamTimeout): admitted handlers
//	                         finish and answer; then handler contexts are
//	                         cancelled
//	running  --Close, read error, write error-->  straight to cancelling
//	cancelling (ShutdownTimeout): handlers get one bound to return;
//	                         then queued output is drained (each write must
//	                         progress within ShutdownTimeout, the whole linger
//	                         stays within grace + shutdown) and the streams close
//	done: Done is closed, Wait returns.

// inputEnded is called by the reader when ReadLine fails.
func (c *Conn) inputEnded(err error) {
	c.mu.Lock()
	closing := c.closeCall || c.stopping
	c.mu.Unlock()
	switch {
	case errors.Is(err, io.EOF):
		c.stop(nil, true)
	case closing:
		c.stop(nil, false) // our own Close interrupted the read
	default:
		c.stop(fmt.Errorf("rpc: reading input: %w", err), false)
	}
}

// outputFailed is called when output can no longer be written: the reply
// stream is gone, so the connection stops without grace (guarantee C6).
func (c *Conn) outputFailed(err error) {
	c.mu.Lock()
	closedByUs := c.outputClosed && errors.Is(err, framing.ErrOutputClosed)
	c.mu.Unlock()
	if closedByUs {
		return
	}
	c.stop(fmt.Errorf("rpc: writing output: %w", err), false)
}

// writeFailed reacts to a failed queue operation: ErrOutputClosed during our
// own shutdown is expected; anything else is a transport fault.
func (c *Conn) writeFailed(err error) {
	c.mu.Lock()
	expected := c.stopping || c.outputClosed
	c.mu.Unlock()
	if expected && errors.Is(err, framing.ErrOutputClosed) {
		return
	}
	if cause := c.out.errValue(); cause != nil {
		err = cause
	}
	c.outputFailed(err)
}

// stop starts shutdown once. cause is nil for a clean end; graceful gives
// admitted handlers the end-of-stream grace first.
func (c *Conn) stop(cause error, graceful bool) {
	c.mu.Lock()
	if c.stopping {
		// Already shutting down. Close or a transport fault during the
		// end-of-stream grace cuts the grace short (guarantee C6), and a fault
		// becomes the cause.
		if !graceful && !c.hurried {
			c.hurried = true
			if c.hurry != nil {
				close(c.hurry)
			}
		}
		if c.cause == nil && cause != nil {
			c.cause = cause
		}
		c.mu.Unlock()
		return
	}
	c.stopping = true
	c.cause = cause
	if c.inputDone != nil {
		close(c.inputDone)
	}
	idle := closedChan
	quiet := c.active == 0
	if !quiet {
		c.idle = make(chan struct{})
		idle = c.idle
		if graceful {
			c.hurry = make(chan struct{})
		}
	}
	pending := c.pending
	c.pending = nil
	c.mu.Unlock()

	lost := ErrConnectionLost
	if cause != nil {
		lost = fmt.Errorf("%w: %w", ErrConnectionLost, cause)
	}
	for _, pc := range pending {
		pc <- callResult{err: lost}
	}
	if quiet && c.push {
		// Nothing runs and nothing is queued: a pushed connection (one
		// HTTP request's) ends right here, without a goroutine or a timer.
		c.shutdown(idle, graceful)
		return
	}
	go c.shutdown(idle, graceful)
}

// closedChan is an idle signal for a connection with nothing running.
// It is closed once and never written: no state is shared through it.
var closedChan = func() chan struct{} {
	ch := make(chan struct{})
	close(ch)
	return ch
}()

// isClosed reports whether ch is closed, without a timer.
func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

func (c *Conn) shutdown(idle <-chan struct{}, graceful bool) {
	start := time.Now()
	budget := c.opts.ShutdownTimeout
	if graceful {
		budget += c.opts.EndOfStreamTimeout
	}
	if graceful && !isClosed(idle) {
		t := time.NewTimer(c.opts.EndOfStreamTimeout)
		select {
		case <-idle:
		case <-c.hurry:
		case <-t.C:
		}
		t.Stop()
	}
	c.mu.Lock()
	cause := c.cause
	c.mu.Unlock()
	handlerCause := cause
	switch {
	case handlerCause != nil:
	case graceful:
		handlerCause = ErrEndOfStream
	default:
		handlerCause = ErrClosed
	}
	// The queue closes first: a handler that returns because of the
	// cancellation must not hand its slot to a request that never started.
	c.dropQueued()
	c.cancelLive(handlerCause)
	if c.in != nil && c.in.watchdog != nil {
		c.in.watchdog.Stop()
	}
	if !graceful {
		// Unblock a reader waiting for input that will never matter now.
		c.closeInput()
	}
	wait.Closed(idle, c.opts.ShutdownTimeout)

	var outErr error
	if remaining := budget - time.Since(start); remaining > 0 {
		outErr = c.out.closeWithin(c.opts.ShutdownTimeout, remaining)
	} else {
		c.out.abort(framing.ErrStalled)
		outErr = c.out.errValue()
	}
	if c.in != nil {
		if cl, ok := c.in.r.(io.Closer); ok {
			_ = cl.Close()
		}
	}
	c.closeSource()
	c.mu.Lock()
	cause = c.cause // a fault during the shutdown counts too
	c.mu.Unlock()
	switch {
	case cause != nil:
		c.err = cause
	case outErr != nil:
		c.err = fmt.Errorf("rpc: draining output: %w", outErr)
	}
	c.mu.Lock()
	c.finished = true
	if c.done != nil {
		close(c.done)
	}
	life := c.life
	c.mu.Unlock()
	if life != nil {
		life.cancel()
	}
}

// closeInput stops the reader before output is drained. A stream that is
// both our input and our output (a socket) must keep its write half: it gets
// CloseRead when it has one, and is otherwise left to be closed after the
// drain.
func (c *Conn) closeInput() {
	in := c.in
	switch {
	case in == nil:
		return
	case in.src != nil:
		c.closeSource()
		return
	case in.r == nil:
		return
	}
	if cr, ok := in.r.(interface{ CloseRead() error }); ok {
		_ = cr.CloseRead()
		return
	}
	if sameStream(in.r, in.w) {
		return
	}
	if cl, ok := in.r.(io.Closer); ok {
		_ = cl.Close()
	}
}

// closeSource closes a MessageReader that is an io.Closer, once.
func (c *Conn) closeSource() {
	if c.in == nil {
		return
	}
	if cl, ok := c.in.src.(io.Closer); ok && c.in.srcClosed.CompareAndSwap(false, true) {
		_ = cl.Close()
	}
}

// sameStream reports whether r and w are one object (comparing only values
// that can be compared without a panic).
func sameStream(r io.Reader, w io.Writer) bool {
	wr, ok := w.(io.Reader)
	if !ok || reflect.TypeOf(r) != reflect.TypeOf(wr) || !reflect.TypeOf(r).Comparable() {
		return false
	}
	return r == wr
}
