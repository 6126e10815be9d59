// Package mcptest holds the helpers the tests of mcp's packages share:
// a test server with echo, slow and failing tools, in-memory sessions to
// it, Streamable HTTP endpoints, and the subprocess servers of
// internal/testserver. It is for tests only.
package mcptest

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentwire/agentwire/client"
	"github.com/agentwire/agentwire/internal/seedserver"
	"github.com/agentwire/agentwire/internal/testserver"
	"github.com/agentwire/agentwire/internal/wiretest"
	"github.com/agentwire/agentwire/mcp"
	"github.com/agentwire/agentwire/mcp/host"
	"github.com/agentwire/agentwire/mcp/server"
	"github.com/agentwire/agentwire/mcp/streamable"
	"github.com/agentwire/agentwire/process"
	"github.com/agentwire/agentwire/rpc"
	"go.uber.org/goleak"
)

const Meta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"t","version":"1"},"io.modelcontextprotocol/clientCapabilities":{}}`

type EchoIn struct {
	Text string `json:"text"`
}

type SlowIn struct {
	Steps int `json:"steps"`
}

func NewServer(opts *server.Options) *server.Server {
	s := server.New(mcp.Implementation{Name: "test-server", Version: "0.1"}, opts)
	server.AddTool(s, mcp.Tool{Name: "echo", Description: "echoes"}, func(_ context.Context, _ *server.ToolRequest, in EchoIn) (*mcp.ToolResult, error) {
		return mcp.TextResult(in.Text), nil
	})
	server.AddTool(s, mcp.Tool{Name: "slow"}, func(ctx context.Context, r *server.ToolRequest, in SlowIn) (*mcp.ToolResult, error) {
		for i := 1; i <= in.Steps; i++ {
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-time.After(10 * time.Millisecond):
			}
			if err := r.Progress(float64(i), float64(in.Steps), ""); err != nil {
				return nil, err
			}
		}
		return mcp.TextResult("done"), nil
	})
	s.AddTool(mcp.Tool{Name: "fails"}, func(context.Context, *server.ToolRequest) (*mcp.ToolResult, error) {
		return nil, fmt.Errorf("the lookup failed")
	})
	return s
}

func One(t *testing.T, got []string) string {
	t.Helper()
	if len(got) != 1 {
		t.Fatalf("want One line, got %q", got)
	}
	return got[0]
}

// JSONEq compares two JSON texts by value.
func JSONEq(t *testing.T, got, want string) {
	t.Helper()
	var g, w any
	if err := json.Unmarshal([]byte(got), &g); err != nil {
		t.Fatalf("not JSON: %s", got)
	}
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatalf("bad expectation: %s", want)
	}
	gb, _ := json.Marshal(g)
	wb, _ := json.Marshal(w)
	if string(gb) != string(wb) {
		t.Errorf("got  %s\nwant %s", gb, wb)
	}
}

// Recorder wraps a server handler and remembers the methods it Saw.
type Recorder struct {
	mu      sync.Mutex
	methods []string
	next    rpc.Handler
}

func (r *Recorder) Handle(ctx context.Context, req *rpc.Request) (any, error) {
	r.mu.Lock()
	r.methods = append(r.methods, req.Method)
	r.mu.Unlock()
	return r.next.Handle(ctx, req)
}

func (r *Recorder) Saw() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.methods...)
}

// ConnectTo runs a server (built inside the bubble) and connects a client
// to it in memory.
func ConnectTo(t *testing.T, sopts *server.Options, wrap func(*server.Server) rpc.Handler, copts *host.Options) (*host.Session, *Recorder, error) {
	t.Helper()
	s := NewServer(sopts)
	var h rpc.Handler = s.Handler()
	if wrap != nil {
		h = wrap(s)
	}
	rec := &Recorder{next: h}
	c2sR, c2sW := io.Pipe()
	s2cR, s2cW := io.Pipe()
	srv := rpc.New(c2sR, s2cW, rec, s.ConnOptions(&rpc.Options{Logger: wiretest.Quiet}))
	var o host.Options
	if copts != nil {
		o = *copts
	}
	o.Transport = &client.Options{Logger: wiretest.Quiet}
	sess, err := host.NewClient(context.Background(), s2cR, c2sW, &o)
	t.Cleanup(func() {
		if sess != nil {
			sess.Close()
		} else {
			c2sW.Close()
			s2cR.Close()
		}
		srv.Wait()
	})
	return sess, rec, err
}

// ConnectServer connects a client to s in memory.
func ConnectServer(t *testing.T, s *server.Server) (*host.Session, error) {
	return ConnectServerWith(t, s, nil)
}

func ConnectServerWith(t *testing.T, s *server.Server, opts *host.Options) (*host.Session, error) {
	t.Helper()
	var o host.Options
	if opts != nil {
		o = *opts
	}
	o.Transport = &client.Options{Logger: wiretest.Quiet}
	c2sR, c2sW := io.Pipe()
	s2cR, s2cW := io.Pipe()
	srv := rpc.New(c2sR, s2cW, s.Handler(), s.ConnOptions(&rpc.Options{Logger: wiretest.Quiet}))
	sess, err := host.NewClient(context.Background(), s2cR, c2sW, &o)
	t.Cleanup(func() {
		if sess != nil {
			sess.Close()
		}
		srv.Close()
	})
	return sess, err
}

// StartHTTP serves s over a real loopback HTTP server for the test.
func StartHTTP(t *testing.T, s *server.Server, opts *streamable.Options) (string, *streamable.Handler) {
	t.Helper()
	h := streamable.NewHandler(s, opts)
	srv := httptest.NewServer(h)
	t.Cleanup(func() {
		h.Shutdown(context.Background())
		srv.Close()
	})
	return srv.URL + "/mcp", h
}

// CallSlow calls the slow tool with progress and checks that the result
// and every progress step arrived.
func CallSlow(t *testing.T, sess *host.Session, steps int) {
	t.Helper()
	var mu sync.Mutex
	var seen []float64
	res, err := sess.CallTool(t.Context(), "slow", map[string]any{"steps": steps}, host.WithProgress(func(p, _ float64, _ string) {
		mu.Lock()
		seen = append(seen, p)
		mu.Unlock()
	}))
	if err != nil || res.Content[0].Text != "done" {
		t.Fatalf("%+v %v", res, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != steps {
		t.Errorf("progress %v, want %d steps", seen, steps)
	}
}

// WireRecorder keeps the lines a server receives, as they were written.
type WireRecorder struct {
	mu    sync.Mutex
	lines []string
}

func (r *WireRecorder) Received() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.lines)
}

// RecordedSession connects a session to the example server (with the
// conformance fixtures: tools, prompts, resources) of the given era,
// recording every line the session writes to it.
func RecordedSession(t *testing.T, eras mcp.Eras, opts *host.Options) (*host.Session, *WireRecorder) {
	t.Helper()
	return PipeSession(t, seedserver.New(seedserver.Options{Server: server.Options{Eras: eras}, Fixtures: "conformance", OmitCrash: true}), opts)
}

// PipeSession connects a session to s in memory, recording every line the
// session writes.
func PipeSession(t *testing.T, s *server.Server, opts *host.Options) (*host.Session, *WireRecorder) {
	t.Helper()
	rec := &WireRecorder{}
	c2sR, c2sW := io.Pipe()
	s2cR, s2cW := io.Pipe()
	inR, inW := io.Pipe()
	go func() {
		sc := bufio.NewScanner(c2sR)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			rec.mu.Lock()
			rec.lines = append(rec.lines, sc.Text())
			rec.mu.Unlock()
			inW.Write(append(sc.Bytes(), '\n'))
		}
		inW.Close()
	}()
	srv := rpc.New(inR, s2cW, s.Handler(), s.ConnOptions(&rpc.Options{Logger: wiretest.Quiet}))
	var o host.Options
	if opts != nil {
		o = *opts
	}
	o.Transport = &client.Options{Logger: wiretest.Quiet}
	sess, err := host.NewClient(t.Context(), s2cR, c2sW, &o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		sess.Close()
		srv.Wait()
	})
	return sess, rec
}

func ServerCommand(t *testing.T, mode string) process.Command {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return process.Command{Path: exe, Env: testserver.Command(mode)}
}

// ReceivedLines waits until the recording server's stderr holds at least
// n "received" lines (and a moment more), and returns them.
func ReceivedLines(t *testing.T, p *process.Process, n int) []string {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		var lines []string
		for _, l := range strings.Split(p.StderrTail(), "\n") {
			if rest, ok := strings.CutPrefix(l, "received "); ok {
				lines = append(lines, rest)
			}
		}
		if len(lines) >= n || time.Now().After(deadline) {
			return lines
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// NoParamsNull fails the test for every Received line whose params is
// null (or is there but not an object or array).
func NoParamsNull(t *testing.T, lines []string) {
	t.Helper()
	for _, l := range lines {
		var m map[string]json.RawMessage
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Errorf("not a JSON object: %s", l)
			continue
		}
		if p, ok := m["params"]; ok && (len(p) == 0 || (p[0] != '{' && p[0] != '[')) {
			t.Errorf(`the server Received "params": %s: %s`, p, l)
		}
	}
}

// Main runs a test package's tests: as a subprocess server of
// internal/testserver when ServerCommand started it, and otherwise with
// goleak's check that no test left a goroutine behind.
func Main(m *testing.M) {
	testserver.Run()
	goleak.VerifyTestMain(m)
}
