package streamable_test

// Defects found by an attacker on loopback, each pinned by a test named
// after it, over real HTTP against a real listener. Timeouts are small
// option values; the tests wait for the server to act (a close, a
// cancellation), never for time to pass.

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/agentwire/agentwire/internal/wiretest"
	"github.com/agentwire/agentwire/mcp"
	"github.com/agentwire/agentwire/mcp/bridge"
	"github.com/agentwire/agentwire/mcp/internal/mcptest"
	"github.com/agentwire/agentwire/mcp/server"
	"github.com/agentwire/agentwire/mcp/streamable"
	"github.com/agentwire/agentwire/rpc"
)

// serveReal serves h through Serve on a loopback listener; cleanup shuts
// it down and checks that Serve returned ErrServerClosed.
func serveReal(t *testing.T, h *streamable.Handler) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- h.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		h.Shutdown(ctx)
		if err := <-done; !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("Serve returned %v", err)
		}
	})
	return ln.Addr().String()
}

// quietOpts are Options that log nowhere.
func quietOpts(o streamable.Options) *streamable.Options {
	o.Logger = wiretest.Quiet
	if o.Conn == nil {
		o.Conn = &rpc.Options{Logger: wiretest.Quiet}
	}
	return &o
}

// rawRequest writes a modern POST of body to c (header overrides as in
// modernHeaders) and returns the request, for http.ReadResponse.
func rawRequest(t *testing.T, c net.Conn, path, body string, overrides map[string]string) *http.Request {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, "http://localhost"+path, strings.NewReader(body))
	req.Header = modernHeaders(body, overrides)
	if err := req.Write(c); err != nil {
		t.Fatal(err)
	}
	return req
}

// dialAndPost opens a connection to addr, sends one POST of body to /mcp
// and reads the whole answer; the connection stays open for the caller
// (who closes it), with the reader that read the answer.
func dialAndPost(t *testing.T, addr, body string) (net.Conn, *bufio.Reader, *http.Response, error) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, rawRequest(t, c, "/mcp", body, nil))
	if err != nil {
		return c, br, nil, err
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return c, br, resp, nil
}

// closedByServer reports whether the server closes c (EOF) within bound;
// the bound is the failure case, not a wait for a timeout.
func closedByServer(c net.Conn, br *bufio.Reader, bound time.Duration) error {
	c.SetReadDeadline(time.Now().Add(bound))
	_, err := br.ReadByte()
	switch {
	case err == nil:
		return errors.New("the server sent more bytes")
	case errors.Is(err, io.EOF), errors.Is(err, syscall.ECONNRESET):
		return nil
	case errors.Is(err, os.ErrDeadlineExceeded):
		return fmt.Errorf("still open after %v", bound)
	}
	return err
}

