package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"syscall"
	"time"

	awmcp "github.com/agentwire/agentwire/mcp"
	awhost "github.com/agentwire/agentwire/mcp/host"
	awstreamable "github.com/agentwire/agentwire/mcp/streamable"
	"github.com/agentwire/agentwire/process"

	mcpgoclient "github.com/mark3labs/mcp-go/client"
	mcpgotransport "github.com/mark3labs/mcp-go/client/transport"
	mcpgomcp "github.com/mark3labs/mcp-go/mcp"
	sdkmcp "github.com/modelcontextprotocol/go-sdk/mcp"
)

// The host side: the MCP clients (agentwire's, go-sdk's, mcp-go's) each
// calling the same server, agentwire's, over stdio (its own subprocess,
// which the client starts) and over HTTP (a server process on loopback).
// Calls are sequential tools/call of echo. The client runs in the bench
// process while nothing else does, so its CPU is the bench process's
// getrusage (user+system) over the calls; the server's CPU is not in it.

// hostSession is one connected client.
type hostSession interface {
	call(ctx context.Context, text string) (string, error)
	close()
}

type hostClient struct {
	name string
	what string
	// connect starts (stdio) or reaches (url) the server, in the era.
	connect func(ctx context.Context, url string, modern bool) (hostSession, error)
}

var hostClients = []hostClient{
	{name: "agentwire", what: "agentwire mcp.StartServer / mcp.ConnectHTTP (the era forced in its ClientOptions)", connect: connectAgentwire},
	{name: "go-sdk", what: "go-sdk v1.8.0 Client (CommandTransport / StreamableClientTransport)", connect: connectGoSDK},
	{name: "mcp-go", what: "mark3labs/mcp-go v1.2.1 Client (stdio / streamable HTTP)", connect: connectMCPGo},
}

type hostKey struct {
	client, transport string
	modern            bool
}

type hostResult struct {
	calls   int
	elapsed time.Duration
	cpu     float64 // client CPU seconds
}

func (h hostResult) callsPerSec() float64 { return float64(h.calls) / h.elapsed.Seconds() }
func (h hostResult) cpuPerCall() float64  { return h.cpu / float64(h.calls) }

type hostRun struct {
	rounds  int
	dur     time.Duration
	samples map[hostKey]map[int]hostResult
	failed  map[hostKey]string
}

var hostTransports = []string{"stdio", "http"}

func (h *hostRun) run() {
	h.samples, h.failed = map[hostKey]map[int]hostResult{}, map[hostKey]string{}
	for round := range h.rounds {
		var keys []hostKey
		for _, c := range hostClients {
			for _, tr := range hostTransports {
				for _, modern := range []bool{false, true} {
					keys = append(keys, hostKey{c.name, tr, modern})
				}
			}
		}
		rand.Shuffle(len(keys), func(i, j int) { keys[i], keys[j] = keys[j], keys[i] })
		for _, k := range keys {
			if _, bad := h.failed[k]; bad {
				continue
			}
			fmt.Fprintf(os.Stderr, "host round %d/%d %-9s %-5s %s\n", round+1, h.rounds, k.client, k.transport, eraName(k.modern))
			res, err := h.measure(k)
			if err != nil {
				fmt.Fprintf(os.Stderr, "  failed: %v\n", err)
				h.failed[k] = err.Error()
				continue
			}
			if h.samples[k] == nil {
				h.samples[k] = map[int]hostResult{}
			}
			h.samples[k][round] = res
		}
	}
}

func eraName(modern bool) string {
	if modern {
		return modernVersion
	}
	return legacyVersion
}

