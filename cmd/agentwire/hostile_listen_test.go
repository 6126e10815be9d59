package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// The hostile-client suite: what an attacker on the same machine tried
// against agentwire, replayed against the real binary. This file: listen
// streams that used to wedge a connection for good.

const hostileMeta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"hostile","version":"1"},"io.modelcontextprotocol/clientCapabilities":{}}`

// lineConn is one newline-delimited connection to a server under attack.
type lineConn struct {
	t  *testing.T
	w  io.Writer
	rd *bufio.Reader
}

func (c *lineConn) send(lines ...string) {
	c.t.Helper()
	var b strings.Builder
	for _, l := range lines {
		b.WriteString(l)
		b.WriteByte('\n')
	}
	if _, err := io.WriteString(c.w, b.String()); err != nil {
		c.t.Fatalf("writing: %v", err)
	}
}

// readUntil reads lines until one contains want, failing after limit.
func (c *lineConn) readUntil(want string, limit time.Duration) []string {
	c.t.Helper()
	type res struct {
		lines []string
		err   error
	}
	done := make(chan res, 1)
	go func() {
		var got []string
		for {
			line, err := c.rd.ReadString('\n')
			if err != nil {
				done <- res{got, err}
				return
			}
			got = append(got, line)
			if strings.Contains(line, want) {
				done <- res{got, nil}
				return
			}
		}
	}()
	select {
	case r := <-done:
		if r.err != nil {
			c.t.Fatalf("reading until %q: %v after %d lines", want, r.err, len(r.lines))
		}
		return r.lines
	case <-time.After(limit):
		c.t.Fatalf("no line with %q within %v", want, limit)
		return nil
	}
}

// listenExhaustion opens 300 listen streams on one connection (more than
// the 256 handler slots and the 256 streams), cancels them all, and then
// expects an ordinary request to be answered within a second.
func listenExhaustion(t *testing.T, c *lineConn) {
	const n = 300
	lines := make([]string, n)
	for i := range lines {
		lines[i] = fmt.Sprintf(`{"jsonrpc":"2.0","id":"L%d","method":"subscriptions/listen","params":{%s,"notifications":{"toolsListChanged":true}}}`, i, hostileMeta)
	}
	c.send(lines...)
	c.send(`{"jsonrpc":"2.0","id":"mid","method":"tools/call","params":{` + hostileMeta + `,"name":"echo","arguments":{"text":"while streaming"}}}`)
	got := c.readUntil(`"id":"mid"`, 10*time.Second)
	if !strings.Contains(got[len(got)-1], "while streaming") {
		t.Fatalf("the request beside the streams got %q", got[len(got)-1])
	}
	for i := range lines {
		lines[i] = fmt.Sprintf(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"L%d"}}`, i)
	}
	c.send(lines...)
	c.send(`{"jsonrpc":"2.0","id":"after","method":"tools/call","params":{` + hostileMeta + `,"name":"echo","arguments":{"text":"after the cancels"}}}`)
	got = c.readUntil(`"id":"after"`, time.Second)
	if !strings.Contains(got[len(got)-1], "after the cancels") {
		t.Fatalf("after the cancels got %q", got[len(got)-1])
	}
}

func TestHostileListenExhaustionStdio(t *testing.T) {
	cmd := exec.Command(binary, "serve", "mcp")
	in, _ := cmd.StdinPipe()
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		in.Close()
		exited := make(chan struct{})
		go func() { cmd.Wait(); close(exited) }()
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			t.Error("serve mcp did not exit 10 s after its input ended")
			cmd.Process.Kill()
			<-exited
		}
	}()
	listenExhaustion(t, &lineConn{t: t, w: in, rd: bufio.NewReaderSize(out, 1<<20)})
}

func TestHostileListenExhaustionSocket(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "aw.sock")
	srv := exec.Command(binary, "serve", "mcp", "--listen", "unix:"+sock)
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		srv.Process.Kill()
		srv.Wait()
	}()
	var conn net.Conn
	var err error
	for range 100 { // until it listens
		if conn, err = net.Dial("unix", sock); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	listenExhaustion(t, &lineConn{t: t, w: conn, rd: bufio.NewReaderSize(conn, 1<<20)})
	// A second client of the same server is served too.
	other, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	c := &lineConn{t: t, w: other, rd: bufio.NewReader(other)}
	c.send(`{"jsonrpc":"2.0","id":"second","method":"tools/call","params":{` + hostileMeta + `,"name":"echo","arguments":{"text":"second client"}}}`)
	c.readUntil(`"id":"second"`, time.Second)
}