func discoverBody(id int) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"server/discover","params":{%s}}`, id, mcptest.Meta)
}

// A. A connection that sends nothing, or nothing more after a response,
// was never closed: only ReadHeaderTimeout was set by the CLI, and no
// IdleTimeout at all, so idle connections piled up until the process ran
// out of descriptors.
func TestRegressionIdleConnectionsAreClosed(t *testing.T) {
	h := streamable.NewHandler(mcptest.NewServer(nil), quietOpts(streamable.Options{IdleTimeout: 200 * time.Millisecond}))
	addr := serveReal(t, h)
	const silent = 40
	conns := make([]net.Conn, 0, silent+1)
	for range silent {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		conns = append(conns, c)
	}
	// One that was served, and now waits.
	kept, kbr, resp, err := dialAndPost(t, addr, discoverBody(1))
	if err != nil {
		t.Fatal(err)
	}
	defer kept.Close()
	if resp.StatusCode != 200 || resp.Close {
		t.Fatalf("served request: %d close=%v", resp.StatusCode, resp.Close)
	}
	for i, c := range conns {
		if err := closedByServer(c, bufio.NewReader(c), 5*time.Second); err != nil {
			t.Fatalf("silent connection %d: %v", i, err)
		}
	}
	if err := closedByServer(kept, kbr, 5*time.Second); err != nil {
		t.Fatalf("idle connection after a response: %v", err)
	}
	if st := h.Stats(); st.IdleClosed != silent+1 || st.Conns != 0 {
		t.Errorf("stats %+v, want IdleClosed %d and no connection open", st, silent+1)
	}
}

// A. A 401 (and a 403, a 413) kept the connection alive: a client without
// the token could hold it open for as long as it liked, and each refused
// connection cost a descriptor. Now they close, and the answer survives
// the close even while the client is still sending a large body.
func TestRegressionUnauthorizedClosesConnection(t *testing.T) {
	h := streamable.NewHandler(mcptest.NewServer(nil), quietOpts(streamable.Options{Token: "s3cret", MaxBodyBytes: 1 << 20}))
	addr := serveReal(t, h)
	big := `{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{` + mcptest.Meta + `,"pad":"` + strings.Repeat("x", 3<<20) + `"}}`
	cases := []struct {
		name    string
		body    string
		headers map[string]string
		status  int
	}{
		{"no token", discoverBody(1), nil, 401},
		{"wrong token", discoverBody(1), map[string]string{"Authorization": "Bearer nope"}, 401},
		{"no token, large body still being sent", big, nil, 401},
		{"foreign origin", discoverBody(1), map[string]string{"Origin": "https://evil.example"}, 403},
		{"body over the cap, being sent", big, map[string]string{"Authorization": "Bearer s3cret"}, 413},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			br := bufio.NewReader(c)
			req, _ := http.NewRequest(http.MethodPost, "http://localhost/mcp", strings.NewReader(tc.body))
			req.Header = modernHeaders(tc.body, tc.headers)
			go req.Write(c) // a large body blocks until the server stops reading
			resp, err := http.ReadResponse(br, req)
			if err != nil {
				t.Fatalf("no answer: %v", err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.status || !resp.Close {
				t.Fatalf("status %d, Connection: close %v; want %d and close", resp.StatusCode, resp.Close, tc.status)
			}
			if err := closedByServer(c, br, 5*time.Second); err != nil {
				t.Errorf("after %d: %v", tc.status, err)
			}
		})
	}
	if st := h.Stats(); st.Unauthorized != 3 || st.Forbidden != 1 || st.TooLarge != 1 {
		t.Errorf("stats %+v", st)
	}
}

// A. There was no cap on connections: a flood exhausted the descriptors
// and legitimate calls timed out. Beyond MaxConns the connection that has
// waited longest without sending anything is closed (once it has had a
// quarter of ReadHeaderTimeout to send), and a legitimate client is
// served throughout.
func TestRegressionConnectionFloodIsCapped(t *testing.T) {
	const limit = 20
	h := streamable.NewHandler(mcptest.NewServer(nil), quietOpts(streamable.Options{MaxConns: limit, ReadHeaderTimeout: 200 * time.Millisecond}))
	addr := serveReal(t, h)
	client := &http.Client{Transport: &http.Transport{}}
	defer client.CloseIdleConnections()
	call := func(id int) {
		t.Helper()
		body := discoverBody(id)
		req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/mcp", strings.NewReader(body))
		req.Header = modernHeaders(body, nil)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("legitimate call %d: %v", id, err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("legitimate call %d: %d", id, resp.StatusCode)
		}
	}
	var flood []net.Conn
	defer func() {
		for _, c := range flood {
			c.Close()
		}
	}()
	for i := range 10 * limit {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		flood = append(flood, c)
		if i%limit == 0 {
			call(i)
		}
	}
	call(-1)
	// All but the newest are closed, never more than the cap open.
	closed := 0
	for _, c := range flood[:len(flood)-limit] {
		if closedByServer(c, bufio.NewReader(c), 5*time.Second) == nil {
			closed++
		}
	}
	st := h.Stats()
	if closed != len(flood)-limit || st.Conns > limit || st.ConnsEvicted == 0 || st.ConnsEvicted+st.IdleClosed < int64(len(flood)-limit) {
		t.Errorf("%d of the %d oldest flood connections closed; stats %+v", closed, len(flood)-limit, st)
	}
}

// A. When every connection is serving a request, a new one is answered
// 503 with Retry-After and closed, rather than accepted beyond the cap.
func TestRegressionConnectionCapRefusesWhenAllBusy(t *testing.T) {
	s := mcptest.NewServer(nil)
	release := make(chan struct{})
	started := make(chan struct{}, 3)
	s.AddTool(mcp.Tool{Name: "block"}, func(ctx context.Context, _ *server.ToolRequest) (*mcp.ToolResult, error) {
		started <- struct{}{}
		select {
		case <-release:
		case <-ctx.Done():
		}
		return mcp.TextResult("released"), nil
	})
	h := streamable.NewHandler(s, quietOpts(streamable.Options{MaxConns: 3, KeepAlive: -1}))
	addr := serveReal(t, h)
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":` + withMeta(`"name":"block"`) + `}`
	var wg sync.WaitGroup
	for range 3 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		req := rawRequest(t, c, "/mcp", body, nil)
		wg.Go(func() {
			if resp, err := http.ReadResponse(bufio.NewReader(c), req); err == nil {
				resp.Body.Close()
			}
		})
		<-started
	}
	c, br, resp, err := dialAndPost(t, addr, discoverBody(9))
	if err != nil {
		t.Fatalf("the fourth connection got no answer: %v", err)
	}
	defer c.Close()
	if resp.StatusCode != 503 || resp.Header.Get("Retry-After") == "" || !resp.Close {
		t.Errorf("over the cap: %d %v", resp.StatusCode, resp.Header)
	}
	if err := closedByServer(c, br, 5*time.Second); err != nil {
		rest, _ := io.ReadAll(br)
		t.Errorf("refused connection: %v: %q", err, rest)
	}
	close(release)
	wg.Wait()
	if st := h.Stats(); st.ConnsRefused != 1 {
		t.Errorf("stats %+v", st)
	}
}

