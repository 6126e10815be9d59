package middleware_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"testing/synctest"

	"go.uber.org/goleak"

	"github.com/agentwire/agentwire/internal/wiretest"
	"github.com/agentwire/agentwire/rpc"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// Every wire test of this package, run again over the message seam
// (rpc.NewMessages, how Streamable HTTP serves a request): the same lines,
// the same answers.
func TestWireTestsOverMessages(t *testing.T) { wiretest.RerunOverMessages(t) }

// logBuf collects what a text handler writes, for tests to read.
type logBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// Lines returns the lines written since the last call.
func (l *logBuf) Lines() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := strings.TrimSuffix(l.b.String(), "\n")
	l.b.Reset()
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

// textLogger logs at level and above as text, without the time (and
// without the attributes named in drop).
func textLogger(level slog.Level, drop ...string) (*slog.Logger, *logBuf) {
	buf := new(logBuf)
	h := slog.NewTextHandler(buf, &slog.HandlerOptions{
		Level: level,
		ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
			if len(groups) == 0 && a.Key == slog.TimeKey {
				return slog.Attr{}
			}
			for _, d := range drop {
				if a.Key == d {
					return slog.Attr{}
				}
			}
			return a
		},
	})
	return slog.New(h), buf
}

// bubble runs f in a synctest bubble with a server connection that serves
// h (built inside the bubble) under opts, driven by raw lines.
func bubble(t *testing.T, h func() rpc.Handler, opts *rpc.Options, f func(w *wiretest.Wire)) {
	t.Helper()
	synctest.Test(t, func(t *testing.T) {
		w := wiretest.Start(t, h(), opts, true)
		defer w.Finish()
		f(w)
	})
}

func mws(m ...rpc.Middleware) *rpc.Options { return &rpc.Options{Middleware: m} }

// waitHandler blocks until its context ends and returns its error.
func waitHandler(ctx context.Context, _ *rpc.Request) (any, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

// errData decodes an error reply's data.
func errData(t *testing.T, line string) map[string]any {
	t.Helper()
	var m struct {
		Error struct {
			Data map[string]any `json:"data"`
		} `json:"error"`
	}
	if err := json.Unmarshal([]byte(line), &m); err != nil {
		t.Fatalf("reply %q: %v", line, err)
	}
	return m.Error.Data
}

func equalLines(t *testing.T, what string, got, want []string) {
	t.Helper()
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("%s:\n got: %s\nwant: %s", what, strings.Join(got, "\n      "), strings.Join(want, "\n      "))
	}
}
