package framing

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"
)

// Defaults of an Output (guarantees C3, C5, C6).
const (
	DefaultQueueLimit   = 1 << 20 // bytes of encoded messages waiting to be written
	DefaultWriteChunk   = 16 << 10
	DefaultIdleTimeout  = 5 * time.Second  // no-progress bound while draining
	DefaultTotalTimeout = 10 * time.Second // whole drain bound of a standalone Close
)

var (
	// ErrOutputClosed is matched by every error an Output returns once it no
	// longer accepts messages: after Close, after Abort and after a failed
	// write.
	ErrOutputClosed = errors.New("framing: output closed")
	// ErrEmbeddedNewline rejects a message that would break the framing.
	ErrEmbeddedNewline = errors.New("framing: message contains a newline")
	// ErrStalled is the cause recorded when the peer made no progress
	// reading within the deadline while output was being drained.
	ErrStalled = errors.New("framing: peer stopped reading output")
)

// OutputOptions configures an Output. The zero value (or nil) means the
// defaults.
type OutputOptions struct {
	// QueueLimit bounds the bytes queued behind the block being written.
	// A single larger message is accepted into an empty queue. Default 1 MiB.
	QueueLimit int
	// WriteChunk is the largest single Write; progress is checked after
	// each one. Default 16 KiB.
	WriteChunk int
	// OnError, if set, is called once (on a goroutine of its own) when a
	// write fails, whoever was writing: the owner of the stream learns of a
	// transport fault even when no producer is waiting.
	OnError func(error)
}

// Output is the bounded outbound queue of one connection (guarantees C3, C5).
//
// Messages are appended whole, each with its '\n', to a queue of at most
// QueueLimit bytes; a producer waits for room before it copies anything. One
// more block, the one being written, may be in flight. There is no dedicated
// writer goroutine: whoever finds queued bytes and no active writer becomes
// the writer (Flush, Send, or a producer waiting for room), so a reply costs
// no goroutine hand-off and consecutive replies leave in one write.
//
// Writes are split into chunks of at most WriteChunk bytes. While the Output
// is running normally a slow or paused reader simply holds writers back (that
// is the backpressure). Once Close starts draining, each chunk must make
// progress within the idle timeout and the whole drain must finish within the
// total timeout; otherwise output is closed. After a failed write nothing else
// is ever written to the stream, so a half-written message is never followed
// by another.
type Output struct {
	w          io.Writer
	limit      int
	chunk      int
	queued     atomic.Int64 // len(pending), readable without the lock
	mu         sync.Mutex
	cond       sync.Cond // room, writer and state changes
	pending    []byte
	spare      []byte
	writing    bool
	closed     bool  // no new messages
	err        error // sticky: why output ended
	draining   bool
	idle       time.Duration
	idleTimer  *time.Timer
	totalTimer *time.Timer
	stopOnce   sync.Once
	written    atomic.Int64
	halted     atomic.Bool // set with err: a writer stops between chunks
	onError    func(error)
	// Blocked's bookkeeping, under mu: the time callers have waited for
	// room, and those waiting now (how many, and the sum of their start
	// times since epoch). The clock is read only by a caller that finds
	// the queue full.
	epoch   time.Time
	blocked time.Duration
	waiters int
	waitSum time.Duration
}

// roomWait is one caller's wait for room: on once it found the queue full.
type roomWait struct {
	start time.Duration // since Output.epoch
	on    bool
}

// startWaitLocked notes that a caller found the queue full, once per wait.
func (o *Output) startWaitLocked(w *roomWait) {
	if w.on {
		return
	}
	w.on, w.start = true, time.Since(o.epoch)
	o.waiters++
	o.waitSum += w.start
}

// endWaitLocked adds a finished wait to Blocked; a caller that never
// waited adds nothing.
func (o *Output) endWaitLocked(w *roomWait) {
	if w.on { // inlined: the common case, no wait, costs one test
		o.finishWaitLocked(w)
	}
}

// finishWaitLocked is kept out of line, so that endWaitLocked inlines.
//
//go:noinline
func (o *Output) finishWaitLocked(w *roomWait) {
	w.on = false
	o.waiters--
	o.waitSum -= w.start
	o.blocked += time.Since(o.epoch) - w.start
}