// emfileListener fails every Accept as a process out of descriptors does.
type emfileListener struct {
	mu      sync.Mutex
	accepts int
	closed  chan struct{}
	once    sync.Once
}

func (l *emfileListener) Accept() (net.Conn, error) {
	l.mu.Lock()
	l.accepts++
	l.mu.Unlock()
	select {
	case <-l.closed:
		return nil, net.ErrClosed
	default:
	}
	return nil, &net.OpError{Op: "accept", Net: "tcp", Err: os.NewSyscallError("accept4", syscall.EMFILE)}
}
func (l *emfileListener) Close() error   { l.once.Do(func() { close(l.closed) }); return nil }
func (l *emfileListener) Addr() net.Addr { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)} }

// A. An accept error such as EMFILE must make the server pause (and free
// a descriptor if a connection waits idle), not retry in a spinning loop;
// and Shutdown must not wait out the pause.
func TestRegressionAcceptErrorsBackOff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := streamable.NewHandler(mcptest.NewServer(nil), quietOpts(streamable.Options{}))
		ln := &emfileListener{closed: make(chan struct{})}
		done := make(chan error, 1)
		go func() { done <- h.Serve(ln) }()
		time.Sleep(10 * time.Second) // the bubble's clock: instant
		ln.mu.Lock()
		n := ln.accepts
		ln.mu.Unlock()
		// 5 ms doubling to 1 s: about 16 attempts in 10 s.
		if n < 5 || n > 25 {
			t.Errorf("%d accepts in 10 s of EMFILE", n)
		}
		start := time.Now()
		h.Shutdown(context.Background())
		if err := <-done; !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("Serve: %v", err)
		}
		if d := time.Since(start); d > 100*time.Millisecond {
			t.Errorf("Shutdown waited %v for the back-off", d)
		}
		if st := h.Stats(); st.AcceptErrors != int64(n-1) && st.AcceptErrors != int64(n) {
			t.Errorf("stats %+v after %d accepts", st, n)
		}
	})
}

