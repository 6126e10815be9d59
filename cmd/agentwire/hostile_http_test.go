//go:build unix

package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// The hostile-client suite, this file: what an attacker on loopback did
// to `serve mcp --http` and `bridge` (idle connections until the process
// ran out of descriptors, concurrent 4 MiB bodies until it ran out of
// memory, a stream nobody reads, the token in ps, crash for anyone),
// replayed against the real binary.

// httpProc is a running `agentwire ARGS...` that serves HTTP.
type httpProc struct {
	url    string
	cmd    *exec.Cmd
	mu     sync.Mutex
	stderr bytes.Buffer
	lines  chan string // stderr lines, for waitLog
}

func (p *httpProc) Stderr() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stderr.String()
}

// waitLog waits for a stderr line containing want, failing after bound.
func (p *httpProc) waitLog(t *testing.T, want string, bound time.Duration) {
	t.Helper()
	timeout := time.After(bound)
	for {
		select {
		case line, ok := <-p.lines:
			if !ok {
				t.Fatalf("the server exited without logging %q: %s", want, p.Stderr())
			}
			if strings.Contains(line, want) {
				return
			}
		case <-timeout:
			t.Fatalf("no %q logged within %v: %s", want, bound, p.Stderr())
		}
	}
}

// vmHWM is the peak resident memory of the process, from /proc.
func (p *httpProc) vmHWM(t *testing.T) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid))
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmHWM:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10
		}
	}
	t.Skip("no VmHWM in /proc/PID/status")
	return 0
}

// fds is the number of descriptors the process has open (-1 without /proc).
func (p *httpProc) fds() int {
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", p.cmd.Process.Pid))
	if err != nil {
		return -1
	}
	return len(ents)
}

// startHTTPProc runs `agentwire ARGS...` with env added to the
// environment, waits for its endpoint line and stops it (SIGTERM) at
// cleanup.
func startHTTPProc(t *testing.T, env []string, args ...string) *httpProc {
	t.Helper()
	p := &httpProc{cmd: exec.Command(binary, args...), lines: make(chan string, 1024)}
	p.cmd.Env = append(os.Environ(), env...)
	stderr, _ := p.cmd.StderrPipe()
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(stderr)
	line, err := br.ReadString('\n')
	m := endpoint.FindStringSubmatch(line)
	if err != nil || m == nil {
		p.cmd.Process.Kill()
		p.cmd.Wait()
		t.Fatalf("no endpoint line: %q %v", line, err)
	}
	p.url = m[1]
	copied := make(chan struct{})
	go func() {
		defer close(copied)
		defer close(p.lines)
		for {
			line, err := br.ReadString('\n')
			p.mu.Lock()
			p.stderr.WriteString(line)
			p.mu.Unlock()
			select {
			case p.lines <- line:
			default: // nobody waits for it
			}
			if err != nil {
				return
			}
		}
	}()
	t.Cleanup(func() {
		p.cmd.Process.Signal(syscall.SIGTERM)
		p.cmd.Wait()
		<-copied
		if s := p.Stderr(); strings.Contains(s, "too many open files") {
			t.Errorf("the server ran out of descriptors: %s", s)
		}
	})
	return p
}

