package gopeers_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// TestMain checks that no test leaves a goroutine behind: every server,
// client, pipe and task started here is ended by the test that started it.
// It also gives the tests that build the agentwire command a place to
// put it.
func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "gopeers-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	buildDir = dir
	goleak.VerifyTestMain(m, goleak.Cleanup(func(int) { os.RemoveAll(dir) }))
}

// buildDir holds the commands the tests build.
var buildDir string

// quiet is the logger of the servers under test: a panicking fixture is
// expected, and its stack is not news.
var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// discardLog is quiet for mcp-go's *log.Logger options.
var discardLog = log.New(io.Discard, "", 0)

// transcript records what crossed the wire, in order, so that a failing
// test shows the exact messages (and -v shows them for every test).
type transcript struct {
	mu      sync.Mutex
	lines   []string
	pending map[string]*bytes.Buffer
}

func (tr *transcript) add(dir string, b []byte) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	if tr.pending == nil {
		tr.pending = map[string]*bytes.Buffer{}
	}
	buf := tr.pending[dir]
	if buf == nil {
		buf = &bytes.Buffer{}
		tr.pending[dir] = buf
	}
	buf.Write(b)
	for {
		line, err := buf.ReadBytes('\n')
		if err != nil {
			// Not a whole line yet: keep it for the next write.
			rest := append([]byte(nil), line...)
			buf.Reset()
			buf.Write(rest)
			return
		}
		if s := strings.TrimSpace(string(line)); s != "" {
			tr.lines = append(tr.lines, dir+" "+s)
		}
	}
}

// addMessage records one whole message (an HTTP body).
func (tr *transcript) addMessage(dir string, b []byte) {
	s := strings.TrimSpace(string(b))
	if s == "" {
		return
	}
	tr.mu.Lock()
	tr.lines = append(tr.lines, dir+" "+s)
	tr.mu.Unlock()
}

// find returns the recorded lines that contain every one of parts.
func (tr *transcript) find(parts ...string) []string {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	var out []string
next:
	for _, l := range tr.lines {
		for _, p := range parts {
			if !strings.Contains(l, p) {
				continue next
			}
		}
		out = append(out, l)
	}
	return out
}

func (tr *transcript) String() string {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return strings.Join(tr.lines, "\n")
}

// logOnFailure shows the transcript when the test fails (or under -v).
func (tr *transcript) logOnFailure(t *testing.T) {
	t.Cleanup(func() {
		if t.Failed() || testing.Verbose() {
			t.Logf("wire transcript:\n%s", tr)
		}
	})
}

// tapWriter records what is written through it.
type tapWriter struct {
	w   io.Writer
	dir string
	tr  *transcript
}

func (w tapWriter) Write(b []byte) (int, error) {
	w.tr.add(w.dir, b)
	return w.w.Write(b)
}

// tapWriteCloser is a tapWriter that closes what it writes to.
type tapWriteCloser struct {
	tapWriter
	c io.Closer
}

func (w tapWriteCloser) Close() error { return w.c.Close() }

// tapHandler records the bodies of the requests an HTTP handler serves and
// of its responses (a JSON body, or an event stream's data lines), and
// the status of a response that is not a success.
func tapHandler(h http.Handler, tr *transcript) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body != nil && r.Method == http.MethodPost {
			body, _ := io.ReadAll(r.Body)
			r.Body.Close()
			tr.addMessage("->", body)
			r.Body = io.NopCloser(bytes.NewReader(body))
		} else {
			tr.addMessage("->", []byte(r.Method+" "+r.URL.Path))
		}
		tw := &tapResponse{ResponseWriter: w, tr: tr}
		h.ServeHTTP(tw, r)
		if !tw.sse {
			tr.addMessage("<-", tw.buf.Bytes()) // a JSON body, whole
		}
	})
}

type tapResponse struct {
	http.ResponseWriter
	tr  *transcript
	sse bool
	buf bytes.Buffer
}

func (w *tapResponse) WriteHeader(code int) {
	w.sse = strings.HasPrefix(w.Header().Get("Content-Type"), "text/event-stream")
	if code >= 300 {
		w.tr.addMessage("<-", []byte(fmt.Sprintf("HTTP %d", code)))
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *tapResponse) Write(b []byte) (int, error) {
	if w.sse || strings.HasPrefix(w.Header().Get("Content-Type"), "text/event-stream") {
		w.sse = true
		w.buf.Write(b)
		for {
			line, err := w.buf.ReadBytes('\n')
			if err != nil {
				rest := append([]byte(nil), line...)
				w.buf.Reset()
				w.buf.Write(rest)
				break
			}
			if data, ok := strings.CutPrefix(strings.TrimSpace(string(line)), "data:"); ok {
				w.tr.addMessage("<-", []byte(data))
			}
		}
	} else {
		w.buf.Write(b)
	}
	return w.ResponseWriter.Write(b)
}

func (w *tapResponse) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (w *tapResponse) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// rawError is a JSON-RPC error as it came off the wire.
type rawError struct {
	Code    int64           `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

func (e *rawError) Error() string { return fmt.Sprintf("jsonrpc error %d: %s", e.Code, e.Message) }

// eventually polls cond until it holds or the deadline passes.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not so after 10s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// testCtx is a context bounded well inside the test's own deadline.
func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// rawIDs numbers raw requests apart from the clients' own ids.
var rawIDs atomic.Int64

func rawID() string { return fmt.Sprintf("raw-%d", rawIDs.Add(1)) }

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