// B. Each HTTP request ran on its own connection, so the per-connection
// bound on handlers did not apply across requests: any number ran at once.
func TestRegressionInFlightRequestsAreBounded(t *testing.T) {
	s := mcptest.NewServer(nil)
	release := make(chan struct{})
	started := make(chan struct{}, 2)
	s.AddTool(mcp.Tool{Name: "block"}, func(ctx context.Context, _ *server.ToolRequest) (*mcp.ToolResult, error) {
		started <- struct{}{}
		<-release
		return mcp.TextResult("released"), nil
	})
	h := streamable.NewHandler(s, quietOpts(streamable.Options{MaxInFlight: 2, KeepAlive: -1}))
	url := "http://" + serveReal(t, h) + "/mcp"
	post := func(body string) (*http.Response, error) {
		req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
		req.Header = modernHeaders(body, nil)
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		return resp, err
	}
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":` + withMeta(`"name":"block"`) + `}`
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			if resp, err := post(body); err != nil || resp.StatusCode != 200 {
				t.Errorf("admitted call: %v %v", resp, err)
			}
		})
		<-started
	}
	resp, err := post(discoverBody(3))
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 503 || resp.Header.Get("Retry-After") != "1" {
		t.Errorf("third request in flight: %d %v", resp.StatusCode, resp.Header)
	}
	if st := h.Stats(); st.InFlight != 2 || st.Busy != 1 {
		t.Errorf("stats %+v", st)
	}
	close(release)
	wg.Wait()
	if resp, err := post(discoverBody(4)); err != nil || resp.StatusCode != 200 {
		t.Errorf("after the others finished: %v %v", resp, err)
	}
	http.DefaultClient.CloseIdleConnections()
}

// B. Listen streams last: counted among the requests in flight they
// would starve ordinary calls, so they have a bound of their own.
func TestRegressionListenStreamsHaveTheirOwnBound(t *testing.T) {
	h := streamable.NewHandler(mcptest.NewServer(nil), quietOpts(streamable.Options{MaxInFlight: 1, MaxStreams: 2, KeepAlive: -1}))
	url := "http://" + serveReal(t, h) + "/mcp"
	client := &http.Client{Transport: &http.Transport{}}
	defer client.CloseIdleConnections()
	ctx, hangUp := context.WithCancel(t.Context())
	defer hangUp()
	listen := func(id int) (*http.Response, error) {
		body := fmt.Sprintf(`{"jsonrpc":"2.0","id":"L%d","method":"subscriptions/listen","params":%s}`, id, withMeta(`"notifications":{"toolsListChanged":true}`))
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
		req.Header = modernHeaders(body, nil)
		return client.Do(req)
	}
	for i := range 2 {
		resp, err := listen(i)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("stream %d: %v %v", i, resp, err)
		}
		defer resp.Body.Close()
		if line, err := bufio.NewReader(resp.Body).ReadString('\n'); err != nil || !strings.Contains(line, "event") {
			t.Fatalf("stream %d: %q %v", i, line, err)
		}
	}
	resp, err := listen(3)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 503 {
		t.Errorf("a third stream: %d", resp.StatusCode)
	}
	body := discoverBody(4)
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	req.Header = modernHeaders(body, nil)
	resp, err = client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("a call beside two streams (MaxInFlight 1): %d", resp.StatusCode)
	}
	if st := h.Stats(); st.Streams != 2 || st.StreamsRefused != 1 || st.Busy != 0 {
		t.Errorf("stats %+v", st)
	}
}