// Through the bridge: one client opens 300 listen streams over HTTP, then
// hangs up on all of them; a second client is answered at once, and the
// shared stdio server behind the bridge is still fine.
func TestHostileListenExhaustionBridge(t *testing.T) {
	url, _ := startBridgeHTTP(t, nil, binary, "serve", "mcp")

	post := func(ctx context.Context, id, method, params string) (*http.Response, error) {
		body := `{"jsonrpc":"2.0","id":"` + id + `","method":"` + method + `","params":{` + hostileMeta + params + `}}`
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("MCP-Protocol-Version", "2026-07-28")
		req.Header.Set("Mcp-Method", method)
		if method == "tools/call" {
			req.Header.Set("Mcp-Name", "echo")
		}
		return http.DefaultClient.Do(req)
	}
	call := func(who string) {
		t.Helper()
		cctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		resp, err := post(cctx, who, "tools/call", `,"name":"echo","arguments":{"text":"`+who+`"}`)
		if err != nil {
			t.Fatalf("%s was not answered within a second: %v", who, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !strings.Contains(string(b), `"text":"`+who+`"`) {
			t.Fatalf("%s got %d %s", who, resp.StatusCode, b)
		}
	}
	const n = 300
	ctx, hangUp := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer wg.Wait()
	defer hangUp()
	var acked, refused atomic.Int64
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := post(ctx, fmt.Sprintf("L%d", i), "subscriptions/listen", `,"notifications":{"toolsListChanged":true}`)
			if err != nil {
				refused.Add(1) // refused at the connection
				return
			}
			defer resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				refused.Add(1)
				return
			}
			rd := bufio.NewReader(resp.Body)
			var line string
			for !strings.Contains(line, "acknowledged") && !strings.Contains(line, `"error"`) {
				var err error
				if line, err = rd.ReadString('\n'); err != nil {
					refused.Add(1)
					return
				}
			}
			if strings.Contains(line, "acknowledged") {
				acked.Add(1)
				<-ctx.Done() // hold the stream open until we hang up
			} else {
				refused.Add(1)
			}
		}()
	}
	deadline := time.Now().Add(20 * time.Second)
	for acked.Load()+refused.Load() < n && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if acked.Load() == 0 {
		t.Fatalf("no listen stream was acknowledged (%d refused)", refused.Load())
	}
	t.Logf("%d streams acknowledged, %d refused", acked.Load(), refused.Load())
	call("a second client while the streams are open")
	hangUp()
	wg.Wait()
	call("a second client after the hang-up")
}

// startBridgeHTTP runs `agentwire bridge --http 0 -- argv...` (with env, if
// not nil) and returns its URL and a function that stops it and returns
// everything it wrote to stderr.
func startBridgeHTTP(t *testing.T, env []string, argv ...string) (string, func() string) {
	t.Helper()
	cmd := exec.Command(binary, append([]string{"bridge", "--http", "0", "--"}, argv...)...)
	cmd.Env = env
	return startBridgeCmd(t, cmd)
}

// startBridgeCmd is startBridgeHTTP with the bridge's command prepared.
func startBridgeCmd(t *testing.T, cmd *exec.Cmd) (string, func() string) {
	t.Helper()
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(stderr)
	var url string
	var log strings.Builder
	for url == "" {
		line, err := br.ReadString('\n')
		if err != nil {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("no endpoint line: %v\n%s", err, log.String())
		}
		log.WriteString(line)
		if m := endpoint.FindStringSubmatch(line); m != nil {
			url = m[1]
		}
	}
	rest := make(chan string, 1)
	go func() { b, _ := io.ReadAll(br); rest <- string(b) }()
	var once sync.Once
	var all string
	stop := func() string {
		once.Do(func() {
			cmd.Process.Signal(syscall.SIGTERM)
			all = log.String() + <-rest
			cmd.Wait()
		})
		return all
	}
	t.Cleanup(func() { stop() })
	return url, stop
}
