package rpc

import (
	"context"
	"errors"
	"io"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/agentwire/agentwire/framing"
)

// output is where a connection's messages go: a byte stream through
// framing.Output (a bounded queue; what inline handlers enqueue leaves in
// one write when the reader next waits for input), or a MessageWriter, one
// call per message. The connection calls the same methods either way; on
// a MessageWriter there is no queue, so enqueueing is writing, and the
// writer's own blocking is the backpressure (guarantee C3).
type output struct {
	lines *framing.Output

	mw      MessageWriter
	onErr   func(error)
	mu      sync.Mutex // one WriteMessage at a time, in order
	scratch Outbound   // the message being written, under mu: reused, since a writer may not keep it
	closed  atomic.Bool
	errMu   sync.Mutex
	err     error // why message output ended; nil after a clean close
}

func (o *output) send(h head, parts ...[]byte) error {
	if o.lines != nil {
		return o.lines.Send(parts...)
	}
	return o.write(h, parts)
}

func (o *output) enqueue(h head, parts ...[]byte) error {
	if o.lines != nil {
		return o.lines.Enqueue(parts...)
	}
	return o.write(h, parts)
}

func (o *output) enqueueContext(ctx context.Context, h head, parts ...[]byte) error {
	if o.lines != nil {
		return o.lines.EnqueueContext(ctx, parts...)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	return o.write(h, parts)
}

// tryEnqueue queues without waiting. A MessageWriter may block, so there
// it reports false and the caller sends on a goroutine of its own.
func (o *output) tryEnqueue(h head, parts ...[]byte) bool {
	if o.lines != nil {
		return o.lines.TryEnqueue(parts...)
	}
	return false
}

func (o *output) flush() error {
	if o.lines != nil {
		return o.lines.Flush()
	}
	return nil
}

func (o *output) flushAsync() {
	if o.lines != nil {
		o.lines.FlushAsync()
	}
}

func (o *output) queued() bool { return o.lines != nil && o.lines.Queued() }
func (o *output) full() bool   { return o.lines != nil && o.lines.Full() }

// addStats fills in what the output queue knows (Stats.OutputQueued,
// Stats.BlockedOnOutput); a MessageWriter has no queue.
func (o *output) addStats(s *Stats) {
	if o.lines != nil {
		s.OutputQueued = o.lines.QueuedBytes()
		s.BlockedOnOutput = o.lines.Blocked()
	}
}

func (o *output) waitRoom() error {
	if o.lines != nil {
		return o.lines.WaitRoom()
	}
	return nil
}

// errValue is why output ended, or nil.
func (o *output) errValue() error {
	if o.lines != nil {
		return o.lines.Err()
	}
	o.errMu.Lock()
	defer o.errMu.Unlock()
	return o.err
}

// closeWithin drains and closes output. A MessageWriter has nothing queued:
// later sends fail, a write in progress finishes on its own (bounded by the
// writer), and a writer that is an io.Closer is closed.
func (o *output) closeWithin(idle, total time.Duration) error {
	if o.lines != nil {
		return o.lines.CloseWithin(idle, total)
	}
	if o.closed.Swap(true) {
		return o.errValue()
	}
	if cl, ok := o.mw.(io.Closer); ok {
		_ = cl.Close()
	}
	return o.errValue()
}

// abort ends output at once with cause.
func (o *output) abort(cause error) {
	if o.lines != nil {
		o.lines.Abort(cause)
		return
	}
	if !o.closed.Swap(true) {
		o.errMu.Lock()
		o.err = cause
		o.errMu.Unlock()
		if cl, ok := o.mw.(io.Closer); ok {
			_ = cl.Close()
		}
	}
}

// write hands one message to the MessageWriter. The parts are copied into
// the Outbound, so the caller's variadic slice does not escape: on the
// stream path the same calls stay allocation-free.
func (o *output) write(h head, parts [][]byte) error {
	if o.closed.Load() {
		return framing.ErrOutputClosed
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.closed.Load() { // closed while we waited for the writer before us
		return framing.ErrOutputClosed
	}
	m := &o.scratch // fields set one by one: no Outbound-sized temporary on the stack
	m.Kind, m.ID, m.Method, m.Error, m.Params, m.Related = h.kind, h.id, h.method, h.err, h.params, h.related
	for i, p := range parts {
		m.parts[i] = unsafe.String(unsafe.SliceData(p), len(p))
	}
	m.n = len(parts)
	err := o.mw.WriteMessage(m)
	*m = Outbound{} // nothing written is kept alive by the connection
	if err != nil {
		o.errMu.Lock()
		if o.err == nil {
			o.err = err
		}
		o.errMu.Unlock()
		o.closed.Store(true)
		if o.onErr != nil {
			// Like framing.Output's OnError: the owner learns of the
			// fault on a goroutine of its own, whoever was writing.
			go o.onErr(err)
		}
		return errors.Join(framing.ErrOutputClosed, err)
	}
	return nil
}