// B. Nothing bounded the request bytes held across requests: 100
// concurrent 4 MiB calls cost 2.4 GB. Bodies are charged to a server-wide
// budget before they are read (by Content-Length) or as they arrive
// (chunked), and one that does not fit gets 503.
func TestRegressionBufferedBytesAreBounded(t *testing.T) {
	s := mcptest.NewServer(nil)
	release := make(chan struct{})
	started := make(chan struct{}, 4)
	s.AddTool(mcp.Tool{Name: "hold"}, func(ctx context.Context, _ *server.ToolRequest) (*mcp.ToolResult, error) {
		started <- struct{}{}
		<-release
		return mcp.TextResult("held"), nil
	})
	const maxBody, budget = 100 << 10, 256 << 10
	h := streamable.NewHandler(s, quietOpts(streamable.Options{MaxBodyBytes: maxBody, MaxBufferedBytes: budget, KeepAlive: -1}))
	url := "http://" + serveReal(t, h) + "/mcp"
	defer http.DefaultClient.CloseIdleConnections()
	big := func(id int) string {
		return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{%s,"name":"hold","arguments":{"pad":"%s"}}}`,
			id, mcptest.Meta, strings.Repeat("x", 80<<10))
	}
	post := func(body string, chunked bool) (int, error) {
		var r io.Reader = strings.NewReader(body)
		if chunked {
			r = io.MultiReader(r) // no length: sent chunked
		}
		req, _ := http.NewRequest(http.MethodPost, url, r)
		req.Header = modernHeaders(body, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, err
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode, nil
	}
	var wg sync.WaitGroup
	for i := range 3 { // 3 × 80 KiB fit in 256 KiB
		wg.Go(func() {
			if code, err := post(big(i), false); err != nil || code != 200 {
				t.Errorf("admitted call %d: %d %v", i, code, err)
			}
		})
		<-started
	}
	if st := h.Stats(); st.BufferedBytes > budget || st.BufferedBytes < 3*80<<10 {
		t.Errorf("BufferedBytes %d with three 80 KiB bodies held", st.BufferedBytes)
	}
	for _, chunked := range []bool{false, true} {
		if code, err := post(big(9), chunked); err != nil || code != 503 {
			t.Errorf("a fourth body (chunked %v): %d %v, want 503", chunked, code, err)
		}
	}
	if code, err := post(discoverBody(10), false); err != nil || code != 200 {
		t.Errorf("a small request still fits: %d %v", code, err)
	}
	close(release)
	wg.Wait()
	h.Shutdown(t.Context()) // every handler has returned and given back its bytes
	if st := h.Stats(); st.OverBudget != 2 || st.BufferedBytes != 0 || st.InFlight != 0 {
		t.Errorf("stats %+v", st)
	}
}

// B. Concurrent large bodies are each answered or refused with a status,
// never cut off by a reset: a refused body is not read, and closing a
// socket with unread input would send RST, which drops the 503 the client
// has not read yet.
func TestRegressionLargeBodiesRefusedWithStatus(t *testing.T) {
	h := streamable.NewHandler(mcptest.NewServer(nil), quietOpts(streamable.Options{MaxBufferedBytes: 8 << 20}))
	url := "http://" + serveReal(t, h) + "/mcp"
	body := []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{` + mcptest.Meta + `,"name":"echo","arguments":{"text":"` + strings.Repeat("a", 4<<20-400) + `"}}}`)
	hdr := modernHeaders(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{`+mcptest.Meta+`,"name":"echo"}}`, nil)
	client := &http.Client{Transport: &http.Transport{}}
	defer client.CloseIdleConnections()
	var mu sync.Mutex
	codes := map[int]int{}
	var errs []error
	var wg sync.WaitGroup
	for range 24 {
		wg.Go(func() {
			req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
			req.Header = hdr.Clone()
			resp, err := client.Do(req)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
				return
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			codes[resp.StatusCode]++
		})
	}
	wg.Wait()
	if len(errs) > 0 || codes[200] == 0 || codes[200]+codes[503] != 24 {
		t.Errorf("statuses %v, transport errors %v", codes, errs)
	}
}

// A. A client that stops reading its event stream pinned the response
// (and the handler feeding it) forever. Each write must now make progress
// within WriteTimeout; the stalled one fails and the request is cancelled.
func TestRegressionStalledReaderIsCutOff(t *testing.T) {
	s := mcptest.NewServer(nil)
	stopped := make(chan struct{})
	s.AddTool(mcp.Tool{Name: "flood"}, func(ctx context.Context, r *server.ToolRequest) (*mcp.ToolResult, error) {
		defer close(stopped)
		chunk := strings.Repeat("x", 64<<10)
		for i := 1; ; i++ {
			if err := r.Progress(float64(i), 0, chunk); err != nil {
				return nil, err
			}
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
		}
	})
	h := streamable.NewHandler(s, quietOpts(streamable.Options{WriteTimeout: 200 * time.Millisecond, KeepAlive: -1}))
	addr := serveReal(t, h)
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{` + metaWith(`"progressToken":"p"`) + `,"name":"flood"}}`
	rawRequest(t, c, "/mcp", body, nil) // and never read
	select {
	case <-stopped:
	case <-time.After(10 * time.Second):
		t.Fatal("the handler still runs 10 s after its client stopped reading (WriteTimeout 200 ms)")
	}
	// The response was cut off: what the socket buffers held arrives,
	// then the end, without the result.
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	got, err := io.ReadAll(c)
	if err != nil && !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("after %d bytes: %v", len(got), err)
	}
	if bytes.Contains(got, []byte(`"result"`)) {
		t.Errorf("the stalled client got its result")
	}
	if st := h.Stats(); st.WriteTimeouts != 1 || st.InFlight != 0 {
		t.Errorf("stats %+v", st)
	}
}

