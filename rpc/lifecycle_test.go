package rpc_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"github.com/agentwire/agentwire/internal/wiretest"
	"io"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/agentwire/agentwire/framing"
	"github.com/agentwire/agentwire/jsonrpc"
	"github.com/agentwire/agentwire/rpc"
)

// EOF is a half-close (guarantee C4): every admitted request is answered, and
// the connection ends as soon as the last handler is done.
func TestEOFAnswersEveryAdmittedRequest(t *testing.T) {
	runWire(t, nil, nil, func(w *wire) {
		for i := range 50 {
			w.Send(req(i, "sleep", `{"ms":300}`))
		}
		start := time.Now()
		w.In.Close()
		<-w.Conn.Done()
		if d := time.Since(start); d != 300*time.Millisecond {
			t.Errorf("connection ended %v after EOF, want 300ms", d)
		}
		<-w.EOF
		if got := w.Take(); len(got) != 50 {
			t.Fatalf("got %d replies, want 50", len(got))
		}
		if err := w.Conn.Wait(); err != nil {
			t.Errorf("Wait = %v", err)
		}
	})
}

// The final line may lack its newline.
func TestFinalLineWithoutNewline(t *testing.T) {
	runWire(t, nil, nil, func(w *wire) {
		io.WriteString(w.In, `{"jsonrpc":"2.0","id":1,"method":"echo","params":[1]}`)
		w.In.Close()
		<-w.EOF
		if got := w.Take(); !slices.Equal(got, []string{`{"jsonrpc":"2.0","id":1,"result":[1]}`}) {
			t.Fatalf("got %q", got)
		}
	})
}

// A line over the limit costs one -32600 (id null) and the next line is
// served (guarantee W4).
func TestLineOverLimitThenGoodLine(t *testing.T) {
	runWire(t, nil, &rpc.Options{MaxMessageBytes: 1024}, func(w *wire) {
		long := `{"jsonrpc":"2.0","id":1,"method":"echo","params":["` + strings.Repeat("x", 100_000) + `"]}`
		got := w.Exchange(long, req(2, "echo", `[2]`))
		if len(got) != 2 || errCode(t, got[1]) != jsonrpc.CodeInvalidRequest || field(t, got[1], "id") != "null" ||
			got[0] != `{"jsonrpc":"2.0","id":2,"result":[2]}` {
			t.Fatalf("got %q", got)
		}
	})
}

func waitCtx(release <-chan struct{}) rpc.Methods {
	return rpc.Methods{
		"wait": func(ctx context.Context, _ *rpc.Request) (any, error) {
			<-ctx.Done()
			return nil, context.Cause(ctx)
		},
		"stuck": func(ctx context.Context, _ *rpc.Request) (any, error) {
			<-release // ignores its context
			return "released", nil
		},
	}
}

// After EOF, handlers get EndOfStreamTimeout; then their contexts are
// cancelled with ErrEndOfStream, and their answers are still written.
func TestGraceThenCancellation(t *testing.T) {
	runWire(t, waitCtx(nil), nil, func(w *wire) {
		w.Send(req(1, "wait", ""))
		w.Sleep(time.Millisecond) // past the inline budget: the reader is free to see EOF
		start := time.Now()
		w.In.Close()
		<-w.Conn.Done()
		if d := time.Since(start); d != rpc.DefaultEndOfStreamTimeout {
			t.Errorf("ended %v after EOF, want the 5s grace", d)
		}
		<-w.EOF
		got := w.Take()
		if len(got) != 1 || !strings.Contains(got[0], "input ended") {
			t.Fatalf("got %q", got)
		}
	})
}

// A handler that ignores cancellation cannot hold the connection past
// grace + shutdown (guarantee C4: 10 s by default), and its late answer is never
// written.
func TestShutdownBoundsLinger(t *testing.T) {
	var release chan struct{}
	inBubble(t, func() rpc.Handler { release = make(chan struct{}); return waitCtx(release) }, nil, func(w *wire) {
		w.Send(req(1, "stuck", ""))
		w.Sleep(time.Millisecond)
		start := time.Now()
		w.In.Close()
		<-w.Conn.Done()
		if d := time.Since(start); d != rpc.DefaultEndOfStreamTimeout+rpc.DefaultShutdownTimeout {
			t.Errorf("ended %v after EOF, want 10s", d)
		}
		close(release)
		<-w.EOF
		if got := w.Take(); len(got) != 0 {
			t.Fatalf("a reply was written after shutdown: %q", got)
		}
	})
}

