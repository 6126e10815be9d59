// Package wiretest drives a connection with raw wire lines inside a
// testing/synctest bubble. agentwire's protocol tests (rpc, mcp, acp) use it
// to pin behaviour as exact lines in and lines out.
package wiretest

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

// Quiet is a logger that discards everything.
var Quiet = slog.New(slog.DiscardHandler)

// Wire drives a server Conn with raw lines inside a synctest bubble: Send
// writes lines to its input, Settle waits until every goroutine in the bubble
// is blocked (so all processing that can happen has happened), and Take
// returns the lines the server wrote since the last Take.
type Wire struct {
	t    *testing.T
	Conn *rpc.Conn
	In   *io.PipeWriter
	OutR *io.PipeReader
	mu   sync.Mutex
	got  []string
	EOF  chan struct{}
}

// Run starts a server with h (echo's handler when nil) and opts
// (quiet logger added), runs f, then closes input and waits for the
// connection and the collector to finish, so every test ends with no
// goroutine left.
func Run(t *testing.T, h rpc.Handler, opts *rpc.Options, f func(w *Wire)) {
	t.Helper()
	synctest.Test(t, func(t *testing.T) {
		w := Start(t, h, opts, true)
		defer w.Finish()
		f(w)
	})
}

// Start starts a server Conn on in-memory pipes; with collect, a goroutine
// gathers what it writes for Take. Call it inside a synctest bubble.
func Start(t *testing.T, h rpc.Handler, opts *rpc.Options, collect bool) *Wire {
	if h == nil {
		h = echo.Handler()
		opts = echo.Options(opts)
	}
	var o rpc.Options
	if opts != nil {
		o = *opts
	}
	if o.Logger == nil {
		o.Logger = Quiet
	}
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	w := &Wire{t: t, In: inW, OutR: outR, EOF: make(chan struct{})}
	w.Conn = rpc.New(inR, outW, h, &o)
	if collect {
		go w.collect()
	}
	return w
}

// Finish closes input and waits for the connection and the collector.
func (w *Wire) Finish() {
	w.In.Close()
	<-w.Conn.Done()
	<-w.EOF
}

// InBubble runs f in a synctest bubble with a collected wire whose handler
// is built inside the bubble (channels it uses must belong to the bubble).
func InBubble(t *testing.T, h func() rpc.Handler, opts *rpc.Options, f func(w *Wire)) {
	t.Helper()
	synctest.Test(t, func(t *testing.T) {
		w := Start(t, h(), opts, true)
		defer w.Finish()
		f(w)
	})
}

func (w *Wire) collect() {
	defer close(w.EOF)
	br := bufio.NewReaderSize(w.OutR, 1<<20)
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

func (w *Wire) Send(lines ...string) {
	w.t.Helper()
	for _, l := range lines {
		if _, err := io.WriteString(w.In, l+"\n"); err != nil {
			w.t.Fatalf("writing %q: %v", l, err)
		}
	}
}

func (w *Wire) Settle() { synctest.Wait() }

// Sleep lets d of the bubble's fake time pass, then settles.
func (w *Wire) Sleep(d time.Duration) {
	time.Sleep(d)
	synctest.Wait()
}

// Take settles and returns the lines written since the last take.
func (w *Wire) Take() []string {
	w.Settle()
	w.mu.Lock()
	defer w.mu.Unlock()
	got := w.got
	w.got = nil
	return got
}

// Exchange sends lines and returns the replies, sorted, for order-free
// comparison.
func (w *Wire) Exchange(lines ...string) []string {
	w.Send(lines...)
	got := w.Take()
	sort.Strings(got)
	return got
}

// Field extracts a top-level member of a reply line as raw JSON.
func Field(t *testing.T, line, name string) string {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal([]byte(line), &m); err != nil {
		t.Fatalf("reply is not a JSON object: %q: %v", line, err)
	}
	return string(m[name])
}

// ErrCode returns the error code of an error reply, or 0.
func ErrCode(t *testing.T, line string) int64 {
	t.Helper()
	e := Field(t, line, "error")
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
