package mcp_test

import (
	"bufio"
	"io"
	"slices"
	"sync"
	"testing"

	"github.com/agentwire/agentwire/client"
	"github.com/agentwire/agentwire/internal/seedserver"
	"github.com/agentwire/agentwire/internal/wiretest"
	"github.com/agentwire/agentwire/mcp"
	"github.com/agentwire/agentwire/rpc"
)

// wireRecorder keeps the lines a server receives, as they were written.
type wireRecorder struct {
	mu    sync.Mutex
	lines []string
}

func (r *wireRecorder) received() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.lines)
}

// recordedSession connects a session to the example server (with the
// conformance fixtures: tools, prompts, resources) of the given era,
// recording every line the session writes to it.
func recordedSession(t *testing.T, eras mcp.Eras, opts *mcp.ClientOptions) (*mcp.Session, *wireRecorder) {
	t.Helper()
	return pipeSession(t, seedserver.New(seedserver.Options{Server: mcp.ServerOptions{Eras: eras}, Fixtures: "conformance", OmitCrash: true}), opts)
}

// pipeSession connects a session to s in memory, recording every line the
// session writes.
func pipeSession(t *testing.T, s *mcp.Server, opts *mcp.ClientOptions) (*mcp.Session, *wireRecorder) {
	t.Helper()
	rec := &wireRecorder{}
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
	var o mcp.ClientOptions
	if opts != nil {
		o = *opts
	}
	o.Transport = &client.Options{Logger: wiretest.Quiet}
	sess, err := mcp.NewClient(t.Context(), s2cR, c2sW, &o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		sess.Close()
		srv.Wait()
	})
	return sess, rec
}
