package rpc_test

import (
	"bufio"
	"encoding/json"
	"io"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/agentwire/agentwire/echo"
	"github.com/agentwire/agentwire/rpc"
)

func TestMain(m *testing.M) { leakCheckedMain(m) }

var quiet = slog.New(slog.DiscardHandler)

// wire drives a server Conn with raw lines inside a synctest bubble: send
// writes lines to its input, settle waits until every goroutine in the bubble
// is blocked (so all processing that can happen has happened), and take
// returns the lines the server wrote since the last take.
type wire struct {
	t     *testing.T
	conn  *rpc.Conn
	in    *io.PipeWriter
	outR  *io.PipeReader
	mu    sync.Mutex
	got   []string
	eof   chan struct{}
	pause chan struct{} // when non-nil, the collector stops reading until it is closed
}

// runWire starts a server with h (echo's handler when nil) and opts
// (quiet logger added), runs f, then closes input and waits for the
// connection and the collector to finish, so every test ends with no
// goroutine left.
func runWire(t *testing.T, h rpc.Handler, opts *rpc.Options, f func(w *wire)) {
	t.Helper()
	synctest.Test(t, func(t *testing.T) {
		w := startWire(t, h, opts, true)
		defer w.finish()
		f(w)
	})
}

func startWire(t *testing.T, h rpc.Handler, opts *rpc.Options, collect bool) *wire {
	if h == nil {
		h = echo.Handler()
		opts = echo.Options(opts)
	}
	var o rpc.Options
	if opts != nil {
		o = *opts
	}
	if o.Logger == nil {
		o.Logger = quiet
	}
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	w := &wire{t: t, in: inW, outR: outR, eof: make(chan struct{})}
	w.conn = rpc.New(inR, outW, h, &o)
	if collect {
		go w.collect()
	}
	return w
}

// finish closes input and waits for the connection and the collector.
func (w *wire) finish() {
	w.in.Close()
	<-w.conn.Done()
	<-w.eof
}

// inBubble runs f in a synctest bubble with a collected wire whose handler
// is built inside the bubble (channels it uses must belong to the bubble).
func inBubble(t *testing.T, h func() rpc.Handler, opts *rpc.Options, f func(w *wire)) {
	t.Helper()
	synctest.Test(t, func(t *testing.T) {
		w := startWire(t, h(), opts, true)
		defer w.finish()
		f(w)
	})
}

func (w *wire) collect() {
	defer close(w.eof)
	br := bufio.NewReaderSize(w.outR, 1<<20)
	for {
		line, err := br.ReadString('\n')
		if line != "" {
			if !strings.HasSuffix(line, "\n") {
				w.t.Errorf("output ended in the middle of a line: %.80q", line)
			}
			w.mu.Lock()
			w.got = append(w.got, strings.TrimSuffix(line, "\n"))
			w.mu.Unlock()
		}
		if err != nil {
			return
		}
	}
}

func (w *wire) send(lines ...string) {
	w.t.Helper()
	for _, l := range lines {
		if _, err := io.WriteString(w.in, l+"\n"); err != nil {
			w.t.Fatalf("writing %q: %v", l, err)
		}
	}
}

func (w *wire) settle() { synctest.Wait() }

// sleep lets d of the bubble's fake time pass, then settles.
func (w *wire) sleep(d time.Duration) {
	time.Sleep(d)
	synctest.Wait()
}

// take settles and returns the lines written since the last take.
func (w *wire) take() []string {
	w.settle()
	w.mu.Lock()
	defer w.mu.Unlock()
	got := w.got
	w.got = nil
	return got
}

// exchange sends lines and returns the replies, sorted, for order-free
// comparison.
func (w *wire) exchange(lines ...string) []string {
	w.send(lines...)
	got := w.take()
	sort.Strings(got)
	return got
}

// field extracts a top-level member of a reply line as raw JSON.
func field(t *testing.T, line, name string) string {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal([]byte(line), &m); err != nil {
		t.Fatalf("reply is not a JSON object: %q: %v", line, err)
	}
	return string(m[name])
}

// errCode returns the error code of an error reply, or 0.
func errCode(t *testing.T, line string) int64 {
	t.Helper()
	e := field(t, line, "error")
	if e == "" {
		return 0
	}
	var obj struct {
		Code int64 `json:"code"`
	}
	if err := json.Unmarshal([]byte(e), &obj); err != nil {
		t.Fatalf("bad error object in %q", line)
	}
	return obj.Code
}