// Configured bounds are used instead of the defaults.
func TestConfiguredShutdownBounds(t *testing.T) {
	var release chan struct{}
	opts := &rpc.Options{EndOfStreamTimeout: time.Second, ShutdownTimeout: 2 * time.Second}
	inBubble(t, func() rpc.Handler { release = make(chan struct{}); return waitCtx(release) }, opts, func(w *wire) {
		w.Send(req(1, "stuck", ""))
		w.Sleep(time.Millisecond)
		start := time.Now()
		w.In.Close()
		<-w.Conn.Done()
		if d := time.Since(start); d != 3*time.Second {
			t.Errorf("ended %v after EOF, want 3s", d)
		}
		close(release)
	})
}

// Close skips the grace (guarantee C6): handler contexts are cancelled at once.
func TestCloseSkipsGrace(t *testing.T) {
	runWire(t, waitCtx(nil), nil, func(w *wire) {
		w.Send(req(1, "wait", ""))
		w.Sleep(time.Millisecond)
		start := time.Now()
		if err := w.Conn.Close(); err != nil {
			t.Errorf("Close = %v", err)
		}
		if d := time.Since(start); d != 0 {
			t.Errorf("Close took %v, want no grace", d)
		}
		got := w.Take()
		if len(got) != 1 || !strings.Contains(got[0], "connection closed") {
			t.Fatalf("the cancelled handler's answer: %q", got)
		}
	})
}

// A reader that stalls during the final drain is cut off after the
// no-progress deadline; the connection still ends within its bound.
func TestStalledReaderClosesOutput(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := startWire(t, nil, nil, false) // nobody reads the output
		w.Send(req(1, "big", `{"bytes":100000}`))
		w.Sleep(time.Millisecond)
		start := time.Now()
		w.In.Close()
		<-w.Conn.Done()
		if wiretest.OverMessages() {
			// A MessageWriter bounds its own writes; one that never
			// returns holds its handler, so the connection ends at
			// grace + shutdown and closes the writer to end the write.
			if d := time.Since(start); d != rpc.DefaultEndOfStreamTimeout+rpc.DefaultShutdownTimeout {
				t.Errorf("over messages: ended %v after EOF, want grace + shutdown (10s)", d)
			}
			if err := w.Conn.Wait(); err == nil {
				t.Error("Wait = nil, want the failed write")
			}
			return
		}
		if d := time.Since(start); d != rpc.DefaultShutdownTimeout {
			t.Errorf("ended %v after EOF, want the 5s no-progress deadline", d)
		}
		if err := w.Conn.Wait(); !errors.Is(err, framing.ErrStalled) {
			t.Errorf("Wait = %v, want ErrStalled", err)
		}
		if _, err := w.OutR.Read(make([]byte, 10)); err == nil {
			t.Error("output is still open")
		}
	})
}

// A slow but live reader is never cut off (guarantee C5): while running there is
// no deadline at all, and while draining each write that makes progress
// resets it, so a reader that takes 4 s per 16 KiB chunk gets all 32 KiB
// even though the drain lasts 8 s (more than the 5 s no-progress bound).
func TestSlowReaderIsNeverCutOff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := startWire(t, nil, nil, false)
		slowRead := func(pause time.Duration) string {
			var sb strings.Builder
			buf := make([]byte, 16<<10)
			for !strings.HasSuffix(sb.String(), "\n") {
				time.Sleep(pause)
				k, err := w.OutR.Read(buf)
				sb.Write(buf[:k])
				if err != nil {
					break
				}
			}
			return sb.String()
		}
		// Running: 20 s between reads is fine.
		w.Send(req(1, "big", `{"bytes":40000}`))
		if got := slowRead(20 * time.Second); !strings.HasSuffix(got, "\"}\n") {
			t.Fatalf("running: slow reader got a cut line of %d bytes", len(got))
		}
		// Draining: 4 s per chunk.
		w.Send(req(2, "big", `{"bytes":32700}`))
		w.Settle()
		w.In.Close()
		got := slowRead(4 * time.Second)
		<-w.Conn.Done()
		if !strings.HasSuffix(got, "\"}\n") {
			t.Fatalf("draining: slow reader got %d bytes, cut", len(got))
		}
		if err := w.Conn.Wait(); err != nil {
			t.Errorf("Wait = %v", err)
		}
	})
}

// failingWriter records writes and fails from the nth on.
type failingWriter struct {
	mu     sync.Mutex
	n      int
	writes []string
	after  int // writes attempted after the failure
	failed bool
}