// NewOutput returns an Output writing to w. If w also has a CloseWrite or
// Close method, Close calls it after draining and Abort uses it to unblock a
// stuck write.
func NewOutput(w io.Writer, opts *OutputOptions) *Output {
	o := &Output{w: w, limit: DefaultQueueLimit, chunk: DefaultWriteChunk, epoch: time.Now()}
	if opts != nil {
		if opts.QueueLimit > 0 {
			o.limit = opts.QueueLimit
		}
		if opts.WriteChunk > 0 {
			o.chunk = opts.WriteChunk
		}
		o.onError = opts.OnError
	}
	o.cond.L = &o.mu
	return o
}

func msgLen(parts [][]byte) (int, error) {
	n := 1 // '\n'
	for _, p := range parts {
		if bytes.IndexByte(p, '\n') >= 0 {
			return 0, ErrEmbeddedNewline
		}
		n += len(p)
	}
	return n, nil
}

// Enqueue appends one message, the concatenation of parts, and its '\n'. It
// waits for room first (writing queued bytes itself if nobody else is), and
// does not start a write for the new message: call Flush, or use Send.
func (o *Output) Enqueue(parts ...[]byte) error {
	n, err := msgLen(parts)
	if err != nil {
		return err
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	var wt roomWait
	for {
		if o.closed || o.err != nil {
			o.endWaitLocked(&wt)
			return o.closedErrLocked()
		}
		if len(o.pending) == 0 || len(o.pending)+n <= o.limit {
			break
		}
		o.startWaitLocked(&wt)
		if !o.writing {
			o.writeLocked()
			continue
		}
		o.cond.Wait()
	}
	o.endWaitLocked(&wt)
	o.appendLocked(parts)
	return nil
}

// EnqueueContext is Enqueue for a caller that must not wait longer than
// ctx: it never writes itself (it starts a background writer instead), and
// it gives up when ctx ends before there is room.
func (o *Output) EnqueueContext(ctx context.Context, parts ...[]byte) error {
	n, err := msgLen(parts)
	if err != nil {
		return err
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	var stop func() bool
	var wt roomWait
	defer func() { // before the deferred Unlock
		if stop != nil {
			stop()
		}
		o.endWaitLocked(&wt)
	}()
	for {
		if o.closed || o.err != nil {
			return o.closedErrLocked()
		}
		if len(o.pending) == 0 || len(o.pending)+n <= o.limit {
			break
		}
		o.startWaitLocked(&wt)
		if err := ctx.Err(); err != nil {
			return err
		}
		if !o.writing {
			o.startWriterLocked()
		}
		if stop == nil {
			stop = context.AfterFunc(ctx, func() {
				o.mu.Lock()
				o.cond.Broadcast()
				o.mu.Unlock()
			})
		}
		o.cond.Wait()
	}
	o.appendLocked(parts)
	return nil
}

// FlushAsync makes sure queued bytes are being written without writing
// them on the caller's goroutine: if nobody is writing, it starts a writer.
func (o *Output) FlushAsync() {
	if o.queued.Load() == 0 {
		return
	}
	o.mu.Lock()
	if !o.writing && len(o.pending) > 0 && o.err == nil {
		o.startWriterLocked()
	}
	o.mu.Unlock()
}

func (o *Output) startWriterLocked() {
	o.writing = true // claimed now, so no one else starts a writer
	go func() {
		o.mu.Lock()
		o.writing = false
		if len(o.pending) > 0 && o.err == nil {
			o.writeLocked()
		}
		o.cond.Broadcast()
		o.mu.Unlock()
	}()
}

// TryEnqueue appends one message if it fits without waiting, and reports
// whether it did.
func (o *Output) TryEnqueue(parts ...[]byte) bool {
	n, err := msgLen(parts)
	if err != nil {
		return false
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.closed || o.err != nil || (len(o.pending) > 0 && len(o.pending)+n > o.limit) {
		return false
	}
	o.appendLocked(parts)
	return true
}

func (o *Output) appendLocked(parts [][]byte) {
	for _, p := range parts {
		o.pending = append(o.pending, p...)
	}
	o.pending = append(o.pending, '\n')
	o.queued.Store(int64(len(o.pending)))
}

// Send is Enqueue followed by Flush.
func (o *Output) Send(parts ...[]byte) error {
	if err := o.Enqueue(parts...); err != nil {
		return err
	}
	return o.Flush()
}

// Flush makes sure queued bytes are being written: if no writer is active,
// the caller writes them now, until the queue is empty. It does not wait for
// another goroutine's write to finish. It returns an error once output has
// failed.
func (o *Output) Flush() error {
	if o.queued.Load() == 0 && !o.halted.Load() {
		return nil
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if !o.writing && len(o.pending) > 0 && o.err == nil {
		o.writeLocked()
	}
	if o.err != nil && !errors.Is(o.err, errCleanClose) {
		return o.closedErrLocked()
	}
	return nil
}

// Queued reports whether any bytes wait in the queue.
func (o *Output) Queued() bool { return o.queued.Load() > 0 }

// Full reports whether the queue holds at least QueueLimit bytes. A reader
// of input checks it to stop reading while output is backed up (guarantee C3).
func (o *Output) Full() bool { return o.queued.Load() >= int64(o.limit) }

// WaitRoom blocks until the queue is below its limit, writing queued bytes
// itself when nobody else is. It returns an error once output has ended.
func (o *Output) WaitRoom() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	var wt roomWait
	defer o.endWaitLocked(&wt) // before the deferred Unlock
	for len(o.pending) >= o.limit {
		o.startWaitLocked(&wt)
		if o.err != nil || o.closed {
			return o.closedErrLocked()
		}
		if !o.writing {
			o.writeLocked()
			continue
		}
		o.cond.Wait()
	}
	if o.err != nil {
		return o.closedErrLocked()
	}
	return nil
}

// Written returns the number of bytes written to the stream so far.
func (o *Output) Written() int64 { return o.written.Load() }

// QueuedBytes returns the bytes waiting in the queue now, behind the block
// being written (at most QueueLimit, or one larger message).
func (o *Output) QueuedBytes() int64 { return o.queued.Load() }

// Blocked returns the time callers have spent waiting for room in a full
// queue (Enqueue, EnqueueContext, Send and WaitRoom, including the writes a
// waiting caller makes itself), summed over callers, those still waiting
// included: two producers blocked for a second add two. It grows only
// while the peer reads slower than we write (backpressure); a caller that
// finds room costs no clock read.
func (o *Output) Blocked() time.Duration {
	o.mu.Lock()
	defer o.mu.Unlock()
	d := o.blocked
	if o.waiters > 0 {
		d += time.Duration(o.waiters)*time.Since(o.epoch) - o.waitSum
	}
	return d
}

// Err returns why output ended, or nil while it is running or after a clean
// Close.
func (o *Output) Err() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if errors.Is(o.err, errCleanClose) {
		return nil
	}
	return o.err
}

var errCleanClose = errors.New("framing: output closed")

func (o *Output) closedErrLocked() error {
	if o.err == nil || errors.Is(o.err, errCleanClose) {
		return ErrOutputClosed
	}
	return fmt.Errorf("%w: %w", ErrOutputClosed, o.err)
}

// writeLocked writes queued blocks until the queue is empty or a write
// fails. It is called with o.mu held and no active writer; it releases the
// lock around each Write.
func (o *Output) writeLocked() {
	o.writing = true
	for len(o.pending) > 0 && o.err == nil {
		block := o.pending
		o.pending = o.spare[:0]
		o.queued.Store(0)
		o.cond.Broadcast() // room for waiting producers
		o.mu.Unlock()
		err := o.writeBlock(block)
		o.mu.Lock()
		if cap(block) <= 4*o.limit {
			o.spare = block[:0]
		} else {
			o.spare = nil // drop a buffer grown by one huge message
		}
		if err != nil && o.err == nil {
			o.failLocked(err)
			if o.onError != nil {
				go o.onError(err)
			}
		}
	}
	o.writing = false
	o.cond.Broadcast()
}

// failLocked records why output ended and drops what is queued.
func (o *Output) failLocked(err error) {
	o.err = err
	o.halted.Store(true)
	o.pending = nil
	o.queued.Store(0)
	o.cond.Broadcast()
}

func (o *Output) writeBlock(b []byte) error {
	for len(b) > 0 {
		if o.halted.Load() {
			// Aborted or stalled meanwhile: not one more byte, even on a
			// stream that could not be interrupted.
			return ErrOutputClosed
		}
		n := min(len(b), o.chunk)
		w, err := o.w.Write(b[:n])
		if w > 0 {
			o.written.Add(int64(w))
			o.noteProgress()
		}
		if err == nil && w < n {
			err = io.ErrShortWrite
		}
		if err != nil {
			return err
		}
		b = b[n:]
	}
	return nil
}

// noteProgress resets the no-progress deadline while draining (guarantee C5: a
// successful write resets it, so a slow but live reader is never cut off).
func (o *Output) noteProgress() {
	o.mu.Lock()
	if o.draining && o.idleTimer != nil {
		o.idleTimer.Reset(o.idle)
	}
	o.mu.Unlock()
}

// Abort ends output at once: queued messages are dropped, a write in
// progress is interrupted by closing the stream (or setting a past write
// deadline), and nothing more is written. cause is reported by Err.
func (o *Output) Abort(cause error) {
	if cause == nil {
		cause = ErrOutputClosed
	}
	o.mu.Lock()
	if o.err == nil {
		o.failLocked(cause)
	}
	o.closed = true
	o.cond.Broadcast()
	o.mu.Unlock()
	o.stopStream(true)
}

// stopStream closes the underlying stream once. interrupt prefers a write
// deadline in the past (it unblocks a Write without closing a socket's read
// half); a plain close prefers CloseWrite.
func (o *Output) stopStream(interrupt bool) {
	o.stopOnce.Do(func() {
		if interrupt {
			if d, ok := o.w.(interface{ SetWriteDeadline(time.Time) error }); ok {
				if d.SetWriteDeadline(time.Unix(1, 0)) == nil {
					if cw, ok := o.w.(interface{ CloseWrite() error }); ok {
						_ = cw.CloseWrite()
						return
					}
				}
			}
		} else if cw, ok := o.w.(interface{ CloseWrite() error }); ok {
			_ = cw.CloseWrite()
			return
		}
		if c, ok := o.w.(io.Closer); ok {
			_ = c.Close()
		}
	})
}

// Close stops accepting messages, drains what is queued within the default
// bounds (5 s without progress, 10 s in all) and closes the stream. It
// returns nil when everything queued was written.
func (o *Output) Close() error { return o.CloseWithin(DefaultIdleTimeout, DefaultTotalTimeout) }

// CloseWithin is Close with explicit bounds: each write must make progress
// within idle, and the drain must end within total. A stalled or failed drain
// aborts output and returns an error matching ErrStalled or the write error.
func (o *Output) CloseWithin(idle, total time.Duration) error {
	if idle <= 0 {
		idle = DefaultIdleTimeout
	}
	if total <= 0 {
		total = idle
	}
	o.mu.Lock()
	o.closed = true
	if o.err == nil && (o.writing || len(o.pending) > 0) {
		o.draining = true
		o.idle = idle
		o.idleTimer = time.AfterFunc(idle, o.stalled)
		o.totalTimer = time.AfterFunc(total, o.stalled)
		for o.err == nil && (o.writing || len(o.pending) > 0) {
			if !o.writing {
				o.writeLocked()
				continue
			}
			o.cond.Wait()
		}
		o.idleTimer.Stop()
		o.totalTimer.Stop()
		o.draining = false
	}
	err := o.err
	if err == nil {
		o.err = errCleanClose
	}
	o.cond.Broadcast()
	o.mu.Unlock()
	if err != nil {
		o.stopStream(true)
		return fmt.Errorf("%w: %w", ErrOutputClosed, err)
	}
	o.stopStream(false)
	return nil
}

// stalled fires when a drain deadline passes: it records ErrStalled and
// interrupts the writer, which then gives up.
func (o *Output) stalled() {
	o.mu.Lock()
	if !o.draining || o.err != nil {
		o.mu.Unlock()
		return
	}
	o.failLocked(ErrStalled)
	o.mu.Unlock()
	o.stopStream(true)
}