// A. The write deadline is per write, not per response: a stream that
// lasts longer than WriteTimeout, read slowly but steadily, is served to
// its end.
func TestRegressionSlowReaderIsNotCutOff(t *testing.T) {
	s := mcptest.NewServer(nil)
	// 4 MiB over more than 2 WriteTimeouts; a WriteTimeout long enough that
	// a loaded machine's scheduling is not taken for a stalled reader.
	const events = 64
	s.AddTool(mcp.Tool{Name: "stream"}, func(ctx context.Context, r *server.ToolRequest) (*mcp.ToolResult, error) {
		chunk := strings.Repeat("y", 64<<10)
		tick := time.NewTicker(32 * time.Millisecond)
		defer tick.Stop()
		for i := 1; i <= events; i++ {
			if err := r.Progress(float64(i), events, chunk); err != nil {
				return nil, err
			}
			<-tick.C
		}
		return mcp.TextResult("streamed"), nil
	})
	h := streamable.NewHandler(s, quietOpts(streamable.Options{WriteTimeout: 800 * time.Millisecond, KeepAlive: -1}))
	addr := serveReal(t, h)
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{` + metaWith(`"progressToken":"p"`) + `,"name":"stream"}}`
	req := rawRequest(t, c, "/mcp", body, nil)
	resp, err := http.ReadResponse(bufio.NewReader(c), req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	start := time.Now()
	var got bytes.Buffer
	buf := make([]byte, 64<<10)
	for {
		n, err := resp.Body.Read(buf)
		got.Write(buf[:n])
		if err != nil {
			break
		}
		time.Sleep(2 * time.Millisecond) // a slow reader
	}
	if !strings.Contains(got.String(), `"text":"streamed"`) {
		t.Fatalf("the slow reader was cut off after %d bytes and %v", got.Len(), time.Since(start))
	}
	if st := h.Stats(); st.WriteTimeouts != 0 {
		t.Errorf("stats %+v", st)
	}
}

// C. Legacy requests skipped the Mcp-Method and Mcp-Name checks even when
// the headers were sent and wrong: a gateway routing on them saw one
// method or tool, the handler ran another.
func TestRegressionLegacyHeadersChecked(t *testing.T) {
	s := mcptest.NewServer(nil)
	s.AddTool(mcp.Tool{Name: "deploy", InputSchema: []byte(`{"type":"object","properties":{"region":{"type":"string","x-mcp-header":"Region"}}}`)},
		func(context.Context, *server.ToolRequest) (*mcp.ToolResult, error) { return mcp.TextResult("ok"), nil })
	h := streamable.NewHandler(s, quietOpts(streamable.Options{}))
	url := "http://" + serveReal(t, h) + "/mcp"
	defer http.DefaultClient.CloseIdleConnections()
	call := `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo","arguments":{"text":"old"}}}`
	deploy := `{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"deploy","arguments":{"region":"us"}}}`
	cases := []struct {
		name    string
		body    string
		headers map[string]string
		status  int
	}{
		{"no mirror headers", call, map[string]string{"Mcp-Method": "", "Mcp-Name": ""}, 200},
		{"matching headers", call, nil, 200},
		{"Mcp-Method names another method", call, map[string]string{"Mcp-Method": "tools/list"}, 400},
		{"Mcp-Name names another tool", call, map[string]string{"Mcp-Name": "crash"}, 400},
		{"Mcp-Name in broken base64", call, map[string]string{"Mcp-Name": "=?base64?ZWNobw?="}, 400},
		{"Mcp-Param header absent", deploy, nil, 200},
		{"Mcp-Param header matching", deploy, map[string]string{"Mcp-Param-Region": "us"}, 200},
		{"Mcp-Param header naming another value", deploy, map[string]string{"Mcp-Param-Region": "eu"}, 400},
		{"initialize with a wrong Mcp-Method", `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}`,
			map[string]string{"MCP-Protocol-Version": "", "Mcp-Method": "tools/call"}, 400},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			hdr := modernHeaders(tc.body, tc.headers)
			if _, ok := tc.headers["MCP-Protocol-Version"]; !ok {
				hdr.Set(mcp.HeaderProtocolVersion, "2025-11-25")
			}
			req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(tc.body))
			req.Header = hdr
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tc.status, b)
			}
			if tc.status == 400 {
				if code, _ := errCode(t, string(b)); code != mcp.CodeHeaderMismatch {
					t.Errorf("code %d: %s", code, b)
				}
			}
		})
	}
}

