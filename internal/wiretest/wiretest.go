// Package wiretest drives a connection with raw wire lines inside a
// testing/synctest bubble. agentwire's protocol tests (rpc, mcp, acp) use it
// to pin behaviour as exact lines in and lines out.
package wiretest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"os/exec"
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
	if OverMessages() {
		w.Conn = rpc.NewMessages(&lineMessages{r: inR, br: bufio.NewReader(inR)}, &lineWriter{outW}, h, &o)
	} else {
		w.Conn = rpc.New(inR, outW, h, &o)
	}
	if collect {
		go w.collect()
	}
	return w
}

// EnvTransport names the environment variable that switches Start to the
// message seam: with EnvTransport=messages, every wire test runs its
// connection over rpc.NewMessages (lines are cut into whole messages on the
// way in and joined on the way out), so the same raw lines pin the same
// behaviour on both kinds of transport.
const EnvTransport = "AGENTWIRE_WIRE"

// OverMessages reports whether this test process runs its wires over the
// message seam.
func OverMessages() bool { return os.Getenv(EnvTransport) == "messages" }

// RerunOverMessages runs the calling package's tests again, in a
// subprocess of the test binary, with every wire over the message seam.
// Tests that pin how bytes are written (coalescing, chunking) check
// OverMessages and skip.
func RerunOverMessages(t *testing.T) {
	t.Helper()
	if OverMessages() {
		t.Skip("this process already runs over messages")
	}
	if testing.Short() {
		t.Skip("-short")
	}
	cmd := exec.Command(os.Args[0], "-test.count=1", "-test.timeout=5m")
	cmd.Env = append(os.Environ(), EnvTransport+"=messages")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the wire tests over the message seam failed: %v\n%s", err, out)
	}
}

// lineMessages cuts a byte stream into whole messages, one per line.
type lineMessages struct {
	r  io.Closer
	br *bufio.Reader
}

func (l *lineMessages) ReadMessage() ([]byte, error) {
	for {
		line, err := l.br.ReadBytes('\n')
		line = bytes.TrimSuffix(bytes.TrimSuffix(line, []byte("\n")), []byte("\r"))
		if len(line) > 0 {
			return line, nil
		}
		if err != nil {
			return nil, err
		}
	}
}

func (l *lineMessages) Close() error { return l.r.Close() }

// lineWriter joins whole messages into lines.
type lineWriter struct{ w *io.PipeWriter }

func (l *lineWriter) WriteMessage(m *rpc.Outbound) error {
	_, err := l.w.Write(append(m.AppendTo(make([]byte, 0, m.Len()+1)), '\n'))
	return err
}

func (l *lineWriter) Close() error { return l.w.Close() }

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