func (f *failingWriter) Write(p []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.failed {
		f.after++
		return 0, errors.New("broken pipe")
	}
	if len(f.writes) == f.n {
		f.failed = true
		return len(p) / 2, errors.New("broken pipe")
	}
	f.writes = append(f.writes, string(p))
	return len(p), nil
}

// After a failed write nothing else is written (guarantee C5), and a write fault
// ends the connection without grace, with the error from Wait.
func TestNothingWrittenAfterFailedWrite(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		inR, inW := io.Pipe()
		fw := &failingWriter{n: 2}
		c := rpc.New(inR, fw, waitCtx(nil), &rpc.Options{Logger: quiet})
		w := bufio.NewWriter(inW)
		fmt.Fprintln(w, req(1, "nope", ""))
		w.Flush()
		synctest.Wait()
		fmt.Fprintln(w, req(2, "nope", ""))
		w.Flush()
		synctest.Wait()
		go func() { // the connection stops reading once output is gone
			fmt.Fprintln(w, req(3, "nope", ""))
			fmt.Fprintln(w, req(4, "wait", ""))
			fmt.Fprintln(w, req(5, "nope", ""))
			w.Flush()
		}()
		<-c.Done()
		if err := c.Wait(); err == nil || !strings.Contains(err.Error(), "broken pipe") {
			t.Errorf("Wait = %v", err)
		}
		fw.mu.Lock()
		defer fw.mu.Unlock()
		if fw.after != 0 {
			t.Errorf("%d writes after the failed one", fw.after)
		}
		inW.Close()
	})
}

// A read error other than EOF is a transport fault: no grace, and Wait
// reports it.
func TestReadErrorIsAFault(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		inR, inW := io.Pipe()
		outR, outW := io.Pipe()
		go io.Copy(io.Discard, outR)
		c := rpc.New(inR, outW, waitCtx(nil), &rpc.Options{Logger: quiet})
		io.WriteString(inW, req(1, "wait", "")+"\n")
		time.Sleep(time.Millisecond)
		start := time.Now()
		inW.CloseWithError(errors.New("cable cut"))
		<-c.Done()
		if d := time.Since(start); d != 0 {
			t.Errorf("fault shutdown took %v, want no grace", d)
		}
		if err := c.Wait(); err == nil || !strings.Contains(err.Error(), "cable cut") {
			t.Errorf("Wait = %v", err)
		}
	})
}

// Backpressure (guarantees C3, P6): a peer that writes requests and never reads
// gets only a bounded number of them read; once it reads, every reply comes.
func TestPeerThatNeverReadsIsBounded(t *testing.T) {
	for _, line := range []string{req(1, "echo", `["0123456789012345678901234567890123456789"]`), "not json at all"} {
		t.Run(line[:8], func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				w := startWire(t, nil, &rpc.Options{OutputQueueBytes: 4096}, false)
				var accepted atomic.Int64
				const total = 5000
				done := make(chan struct{})
				go func() {
					defer close(done)
					for range total {
						if _, err := io.WriteString(w.In, line+"\n"); err != nil {
							return
						}
						accepted.Add(1)
					}
					w.In.Close()
				}()
				synctest.Wait()
				n := accepted.Load()
				if n >= total || n > 400 {
					t.Fatalf("the server read %d requests without any reply being read", n)
				}
				// Now read: every reply arrives.
				replies := 0
				br := bufio.NewReader(w.OutR)
				for {
					_, err := br.ReadString('\n')
					if err != nil {
						break
					}
					replies++
				}
				<-done
				if replies != total {
					t.Fatalf("got %d replies, want %d", replies, total)
				}
			})
		})
	}
}

// Calls pending when the connection ends fail with ErrConnectionLost.
func TestPendingCallFailsWhenConnectionEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		inR, inW := io.Pipe()
		outR, outW := io.Pipe()
		go io.Copy(io.Discard, outR)
		c := rpc.New(inR, outW, nil, &rpc.Options{Logger: quiet})
		errc := make(chan error)
		go func() {
			_, err := c.Call(context.Background(), "x", nil)
			errc <- err
		}()
		synctest.Wait()
		inW.Close()
		if err := <-errc; !errors.Is(err, rpc.ErrConnectionLost) {
			t.Errorf("Call = %v, want ErrConnectionLost", err)
		}
		<-c.Done()
		if _, err := c.Call(context.Background(), "x", nil); !errors.Is(err, rpc.ErrConnectionLost) {
			t.Errorf("Call after the end = %v", err)
		}
	})
}