// D. The endpoint answered on every path, so anything mounted beside it,
// or a probe of another path, reached MCP. Only Path is served; the
// bridge too.
func TestRegressionOtherPathsAre404(t *testing.T) {
	child, _, err := mcptest.ConnectTo(t, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	handlers := map[string]*streamable.Handler{
		"server":             streamable.NewHandler(mcptest.NewServer(nil), quietOpts(streamable.Options{})),
		"bridge":             streamable.NewHandler(bridge.New(child), quietOpts(streamable.Options{})),
		"server at /api/mcp": streamable.NewHandler(mcptest.NewServer(nil), quietOpts(streamable.Options{Path: "/api/mcp"})),
	}
	defer http.DefaultClient.CloseIdleConnections()
	for name, h := range handlers {
		t.Run(name, func(t *testing.T) {
			base := "http://" + serveReal(t, h)
			want := "/mcp"
			if strings.Contains(name, "/api") {
				want = "/api/mcp"
			}
			for _, path := range []string{"/", "/other", want + "/", want + "x", "/MCP", want} {
				body := discoverBody(1)
				req, _ := http.NewRequest(http.MethodPost, base+path, strings.NewReader(body))
				req.Header = modernHeaders(body, nil)
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				status := 404
				if path == want {
					status = 200
				}
				if resp.StatusCode != status {
					t.Errorf("%s: %d, want %d", path, resp.StatusCode, status)
				}
			}
			if st := h.Stats(); st.NotFound != 5 {
				t.Errorf("stats %+v", st)
			}
		})
	}
}

// G. Refusals were neither counted nor logged. Each is counted, and
// logged once per burst: the first at once, the rest summed up later.
func TestRegressionRefusalsCountedAndLoggedOncePerBurst(t *testing.T) {
	var buf bytes.Buffer
	var mu sync.Mutex
	logger := slog.New(slog.NewTextHandler(writerFunc(func(p []byte) (int, error) {
		mu.Lock()
		defer mu.Unlock()
		return buf.Write(p)
	}), nil))
	h := streamable.NewHandler(mcptest.NewServer(nil), &streamable.Options{Token: "t", Logger: logger, Conn: &rpc.Options{Logger: wiretest.Quiet}})
	url := "http://" + serveReal(t, h) + "/mcp"
	for i := range 20 {
		body := discoverBody(i)
		req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
		req.Header = modernHeaders(body, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	if st := h.Stats(); st.Unauthorized != 20 {
		t.Errorf("stats %+v", st)
	}
	mu.Lock()
	defer mu.Unlock()
	if n := strings.Count(buf.String(), "(401)"); n != 1 {
		t.Errorf("%d log lines for 20 refusals in a burst: %s", n, buf.String())
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }
