package framing_test

import (
	"context"
	"io"
	"testing"
	"testing/synctest"
	"time"

	"github.com/agentwire/agentwire/framing"
)

// stallWriter blocks every Write until release is closed.
type stallWriter struct{ release chan struct{} }

func (w *stallWriter) Write(p []byte) (int, error) {
	<-w.release
	return len(p), nil
}

// QueuedBytes is what waits behind the block being written, and Blocked
// the time producers waited for room: a producer that finds room adds
// nothing, one that waits a second for a stalled reader adds a second,
// and two of them add two.
func TestBlockedCountsTheTimeProducersWaitForRoom(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := &stallWriter{release: make(chan struct{})}
		o := framing.NewOutput(w, &framing.OutputOptions{QueueLimit: 16})
		msg := []byte("0123456789") // 11 bytes with its newline

		if err := o.Enqueue(msg); err != nil {
			t.Fatal(err)
		}
		if got := o.QueuedBytes(); got != 11 {
			t.Fatalf("QueuedBytes = %d, want 11", got)
		}
		o.FlushAsync() // a writer takes the block and stalls in Write
		synctest.Wait()
		if got := o.QueuedBytes(); got != 0 {
			t.Fatalf("QueuedBytes while the block is being written = %d, want 0", got)
		}
		if err := o.Enqueue(msg); err != nil { // room: no wait
			t.Fatal(err)
		}
		if o.Blocked() != 0 {
			t.Fatalf("Blocked = %v after an Enqueue that found room", o.Blocked())
		}

		// The queue holds 11 of 16 bytes: the next two producers wait.
		for range 2 {
			go func() { _ = o.Enqueue(msg) }()
		}
		go func() { _ = o.EnqueueContext(context.Background(), msg) }()
		synctest.Wait()
		time.Sleep(time.Second)
		// Waits in progress count: three producers, a second each so far.
		if got := o.Blocked(); got != 3*time.Second {
			t.Fatalf("Blocked while waiting = %v, want 3s", got)
		}
		close(w.release)
		synctest.Wait()
		// Each waited one second: the first until the stalled write ended,
		// the others until a later one did (no time passes after release).
		if got := o.Blocked(); got != 3*time.Second {
			t.Fatalf("Blocked = %v, want 3s (three producers, one second each)", got)
		}
		if err := o.Close(); err != nil {
			t.Fatal(err)
		}
	})
}

// The reader of input waits in WaitRoom while output is full: that is
// backpressure too, and it is counted.
func TestBlockedCountsWaitRoom(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pr, pw := io.Pipe()
		o := framing.NewOutput(pw, &framing.OutputOptions{QueueLimit: 8})
		if err := o.Enqueue([]byte("01234567")); err != nil {
			t.Fatal(err)
		}
		if !o.Full() {
			t.Fatal("queue not full")
		}
		done := make(chan error)
		go func() { done <- o.WaitRoom() }() // writes itself, blocked on the pipe
		synctest.Wait()
		time.Sleep(250 * time.Millisecond)
		go func() { _, _ = io.Copy(io.Discard, pr) }()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if got := o.Blocked(); got != 250*time.Millisecond {
			t.Fatalf("Blocked = %v, want 250ms", got)
		}
		if err := o.Close(); err != nil {
			t.Fatal(err)
		}
		pr.Close()
	})
}
