package framing_test

import (
	"errors"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/agentwire/agentwire/framing"
)

// countingWriter records every Write.
type countingWriter struct {
	mu     sync.Mutex
	writes []string
	closed bool
}

func (c *countingWriter) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.writes = append(c.writes, string(p))
	return len(p), nil
}

func (c *countingWriter) Close() error {
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	return nil
}

// Messages enqueued before a flush leave in one write (coalescing), each
// with its newline.
func TestEnqueueThenFlushCoalesces(t *testing.T) {
	cw := &countingWriter{}
	o := framing.NewOutput(cw, nil)
	for _, m := range []string{`{"a":1}`, `{"b":2}`, `{"c":3}`} {
		if err := o.Enqueue([]byte(m[:3]), []byte(m[3:])); err != nil {
			t.Fatal(err)
		}
	}
	o.Flush()
	if len(cw.writes) != 1 || cw.writes[0] != "{\"a\":1}\n{\"b\":2}\n{\"c\":3}\n" {
		t.Fatalf("writes %q", cw.writes)
	}
	if err := o.Close(); err != nil || !cw.closed {
		t.Fatalf("Close = %v, closed %v", err, cw.closed)
	}
	if err := o.Send([]byte("x")); !errors.Is(err, framing.ErrOutputClosed) {
		t.Fatalf("Send after Close = %v", err)
	}
}

func TestEmbeddedNewlineIsRejected(t *testing.T) {
	o := framing.NewOutput(io.Discard, nil)
	if err := o.Send([]byte("a\nb")); !errors.Is(err, framing.ErrEmbeddedNewline) {
		t.Fatalf("err = %v", err)
	}
}

// Writes are split into chunks of at most WriteChunk bytes (guarantee C5).
func TestWritesAreChunked(t *testing.T) {
	cw := &countingWriter{}
	o := framing.NewOutput(cw, &framing.OutputOptions{WriteChunk: 10})
	o.Send([]byte(strings.Repeat("x", 25)))
	if len(cw.writes) != 3 || len(cw.writes[0]) != 10 || len(cw.writes[2]) != 6 {
		t.Fatalf("writes %q", cw.writes)
	}
}

// The queue is bounded (guarantee C3): with the writer blocked, a producer waits
// for room before copying; a single message larger than the limit is taken
// only into an empty queue.
func TestQueueIsBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, w := io.Pipe()
		o := framing.NewOutput(w, &framing.OutputOptions{QueueLimit: 100})
		var queued atomic.Int64
		send := func(n int) {
			if err := o.Enqueue([]byte(strings.Repeat("y", n))); err == nil {
				queued.Add(1)
			}
			o.Flush()
		}
		go send(500) // larger than the limit, into an empty queue: taken, and its writer blocks
		synctest.Wait()
		go send(60) // queued behind the block in flight
		synctest.Wait()
		go send(60) // 60+61 > 100: waits for room
		synctest.Wait()
		if n := queued.Load(); n != 2 {
			t.Fatalf("%d messages taken, want 2 (the third must wait for room)", n)
		}
		got, _ := io.ReadAll(io.LimitReader(r, 501+61+61))
		synctest.Wait()
		if n := queued.Load(); n != 3 || len(got) != 623 {
			t.Fatalf("after reading: %d taken, %d bytes", n, len(got))
		}
		o.Close()
		r.Close()
	})
}

// A drain whose reader never reads is abandoned after the idle timeout;
// the stream is closed and nothing more is written.
func TestCloseWithinStalls(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, w := io.Pipe()
		o := framing.NewOutput(w, nil)
		go o.Send([]byte("never read"))
		synctest.Wait()
		start := time.Now()
		err := o.CloseWithin(2*time.Second, 10*time.Second)
		if !errors.Is(err, framing.ErrStalled) || !errors.Is(err, framing.ErrOutputClosed) {
			t.Fatalf("err = %v", err)
		}
		if d := time.Since(start); d != 2*time.Second {
			t.Fatalf("gave up after %v", d)
		}
		if _, err := r.Read(make([]byte, 1)); err == nil {
			t.Fatal("stream still open")
		}
		if err := o.Send([]byte("more")); !errors.Is(err, framing.ErrOutputClosed) {
			t.Fatalf("Send after stall = %v", err)
		}
		if o.Err() == nil {
			t.Fatal("Err() is nil after a stall")
		}
	})
}

// The total bound applies even while the reader makes progress.
func TestCloseWithinTotalBound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, w := io.Pipe()
		o := framing.NewOutput(w, &framing.OutputOptions{WriteChunk: 10})
		go o.Send([]byte(strings.Repeat("z", 1000)))
		synctest.Wait()
		readerDone := make(chan struct{})
		go func() { // reads 10 bytes a second: progress, but slow
			defer close(readerDone)
			buf := make([]byte, 10)
			for {
				time.Sleep(time.Second)
				if _, err := r.Read(buf); err != nil {
					return
				}
			}
		}()
		start := time.Now()
		err := o.CloseWithin(5*time.Second, 7*time.Second)
		if !errors.Is(err, framing.ErrStalled) || time.Since(start) != 7*time.Second {
			t.Fatalf("err = %v after %v", err, time.Since(start))
		}
		r.Close()
		<-readerDone
	})
}

// Abort drops what is queued, interrupts the writer, and refuses more.
func TestAbort(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, w := io.Pipe()
		o := framing.NewOutput(w, nil)
		errc := make(chan error)
		go func() { errc <- o.Send([]byte("stuck")) }()
		synctest.Wait()
		cause := errors.New("peer gone")
		o.Abort(cause)
		<-errc
		if !errors.Is(o.Err(), cause) {
			t.Fatalf("Err = %v", o.Err())
		}
		if err := o.Enqueue([]byte("x")); !errors.Is(err, framing.ErrOutputClosed) || !errors.Is(err, cause) {
			t.Fatalf("Enqueue after Abort = %v", err)
		}
		r.Close()
	})
}

// gateWriter accepts one chunk per token and cannot be interrupted (no
// Close, no write deadline).
type gateWriter struct {
	gate chan struct{}
	n    atomic.Int64
}

func (g *gateWriter) Write(p []byte) (int, error) {
	<-g.gate
	g.n.Add(int64(len(p)))
	return len(p), nil
}

// Regression (found in review): after CloseWithin gave up, a writer that
// could not be interrupted went on writing the rest of its block.
func TestRegressionNothingWrittenAfterStallOnUninterruptibleStream(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := &gateWriter{gate: make(chan struct{})}
		o := framing.NewOutput(g, &framing.OutputOptions{WriteChunk: 16})
		sent := make(chan struct{})
		go func() {
			o.Send([]byte(strings.Repeat("x", 200))) // 13 chunks; blocks in the first
			close(sent)
		}()
		synctest.Wait()
		if err := o.CloseWithin(time.Second, 2*time.Second); !errors.Is(err, framing.ErrStalled) {
			t.Fatalf("CloseWithin = %v", err)
		}
		close(g.gate) // the peer resumes reading
		<-sent
		if n := g.n.Load(); n > 16 {
			t.Errorf("%d bytes written after the stall was reported", n)
		}
	})
}