// mcpPost is one modern POST: tools/call of echo when text is not empty,
// server/discover otherwise.
func mcpPost(ctx context.Context, client *http.Client, url, token, text string) (int, []byte, error) {
	body := `{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{` + hostileMeta + `}}`
	method := "server/discover"
	if text != "" {
		body = `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{` + hostileMeta + `,"name":"echo","arguments":{"text":"` + text + `"}}}`
		method = "tools/call"
	}
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", method)
	if text != "" {
		req.Header.Set("Mcp-Name", "echo")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

func tokenFile(t *testing.T, content string) string {
	t.Helper()
	f := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(f, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return f
}

// hostPort is the host:port of an endpoint URL.
func hostPort(url string) string {
	return strings.TrimSuffix(strings.TrimPrefix(url, "http://"), "/mcp")
}

// fdBudget is how many connections this test process can open.
func fdBudget() int {
	var r syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &r) != nil {
		return 1000
	}
	return int(min(r.Cur, 1<<20)) - 200
}

// A: 5,000 connections without a token, most sending nothing and some a
// request without the token, are all closed by the server within its idle
// timeout (or at once: a 401 closes its connection, and a connection over
// the cap makes room by closing the oldest that waits); a client with the
// token, connected before the flood, is served throughout; the server
// never holds more descriptors than its cap allows.
//
// The client connects first because a connection that has sent nothing
// is indistinguishable from the flood's: one opened during the flood has
// its first 250 ms to send its request, and a test process starved by
// 5,000 goroutines on two cores may take longer than that (the flake this
// pins: the client's first connection was closed to make room, 272 ms in).
func TestHostileIdleConnectionsAreClosed(t *testing.T) {
	n := min(5000, fdBudget())
	if n < 500 {
		t.Skipf("only %d descriptors", n)
	}
	const idle = time.Second
	p := startHTTPProc(t, nil, "serve", "mcp", "--http", "127.0.0.1:0", "--token-file", tokenFile(t, "s3cret\n"),
		"--idle-timeout", idle.String())
	addr := hostPort(p.url)

	// The legitimate client, throughout.
	stop := make(chan struct{})
	var served, failed atomic.Int64
	var firstErr atomic.Value
	var legit sync.WaitGroup
	// A well-behaved client keeps its connections idle for less than the
	// server does, so it never reuses one the server is closing at that
	// moment (a POST on such a connection is not retried).
	client := &http.Client{Transport: &http.Transport{IdleConnTimeout: idle / 2}, Timeout: 5 * time.Second}
	if code, b, err := mcpPost(context.Background(), client, p.url, "s3cret", "legit"); err != nil || code != 200 {
		t.Fatalf("the client's first call: %d %v %.200s", code, err, b)
	}
	legit.Go(func() {
		defer client.CloseIdleConnections()
		last := time.Now()
		for {
			select {
			case <-stop:
				return
			default:
			}
			code, b, err := mcpPost(context.Background(), client, p.url, "s3cret", "legit")
			if err != nil || code != 200 || !bytes.Contains(b, []byte(`"text":"legit"`)) {
				failed.Add(1)
				firstErr.CompareAndSwap(nil, fmt.Sprintf("%d %v %.200s (%v after the previous call)", code, err, b, time.Since(last)))
			} else {
				served.Add(1)
			}
			last = time.Now()
		}
	})
	// The descriptors the server holds, sampled.
	var maxFDs atomic.Int64
	legit.Go(func() {
		for {
			if n := int64(p.fds()); n > maxFDs.Load() {
				maxFDs.Store(n)
			}
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	})

	start := time.Now()
	type result struct {
		err     error
		elapsed time.Duration
	}
	results := make(chan result, n)
	var flood sync.WaitGroup
	for i := range n {
		flood.Go(func() {
			c, err := net.DialTimeout("tcp", addr, 5*time.Second)
			if err != nil {
				results <- result{err: fmt.Errorf("dial: %w", err)}
				return
			}
			defer c.Close()
			dialed := time.Now()
			br := bufio.NewReader(c)
			if i%5 == 0 { // a request without the token: 401, then the close
				fmt.Fprintf(c, "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}")
				c.SetReadDeadline(time.Now().Add(5 * time.Second))
				resp, err := http.ReadResponse(br, nil)
				if err == nil {
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode != 401 && resp.StatusCode != 503 {
						err = fmt.Errorf("status %d", resp.StatusCode)
					}
				} else if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET) {
					err = nil // evicted before it was read: closed all the same
				}
				if err != nil {
					results <- result{err: fmt.Errorf("tokenless request: %w", err)}
					return
				}
			}
			c.SetReadDeadline(dialed.Add(idle + 4*time.Second))
			_, err = br.ReadByte()
			if err == nil {
				err = errors.New("the server sent bytes")
			} else if errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET) {
				err = nil
			}
			results <- result{err: err, elapsed: time.Since(dialed)}
		})
	}
	flood.Wait()
	close(results)
	var worst time.Duration
	bad := 0
	for r := range results {
		if r.err != nil {
			if bad == 0 {
				t.Errorf("a connection: %v", r.err)
			}
			bad++
		}
		worst = max(worst, r.elapsed)
	}
	close(stop)
	legit.Wait()
	t.Logf("%d connections closed within %v (the slowest after %v); %d legitimate calls served; at most %d descriptors in the server",
		n-bad, time.Since(start), worst, served.Load(), maxFDs.Load())
	if bad > 0 {
		t.Errorf("%d of %d connections were not closed within the idle timeout", bad, n)
	}
	if failed.Load() > 0 || served.Load() == 0 {
		t.Errorf("the client with the token: %d served, %d failed (first: %v); server log: %s", served.Load(), failed.Load(), firstErr.Load(), p.Stderr())
	}
	if m := maxFDs.Load(); m > 1024+64+64 {
		t.Errorf("the server held %d descriptors (cap 1024)", m)
	}
}

// A: a flood of connections beyond --max-conns while every admitted one
// is serving a request: each new one is answered 503 with Retry-After and
// closed, or closed, at once; none is left hanging and the server's
// descriptors stay bounded; once the busy ones end, calls are served.
func TestHostileConnectionFloodBeyondCap(t *testing.T) {
	const limit = 50
	flood := min(2000, fdBudget()-limit)
	p := startHTTPProc(t, nil, "serve", "mcp", "--http", "127.0.0.1:0", "--max-conns", strconv.Itoa(limit))
	addr := hostPort(p.url)
	busy := make([]net.Conn, 0, limit)
	defer func() {
		for _, c := range busy {
			c.Close()
		}
	}()
	// Each busy connection serves a long call that streams progress: its
	// response headers come with the first event, so once all have them,
	// every connection is serving a request.
	meta := strings.TrimSuffix(hostileMeta, "}") + `,"progressToken":"p"}`
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{` + meta + `,"name":"slow_report","arguments":{"steps":600,"delay_ms":100}}}`
	for range limit {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		busy = append(busy, c)
		fmt.Fprintf(c, "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\n"+
			"MCP-Protocol-Version: 2026-07-28\r\nMcp-Method: tools/call\r\nMcp-Name: slow_report\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	}
	for i, c := range busy {
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("busy connection %d: %v %v", i, resp, err)
		}
	}
	start := time.Now()
	var refused, closed, hung atomic.Int64
	var maxFDs atomic.Int64
	var wg sync.WaitGroup
	sem := make(chan struct{}, 256)
	for range flood {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			c, err := net.DialTimeout("tcp", addr, 5*time.Second)
			if err != nil {
				hung.Add(1)
				return
			}
			defer c.Close()
			c.SetDeadline(time.Now().Add(5 * time.Second))
			fmt.Fprintf(c, "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}")
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			switch {
			case err == nil && resp.StatusCode == 503 && resp.Header.Get("Retry-After") != "":
				refused.Add(1)
			case err != nil && !errors.Is(err, os.ErrDeadlineExceeded):
				closed.Add(1)
			default:
				hung.Add(1)
			}
			if n := int64(p.fds()); n > maxFDs.Load() {
				maxFDs.Store(n)
			}
		})
	}
	wg.Wait()
	t.Logf("%d connections beyond the cap: %d answered 503, %d closed, %d hung, in %v; at most %d descriptors in the server",
		flood, refused.Load(), closed.Load(), hung.Load(), time.Since(start), maxFDs.Load())
	if hung.Load() > 0 || refused.Load() == 0 {
		t.Errorf("%d connections hung, %d refused with 503", hung.Load(), refused.Load())
	}
	if m := maxFDs.Load(); m > limit+64+64 {
		t.Errorf("the server held %d descriptors (cap %d)", m, limit)
	}
	for _, c := range busy {
		c.Close() // the busy calls are cancelled
	}
	busy = nil
	var err error
	for range 100 {
		var code int
		if code, _, err = mcpPost(context.Background(), http.DefaultClient, p.url, "", "after"); err == nil && code == 200 {
			break
		}
		err = fmt.Errorf("status %d, %v", code, err)
		time.Sleep(20 * time.Millisecond) // the cancelled calls are winding down
	}
	if err != nil {
		t.Errorf("after the flood: %v", err)
	}
	http.DefaultClient.CloseIdleConnections()
}

// B: 200 concurrent 4 MiB tools/call requests (echo; then the same with a
// text of "<", which the answer encodes six times larger) are each
// answered or refused with a status, never reset, and keep the server
// under 512 MiB of peak resident memory.
func TestHostileLargeBodiesStayUnderMemoryBound(t *testing.T) {
	p := startHTTPProc(t, nil, "serve", "mcp", "--http", "127.0.0.1:0")
	before := p.vmHWM(t)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 200}, Timeout: 60 * time.Second}
	defer client.CloseIdleConnections()
	for _, ch := range []string{"a", "<"} {
		text := strings.Repeat(ch, 4<<20-400)
		body := []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{` + hostileMeta + `,"name":"echo","arguments":{"text":"` + text + `"}}}`)
		var mu sync.Mutex
		codes := map[int]int{}
		var errs []string
		var wg sync.WaitGroup
		start := time.Now()
		for range 200 {
			wg.Go(func() {
				req, _ := http.NewRequest(http.MethodPost, p.url, bytes.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Accept", "application/json, text/event-stream")
				req.Header.Set("MCP-Protocol-Version", "2026-07-28")
				req.Header.Set("Mcp-Method", "tools/call")
				req.Header.Set("Mcp-Name", "echo")
				resp, err := client.Do(req)
				var n int64
				if err == nil {
					n, err = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err != nil:
					errs = append(errs, err.Error())
				case resp.StatusCode == 200 && n < int64(len(text)):
					errs = append(errs, fmt.Sprintf("200 with %d bytes", n))
				default:
					codes[resp.StatusCode]++
				}
			})
		}
		wg.Wait()
		hwm := p.vmHWM(t)
		t.Logf("text of %q: statuses %v in %v; peak RSS %d MiB (%d MiB at start)", ch, codes, time.Since(start), hwm>>20, before>>20)
		if len(errs) > 0 {
			t.Errorf("text of %q: %d requests got no status: %v", ch, len(errs), errs[0])
		}
		if codes[200] == 0 || codes[200]+codes[503] != 200-len(errs) {
			t.Errorf("text of %q: statuses %v", ch, codes)
		}
		if hwm > 512<<20 {
			t.Errorf("text of %q: peak RSS %d MiB, over 512 MiB", ch, hwm>>20)
		}
	}
	if !strings.Contains(p.Stderr(), "MaxBufferedBytes") {
		t.Errorf("the refusals were not logged: %s", p.Stderr())
	}
}