func (h *hostRun) measure(k hostKey) (hostResult, error) {
	var c hostClient
	for _, hc := range hostClients {
		if hc.name == k.client {
			c = hc
		}
	}
	url := ""
	if k.transport == "http" {
		s, _ := httpServerNamed("agentwire")
		p, err := startHTTPServer(s, 0)
		if err != nil {
			return hostResult{}, err
		}
		defer p.stop()
		url = p.url
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	sess, err := c.connect(ctx, url, k.modern)
	if err != nil {
		return hostResult{}, fmt.Errorf("connect: %w", err)
	}
	defer sess.close()
	if _, err := hostCalls(ctx, sess, h.dur/4, "w"); err != nil {
		return hostResult{}, err
	}
	runtime.GC()
	cpu0 := selfCPU()
	start := time.Now()
	n, err := hostCalls(ctx, sess, h.dur, "m")
	elapsed := time.Since(start)
	cpu1 := selfCPU()
	if err != nil {
		return hostResult{}, err
	}
	return hostResult{calls: n, elapsed: elapsed, cpu: cpu1 - cpu0}, nil
}

// hostCalls calls echo until d has passed, checking every answer.
func hostCalls(ctx context.Context, s hostSession, d time.Duration, tag string) (int, error) {
	deadline := time.Now().Add(d)
	n := 0
	for time.Now().Before(deadline) {
		text := tag + strconv.Itoa(n)
		got, err := s.call(ctx, text)
		if err != nil {
			return n, err
		}
		if got != text {
			return n, fmt.Errorf("echo %q answered %q", text, got)
		}
		n++
	}
	if n == 0 {
		return 0, errors.New("no call completed")
	}
	return n, nil
}

// selfCPU is the bench process's user+system CPU time, in seconds.
func selfCPU() float64 {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}

// serverCommand is the stdio server every client starts: agentwire's MCP
// server (dual-era) in this binary.
func serverCommand() (string, []string) {
	self, _ := os.Executable()
	return self, []string{"-serve", "agentwire-mcp"}
}

// ----- agentwire -----

type awSession struct{ s *awhost.Session }

func connectAgentwire(ctx context.Context, url string, modern bool) (hostSession, error) {
	opts := &awhost.Options{Eras: awmcp.LegacyOnly}
	if modern {
		opts.Eras = awmcp.ModernOnly
	}
	var s *awhost.Session
	var err error
	if url == "" {
		path, args := serverCommand()
		s, err = awhost.StartServer(ctx, process.Command{Path: path, Args: args}, opts)
	} else {
		s, err = awstreamable.Connect(ctx, url, opts, nil)
	}
	if err != nil {
		return nil, err
	}
	if want := eraName(modern); s.ProtocolVersion() != want {
		s.Close()
		return nil, fmt.Errorf("negotiated %s, not %s", s.ProtocolVersion(), want)
	}
	return awSession{s}, nil
}

func (a awSession) call(ctx context.Context, text string) (string, error) {
	r, err := a.s.CallTool(ctx, "echo", map[string]any{"text": text})
	if err != nil {
		return "", err
	}
	if r.IsError || len(r.Content) != 1 {
		return "", fmt.Errorf("unexpected result %+v", r)
	}
	return r.Content[0].Text, nil
}

func (a awSession) close() { a.s.Close() }

// ----- go-sdk -----

type sdkSession struct{ cs *sdkmcp.ClientSession }

func connectGoSDK(ctx context.Context, url string, modern bool) (hostSession, error) {
	c := sdkmcp.NewClient(&sdkmcp.Implementation{Name: "bench", Version: "1"}, nil)
	var t sdkmcp.Transport
	if url == "" {
		path, args := serverCommand()
		t = &sdkmcp.CommandTransport{Command: exec.Command(path, args...)}
	} else {
		t = &sdkmcp.StreamableClientTransport{Endpoint: url}
	}
	version := legacyVersion
	if modern {
		version = modernVersion
	}
	cs, err := c.Connect(ctx, t, &sdkmcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		return nil, err
	}
	if got := cs.InitializeResult().ProtocolVersion; got != version {
		cs.Close()
		return nil, fmt.Errorf("negotiated %s, not %s", got, version)
	}
	return sdkSession{cs}, nil
}

func (s sdkSession) call(ctx context.Context, text string) (string, error) {
	r, err := s.cs.CallTool(ctx, &sdkmcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": text}})
	if err != nil {
		return "", err
	}
	if r.IsError || len(r.Content) != 1 {
		return "", fmt.Errorf("unexpected result %+v", r)
	}
	tc, ok := r.Content[0].(*sdkmcp.TextContent)
	if !ok {
		return "", fmt.Errorf("unexpected content %T", r.Content[0])
	}
	return tc.Text, nil
}

func (s sdkSession) close() { s.cs.Close() }

// ----- mcp-go -----

type mcpGoSession struct{ c *mcpgoclient.Client }

func connectMCPGo(ctx context.Context, url string, modern bool) (hostSession, error) {
	var t mcpgotransport.Interface
	if url == "" {
		path, args := serverCommand()
		t = mcpgotransport.NewStdio(path, nil, args...)
	} else {
		ht, err := mcpgotransport.NewStreamableHTTP(url)
		if err != nil {
			return nil, err
		}
		t = ht
	}
	version := legacyVersion
	if modern {
		version = modernVersion
	}
	c := mcpgoclient.NewClient(t, mcpgoclient.WithProtocolVersion(version))
	if err := c.Start(ctx); err != nil {
		return nil, err
	}
	var init mcpgomcp.InitializeRequest
	init.Params.ProtocolVersion = version
	init.Params.ClientInfo = mcpgomcp.Implementation{Name: "bench", Version: "1"}
	res, err := c.Initialize(ctx, init)
	if err != nil {
		c.Close()
		return nil, err
	}
	if res.ProtocolVersion != version {
		c.Close()
		return nil, fmt.Errorf("negotiated %s, not %s", res.ProtocolVersion, version)
	}
	return mcpGoSession{c}, nil
}

func (s mcpGoSession) call(ctx context.Context, text string) (string, error) {
	var req mcpgomcp.CallToolRequest
	req.Params.Name = "echo"
	req.Params.Arguments = map[string]any{"text": text}
	r, err := s.c.CallTool(ctx, req)
	if err != nil {
		return "", err
	}
	if r.IsError || len(r.Content) != 1 {
		return "", fmt.Errorf("unexpected result %+v", r)
	}
	tc, ok := mcpgomcp.AsTextContent(r.Content[0])
	if !ok {
		return "", fmt.Errorf("unexpected content %T", r.Content[0])
	}
	return tc.Text, nil
}

func (s mcpGoSession) close() { s.c.Close() }

// ratio is the median over rounds of f(client)/f(agentwire's client) in
// the same transport, era and round.
func (h *hostRun) ratio(k hostKey, f func(hostResult) float64) (med, lo, hi float64, ok bool) {
	return roundRatio(h.samples[k], h.samples[hostKey{"agentwire", k.transport, k.modern}], f)
}

func (h *hostRun) median(k hostKey, f func(hostResult) float64) float64 {
	return roundMedian(h.samples[k], f)
}
