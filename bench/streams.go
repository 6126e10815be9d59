package main

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// A streamTarget is a server's long-lived event stream: what a client
// holds open to be told of changes.
type streamTarget struct {
	name   string
	server string
	what   string
	// listen: a 2026-07-28 subscriptions/listen POST; otherwise a GET,
	// after an initialize when session is set (the stream belongs to a
	// session).
	listen  bool
	session bool
}

var streamTargets = []streamTarget{
	{name: "plain-get", server: "plain", what: "hand-written handler holding a GET event stream open"},
	{name: "agentwire-listen", server: "agentwire", listen: true, what: "agentwire, subscriptions/listen (2026-07-28)"},
	{name: "go-sdk-get", server: "go-sdk", session: true, what: "go-sdk stateful: initialize, then the session's GET stream"},
	{name: "go-sdk-listen", server: "go-sdk-stateless", listen: true, what: "go-sdk Stateless, subscriptions/listen (2026-07-28)"},
	{name: "mcp-go-get", server: "mcp-go", session: true, what: "mcp-go WithStateful: initialize, then the session's GET stream"},
	{name: "mcp-go-listen", server: "mcp-go-stateless", listen: true, what: "mcp-go, subscriptions/listen (2026-07-28)"},
	{name: "ts-listen", server: "ts", listen: true, what: "TypeScript SDK v2, subscriptions/listen (2026-07-28)"},
}

func streamTargetNamed(name string) streamTarget {
	for _, t := range streamTargets {
		if t.name == name {
			return t
		}
	}
	panic("no stream target " + name)
}

// streamResult is what holding n idle streams cost one server process.
type streamResult struct {
	target        streamTarget
	asked, opened int
	before, after int64 // server VmRSS, bytes
	openTime      time.Duration
	err           string // the first failure, if any
}

func (s streamResult) perStream() float64 {
	if s.opened == 0 {
		return 0
	}
	return float64(s.after-s.before) / float64(s.opened)
}

func (r *httpRun) idleStreams() {
	for _, t := range streamTargets {
		if t.server == "ts" && !haveNode() {
			continue
		}
		if s, ok := httpServerNamed(t.server); ok && !hasServer(r.targets, s.name) {
			continue
		}
		fmt.Fprintf(os.Stderr, "streams %-18s N=%d\n", t.name, r.streams)
		r.idle = append(r.idle, measureStreams(t, r.streams))
	}
}

func hasServer(ts []httpTarget, server string) bool {
	for _, t := range ts {
		if t.server == server {
			return true
		}
	}
	return false
}

// measureStreams opens n idle streams on a fresh server process and reads
// its resident memory before and once every stream has its headers. The
// streams are raw TCP connections that send one request and read only
// the response headers, so that the client side costs a socket each.
func measureStreams(t streamTarget, n int) streamResult {
	res := streamResult{target: t, asked: n}
	s, _ := httpServerNamed(t.server)
	p, err := startHTTPServer(s, n)
	if err != nil {
		res.err = err.Error()
		return res
	}
	defer p.stop()
	u, _ := url.Parse(p.url)

	// One call first, so that "before" is a server that has served.
	warm := newHTTPLoad(&http.Client{Transport: &http.Transport{DisableKeepAlives: true}}, p.url, t.listen, "warm")
	if err := warm.initialize(); err == nil {
		err = warm.call()
	}
	if err != nil {
		res.err = "warm-up call: " + err.Error()
		return res
	}
	time.Sleep(200 * time.Millisecond)
	if res.before, err = rssBytes(p.pid); err != nil {
		res.err = err.Error()
		return res
	}

	var (
		mu       sync.Mutex
		conns    []net.Conn
		firstErr string
		next     atomic.Int64
	)
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	start := time.Now()
	var wg sync.WaitGroup
	for range 32 { // dialers: the accept backlog is not a test subject
		wg.Go(func() {
			sessions := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
			for {
				i := next.Add(1)
				if i > int64(n) {
					return
				}
				c, err := openStream(t, u, sessions, p.url, int(i))
				mu.Lock()
				if err != nil {
					if firstErr == "" {
						firstErr = fmt.Sprintf("stream %d: %v", i, err)
					}
				} else {
					conns = append(conns, c)
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	res.openTime = time.Since(start)
	res.opened = len(conns)
	res.err = firstErr
	// Let the server settle: goroutines parked, buffers allocated.
	time.Sleep(500 * time.Millisecond)
	if res.after, err = rssBytes(p.pid); err != nil && res.err == "" {
		res.err = err.Error()
	}
	return res
}

// openStream opens one stream and returns once its response headers
// (200, text/event-stream) have arrived; the connection stays open.
func openStream(t streamTarget, u *url.URL, hc *http.Client, endpoint string, i int) (net.Conn, error) {
	var req bytes.Buffer
	if t.listen {
		body := `{"jsonrpc":"2.0","id":` + strconv.Itoa(i) + `,"method":"subscriptions/listen","params":{` + modernMeta + `,"notifications":{"toolsListChanged":true}}}`
		fmt.Fprintf(&req, "POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nMCP-Protocol-Version: %s\r\nMcp-Method: subscriptions/listen\r\nContent-Length: %d\r\n\r\n%s",
			u.Path, u.Host, modernVersion, len(body), body)
	} else {
		session := ""
		if t.session {
			l := newHTTPLoad(hc, endpoint, false, "s")
			if err := l.initialize(); err != nil {
				return nil, err
			}
			if l.session == "" {
				return nil, fmt.Errorf("no Mcp-Session-Id from initialize")
			}
			session = "Mcp-Session-Id: " + l.session + "\r\nMCP-Protocol-Version: " + legacyVersion + "\r\n"
		}
		fmt.Fprintf(&req, "GET %s HTTP/1.1\r\nHost: %s\r\nAccept: text/event-stream\r\n%s\r\n", u.Path, u.Host, session)
	}
	c, err := net.DialTimeout("tcp", u.Host, 10*time.Second)
	if err != nil {
		return nil, err
	}
	c.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := c.Write(req.Bytes()); err != nil {
		c.Close()
		return nil, err
	}
	// The headers, byte by byte is too slow and a big buffer would keep
	// memory per stream: a small reader, dropped once they have arrived.
	br := bufio.NewReaderSize(c, 1024)
	status, err := br.ReadString('\n')
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("no response headers: %v", err)
	}
	sse := false
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			c.Close()
			return nil, fmt.Errorf("headers: %v", err)
		}
		if line == "\r\n" {
			break
		}
		if k, v, ok := strings.Cut(line, ":"); ok && strings.EqualFold(k, "Content-Type") && strings.HasPrefix(strings.TrimSpace(v), "text/event-stream") {
			sse = true
		}
	}
	if !strings.Contains(status, " 200 ") || !sse {
		c.Close()
		return nil, fmt.Errorf("not an event stream: %s", strings.TrimSpace(status))
	}
	c.SetDeadline(time.Time{})
	return c, nil
}
