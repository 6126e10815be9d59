package main

import (
	"bufio"
	"fmt"
	"net"
	"net/url"
	"strings"
	"testing"
	"time"
)

// An idle subscriptions/listen stream over HTTP lives on its request's
// goroutine, whose stack must stay in the 8 KiB it grows to while the
// request is read: the frames under the stream's wait are kept small for
// that (rpc's dispatch, the server's modern and listen, the exchange and
// ServeHTTP each keep their work in functions of their own). A stack at
// 16 KiB costs a third more per stream (36.5 KiB against 32 in bench/).
//
// Regressions: the middleware hooks of the observability work added
// frames under every handler, and an idle stream's goroutine no longer
// shrank back from 16 KiB (no test saw it, the stream benchmark did); and
// through the bridge each stream also held a relay goroutine, idle, with a
// 256-message buffer. The stack in use is read from the real binary's own
// metrics (go_memstats_*, --metrics), which the runtime counts exactly:
// 8 KiB for the request's goroutine and net/http's background reader's
// 2 KiB per stream, against 18 KiB (serve) and 16 KiB with a third
// goroutine (bridge) before.
func TestAnIdleListenStreamKeepsASmallStack(t *testing.T) {
	for _, c := range []struct {
		name string
		args []string
	}{
		{"serve", []string{"serve", "mcp", "--http", "127.0.0.1:0", "--metrics", "0"}},
		{"bridge", []string{"bridge", "--http", "127.0.0.1:0", "--metrics", "0", "--", binary, "serve", "mcp"}},
	} {
		t.Run(c.name, func(t *testing.T) { idleListenStreamStacks(t, c.args) })
	}
}

func idleListenStreamStacks(t *testing.T, args []string) {
	metricsURL, endpoint, _ := startServing(t, otelEnv(), args...)
	u, err := url.Parse(endpoint)
	if err != nil {
		t.Fatal(err)
	}
	gauge := func(name string) float64 {
		t.Helper()
		f := family(t, scrape(t, metricsURL), name)
		if len(f.Series) != 1 {
			t.Fatalf("%s: %d series", name, len(f.Series))
		}
		return f.Series[0].Value
	}
	const streams = 200 // under the default MaxStreams (256)
	stacks, goroutines := gauge("go_memstats_stack_inuse_bytes"), gauge("go_goroutines")
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for i := range streams {
		c, err := openListenStream(u, i)
		if err != nil {
			t.Fatalf("stream %d: %v", i, err)
		}
		conns = append(conns, c)
	}
	perStream := (gauge("go_memstats_stack_inuse_bytes") - stacks) / streams
	perStreamGoroutines := (gauge("go_goroutines") - goroutines) / streams
	t.Logf("per idle listen stream: %.0f bytes of stack, %.2f goroutines", perStream, perStreamGoroutines)
	if perStream > 13<<10 {
		t.Errorf("an idle listen stream holds %.0f bytes of goroutine stacks, want at most 13 KiB (8 KiB for the request's goroutine, 2 KiB for net/http's reader)", perStream)
	}
	if perStreamGoroutines > 2.1 {
		t.Errorf("an idle listen stream holds %.2f goroutines, want net/http's two", perStreamGoroutines)
	}
}

// openListenStream sends a 2026-07-28 subscriptions/listen on a
// connection of its own and returns once the event stream's headers and
// its acknowledgment have arrived; the stream stays open.
func openListenStream(u *url.URL, i int) (net.Conn, error) {
	const version = "2026-07-28"
	body := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"subscriptions/listen","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":%q,"io.modelcontextprotocol/clientInfo":{"name":"t","version":"1"},"io.modelcontextprotocol/clientCapabilities":{}},"notifications":{"toolsListChanged":true}}}`, i, version)
	c, err := net.DialTimeout("tcp", u.Host, 10*time.Second)
	if err != nil {
		return nil, err
	}
	c.SetDeadline(time.Now().Add(20 * time.Second))
	fmt.Fprintf(c, "POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nMCP-Protocol-Version: %s\r\nMcp-Method: subscriptions/listen\r\nContent-Length: %d\r\n\r\n%s",
		u.Path, u.Host, version, len(body), body)
	br := bufio.NewReader(c)
	status, err := br.ReadString('\n')
	if err != nil {
		c.Close()
		return nil, err
	}
	if !strings.Contains(status, " 200 ") {
		c.Close()
		return nil, fmt.Errorf("status %q", strings.TrimSpace(status))
	}
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			c.Close()
			return nil, err
		}
		if strings.Contains(line, "notifications/subscriptions/acknowledged") {
			c.SetDeadline(time.Time{})
			return c, nil
		}
	}
}