// A: a client that asks for an event stream and never reads it is cut off
// once a write has made no progress for --write-timeout, and what it held
// is given back.
func TestHostileStalledSSEReaderIsCutOff(t *testing.T) {
	p := startHTTPProc(t, nil, "serve", "mcp", "--http", "127.0.0.1:0", "--write-timeout", "300ms")
	c, err := net.Dial("tcp", hostPort(p.url))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// 4 MiB of "<" is a 24 MiB answer: more than any socket buffers.
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{` + hostileMeta + `,"name":"echo","arguments":{"text":"` + strings.Repeat("<", 4<<20-400) + `"}}}`
	fmt.Fprintf(c, "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nAccept: text/event-stream\r\n"+
		"MCP-Protocol-Version: 2026-07-28\r\nMcp-Method: tools/call\r\nMcp-Name: echo\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	p.waitLog(t, "response cut off", 20*time.Second)
	// What the socket buffers held arrives, then the end: no result.
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	got, err := io.ReadAll(c)
	if err != nil && !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("after %d bytes: %v", len(got), err)
	}
	if !bytes.Contains(got, []byte("text/event-stream")) || len(got) >= 6*(4<<20-400) || bytes.HasSuffix(got, []byte("}\n\n")) {
		t.Errorf("the stalled client got %d bytes, ending %q", len(got), got[max(0, len(got)-20):])
	}
	// What it held (the answer is charged to the request budget while it
	// is written) is given back: others are served.
	if code, b, err := mcpPost(context.Background(), http.DefaultClient, p.url, "", "after"); err != nil || code != 200 {
		t.Errorf("another client: %d %v %.200s", code, err, b)
	}
	http.DefaultClient.CloseIdleConnections()
}

// E: the token comes from --token-file or $AGENTWIRE_TOKEN, not only the
// command line every local user can read; an empty token from any source
// is refused, never a server without authentication. (And the limit
// flags are usage errors without --http, or when negative.)
func TestHostileTokenSources(t *testing.T) {
	refused := []struct {
		name string
		env  []string
		args []string
	}{
		{"--token \"\"", nil, []string{"serve", "mcp", "--http", "0", "--token", ""}},
		{"empty token file", nil, []string{"serve", "mcp", "--http", "0", "--token-file", tokenFile(t, "")}},
		{"token file with only a newline", nil, []string{"serve", "mcp", "--http", "0", "--token-file", tokenFile(t, "\n")}},
		{"missing token file", nil, []string{"serve", "mcp", "--http", "0", "--token-file", filepath.Join(t.TempDir(), "none")}},
		{"token with a space", nil, []string{"serve", "mcp", "--http", "0", "--token-file", tokenFile(t, "a b\n")}},
		{"--token and --token-file", nil, []string{"serve", "mcp", "--http", "0", "--token", "x", "--token-file", tokenFile(t, "y")}},
		{"empty $AGENTWIRE_TOKEN", []string{"AGENTWIRE_TOKEN="}, []string{"serve", "mcp", "--http", "0"}},
		{"--token-file without --http", nil, []string{"serve", "mcp", "--token-file", tokenFile(t, "y")}},
		{"--idle-timeout without --http", nil, []string{"serve", "mcp", "--idle-timeout", "1s"}},
		{"a negative --max-conns", nil, []string{"serve", "mcp", "--http", "0", "--max-conns", "-1"}},
		{"bridge --token \"\"", nil, []string{"bridge", "--http", "0", "--token", "", "--", binary, "serve", "mcp"}},
		{"bridge, empty $AGENTWIRE_TOKEN", []string{"AGENTWIRE_TOKEN="}, []string{"bridge", "--http", "0", "--", binary, "serve", "mcp"}},
	}
	for _, tc := range refused {
		cmd := exec.Command(binary, tc.args...)
		cmd.Env = append(os.Environ(), tc.env...)
		out, err := cmd.CombinedOutput()
		if err == nil || cmd.ProcessState.ExitCode() != 2 {
			t.Errorf("%s: %v %s", tc.name, err, out)
		}
	}
	served := []struct {
		name  string
		env   []string
		args  []string
		token string
	}{
		{"--token-file", nil, []string{"serve", "mcp", "--http", "127.0.0.1:0", "--token-file", tokenFile(t, "from-a-file\n")}, "from-a-file"},
		{"$AGENTWIRE_TOKEN", []string{"AGENTWIRE_TOKEN=from-the-env"}, []string{"serve", "mcp", "--http", "127.0.0.1:0"}, "from-the-env"},
		{"--token-file beats $AGENTWIRE_TOKEN", []string{"AGENTWIRE_TOKEN=from-the-env"}, []string{"serve", "mcp", "--http", "127.0.0.1:0", "--token-file", tokenFile(t, "from-a-file")}, "from-a-file"},
		{"bridge --token-file", nil, []string{"bridge", "--http", "127.0.0.1:0", "--token-file", tokenFile(t, "bridged\r\n"), "--", binary, "serve", "mcp"}, "bridged"},
	}
	for _, tc := range served {
		t.Run(tc.name, func(t *testing.T) {
			p := startHTTPProc(t, tc.env, tc.args...)
			if code, _, err := mcpPost(context.Background(), http.DefaultClient, p.url, "", ""); err != nil || code != 401 {
				t.Errorf("without the token: %d %v", code, err)
			}
			if code, _, err := mcpPost(context.Background(), http.DefaultClient, p.url, "wrong", ""); err != nil || code != 401 {
				t.Errorf("with another token: %d %v", code, err)
			}
			if code, b, err := mcpPost(context.Background(), http.DefaultClient, p.url, tc.token, "hi"); err != nil || code != 200 {
				t.Errorf("with the token: %d %v %s", code, err, b)
			}
			if cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", p.cmd.Process.Pid)); err == nil && bytes.Contains(cmdline, []byte(tc.token)) {
				t.Errorf("the token is on the command line: %q", cmdline)
			}
			http.DefaultClient.CloseIdleConnections()
		})
	}
}

// D: only /mcp is served, by serve mcp and by the bridge; every other
// path gets 404.
func TestHostileOtherPathsAre404(t *testing.T) {
	for _, args := range [][]string{
		{"serve", "mcp", "--http", "127.0.0.1:0"},
		{"bridge", "--http", "127.0.0.1:0", "--", binary, "serve", "mcp"},
	} {
		p := startHTTPProc(t, nil, args...)
		base := strings.TrimSuffix(p.url, "/mcp")
		for _, path := range []string{"/", "/admin", "/mcp/", "/mcp/../mcpx", "/.well-known/oauth-protected-resource", "/mcp"} {
			code, _, err := mcpPost(context.Background(), http.DefaultClient, base+path, "", "")
			want := 404
			if path == "/mcp" {
				want = 200
			}
			if err != nil || code != want {
				t.Errorf("%s %s: %d %v, want %d", args[0], path, code, err, want)
			}
		}
		http.DefaultClient.CloseIdleConnections()
	}
}

// F: over HTTP, any client could call crash and end the server. It is
// offered only with --demo-tools.
func TestHostileCrashNotOfferedOverHTTP(t *testing.T) {
	p := startHTTPProc(t, nil, "serve", "mcp", "--http", "127.0.0.1:0")
	out, err := exec.Command(binary, "call", "--url", p.url).CombinedOutput()
	if err != nil || !strings.Contains(string(out), `"name":"echo"`) || strings.Contains(string(out), `"name":"crash"`) {
		t.Errorf("tools/list over HTTP: %v %s", err, out)
	}
	exec.Command(binary, "call", "--url", p.url, "--tool", "crash").Run()
	if code, _, err := mcpPost(context.Background(), http.DefaultClient, p.url, "", "still here"); err != nil || code != 200 {
		t.Errorf("after calling crash: %d %v", code, err)
	}
	http.DefaultClient.CloseIdleConnections()

	demo := startHTTPProc(t, nil, "serve", "mcp", "--http", "127.0.0.1:0", "--demo-tools")
	out, err = exec.Command(binary, "call", "--url", demo.url).CombinedOutput()
	if err != nil || !strings.Contains(string(out), `"name":"crash"`) {
		t.Errorf("tools/list with --demo-tools: %v %s", err, out)
	}
	exec.Command(binary, "call", "--url", demo.url, "--tool", "crash").Run()
	demo.cmd.Wait()
	if code := demo.cmd.ProcessState.ExitCode(); code != 3 {
		t.Errorf("crash with --demo-tools: exit %d", code)
	}
	cmd := exec.Command(binary, "serve", "mcp", "--demo-tools")
	if out, err := cmd.CombinedOutput(); err == nil || cmd.ProcessState.ExitCode() != 2 {
		t.Errorf("--demo-tools without --http: %v %s", err, out)
	}
}
