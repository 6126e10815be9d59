package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/agentwire/agentwire/client"
	"github.com/agentwire/agentwire/jsonrpc"
	"github.com/agentwire/agentwire/mcp"
	"github.com/agentwire/agentwire/process"
	"github.com/agentwire/agentwire/rpc"
)

// checkResult is one row of `agentwire check`.
type checkResult struct {
	Check    string `json:"check"`
	Result   string `json:"result"` // pass, warn, fail, info, skip
	Evidence string `json:"evidence"`
	Rule     string `json:"rule"`
}

type checkReport struct {
	Server  []string      `json:"server"`
	Checks  []checkResult `json:"checks"`
	Passed  bool          `json:"passed"`
	Seconds float64       `json:"seconds"`
}

// runCheck is `agentwire check`: a fixed battery against a stdio MCP
// server, from the outside, for people who run servers they did not write.
func runCheck(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("check", flag.ContinueOnError)
	fs.SetOutput(stderr)
	asJSON := fs.Bool("json", false, "print one JSON document instead of a table")
	timeout := fs.Duration("timeout", 60*time.Second, "bound on the whole run")
	grace := fs.Duration("grace", 2*time.Second, "each wait of the shutdown ladder")
	probeTimeout := fs.Duration("probe-timeout", mcp.DefaultProbeTimeout, "how long the server/discover probe may take")
	slowTool := fs.String("slow-tool", "", "a tool that takes time, for the cancellation check")
	slowArgs := fs.String("slow-args", "{}", "its arguments, as JSON")
	callTools := fs.Bool("call-tools", false, "call every tool whose input schema can be satisfied with default values")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	argv := fs.Args()
	if len(argv) == 0 {
		fmt.Fprintln(stderr, "agentwire check: missing the server command (agentwire check [flags] -- CMD [ARGS...])")
		return 2
	}
	if !json.Valid([]byte(*slowArgs)) {
		fmt.Fprintf(stderr, "agentwire check: --slow-args is not valid JSON: %s\n", *slowArgs)
		return 2
	}
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	c := &checker{ctx: ctx, grace: *grace, probeTimeout: *probeTimeout}
	c.run(process.Command{Path: argv[0], Args: argv[1:]}, *slowTool, json.RawMessage(*slowArgs), *callTools)

	rep := checkReport{Server: argv, Checks: c.results, Passed: true, Seconds: time.Since(start).Seconds()}
	for _, r := range c.results {
		if r.Result == "fail" {
			rep.Passed = false
		}
	}
	if *asJSON {
		b, _ := json.MarshalIndent(rep, "", "  ")
		fmt.Fprintf(stdout, "%s\n", b)
	} else {
		tw := tabwriter.NewWriter(stdout, 2, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "CHECK\tRESULT\tEVIDENCE\tRULE")
		for _, r := range c.results {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", r.Check, r.Result, r.Evidence, r.Rule)
		}
		tw.Flush()
		verdict := "passed"
		if !rep.Passed {
			verdict = "FAILED"
		}
		fmt.Fprintf(stdout, "\n%s in %.1f s\n", verdict, rep.Seconds)
	}
	if !rep.Passed {
		return 1
	}
	return 0
}

type checker struct {
	ctx          context.Context
	grace        time.Duration
	probeTimeout time.Duration
	results      []checkResult

	mu         sync.Mutex
	violations []string // the first few, for the evidence
	violated   int      // how many in all
}

func (c *checker) add(check, result, evidence, rule string) {
	evidence = strings.ReplaceAll(evidence, "\n", " ")
	c.results = append(c.results, checkResult{check, result, evidence, rule})
}

// step bounds one check by d and by the whole run.
func (c *checker) step(d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(c.ctx, d)
}

func quote(lines []string, n int) string {
	if len(lines) > n {
		lines = lines[:n]
	}
	q := make([]string, len(lines))
	for i, l := range lines {
		if len(l) > 80 {
			l = l[:80] + "…"
		}
		q[i] = fmt.Sprintf("%q", l)
	}
	return strings.Join(q, ", ")
}

func (c *checker) run(cmd process.Command, slowTool string, slowArgs json.RawMessage, callTools bool) {
	transport := &client.Options{
		Logger:  discard,
		Process: &process.Options{Grace: c.grace},
		OnViolation: func(v rpc.Violation) {
			// A line over the size limit may be a valid (huge) message:
			// only lines that are not messages count as pollution.
			if v.Kind == rpc.ViolationParse || v.Kind == rpc.ViolationInvalid {
				c.mu.Lock()
				c.violated++
				if len(c.violations) < 3 {
					c.violations = append(c.violations, string(v.Line))
				}
				c.mu.Unlock()
			}
		},
	}
	// A server that dies on the probe is restarted by the client (to go on
	// in legacy); this check reports it as a failure all the same.
	sess, err := mcp.StartServer(c.ctx, cmd, &mcp.ClientOptions{
		ProbeTimeout: c.probeTimeout, ProcessStartupAllowance: -1, Transport: transport,
		Info: mcp.Implementation{Name: "agentwire-check", Version: "1"},
	})
	rule := "seed 001 (the probe); SPEC E2"
	if err != nil {
		var ce *mcp.ConnectError
		evidence := err.Error()
		if errors.As(err, &ce) {
			evidence = fmt.Sprintf("probe %s after %d ms: %v", ce.Probe, ce.Duration.Milliseconds(), err)
		}
		c.add("era", "fail", evidence, rule)
		c.hygiene()
		if ce != nil && ce.Shutdown.Outcome != "" {
			c.shutdown(ce.Shutdown)
		}
		return
	}
	evidence := fmt.Sprintf("%s %s; probe %s in %d ms", sess.Era(), sess.ProtocolVersion(), sess.Probe(), sess.ConnectDuration().Milliseconds())
	result := "pass"
	switch {
	case sess.Probe() == mcp.ProbeExit:
		result, evidence = "fail", evidence+"; the server exited on the probe (it had to be restarted)"
	case sess.Probe() == mcp.ProbeTimeout:
		result, evidence = "warn", evidence+"; silent until initialize: every modern client waits out its probe timeout"
	}
	c.add("era", result, evidence, rule)
	proc := sess.Client().Process()

	c.checkUnknownMethod(sess)
	c.checkNotJSON(sess, proc)
	c.checkLargeRequest(sess)
	c.checkConcurrency(sess)
	if callTools {
		c.checkCallTools(sess)
	}
	c.checkCancellation(sess, slowTool, slowArgs)

	// The ladder may not outlast the run: past the deadline the server is
	// killed.
	done := make(chan process.ShutdownResult, 1)
	go func() { done <- sess.Close() }()
	var shut process.ShutdownResult
	select {
	case shut = <-done:
	case <-c.ctx.Done():
		proc.Kill()
		shut = <-done
	}
	c.hygiene()
	tail := strings.TrimSpace(proc.StderrTail())
	ev := "nothing written to stderr"
	if tail != "" {
		lines := strings.Split(tail, "\n")
		ev = fmt.Sprintf("%d line(s) in the tail; last: %q", len(lines), lines[len(lines)-1])
	}
	c.add("stderr use", "pass", "informational: "+ev, "MCP stdio: stderr is for logs, never an error by itself")
	c.shutdown(shut)
}

// hygiene reports stdout pollution over the whole run, the shutdown
// included.
func (c *checker) hygiene() {
	c.mu.Lock()
	bad, n := append([]string(nil), c.violations...), c.violated
	c.mu.Unlock()
	rule := "MCP stdio: stdout carries only MCP messages"
	if n == 0 {
		c.add("stdout hygiene", "pass", "only protocol messages on stdout", rule)
		return
	}
	c.add("stdout hygiene", "fail", fmt.Sprintf("%d non-protocol line(s): %s", n, quote(bad, 3)), rule)
}

func (c *checker) shutdown(shut process.ShutdownResult) {
	rule := "seed 001: exit promptly on stdin EOF"
	ladder := fmt.Sprintf("%s in %d ms (grace %v)", shut.Outcome, shut.Duration.Milliseconds(), c.grace)
	switch shut.Outcome {
	case process.Exited:
		c.add("shutdown", "pass", ladder, rule)
	case process.Terminated:
		c.add("shutdown", "warn", ladder+": ignored stdin EOF", rule)
	default:
		c.add("shutdown", "fail", ladder+": ignored stdin EOF and SIGTERM", rule)
	}
}

// health says whether the server still answers: "ok", "dead" (it
// exited or the connection is gone) or "silent" (running, not answering).
func (c *checker) health(sess *mcp.Session) string {
	ctx, cancel := c.step(5 * time.Second)
	defer cancel()
	_, err := sess.Request(ctx, pingMethod(sess), nil)
	var je *jsonrpc.Error
	switch {
	case err == nil || errors.As(err, &je):
		return "ok"
	case errors.Is(err, client.ErrConnectionLost):
		return "dead"
	}
	if p := sess.Client().Process(); p != nil {
		select {
		case <-p.Exited():
			return "dead"
		default:
		}
	}
	return "silent"
}

func (c *checker) alive(sess *mcp.Session) bool { return c.health(sess) == "ok" }

// pingMethod is a cheap request in the server's era (ping is gone in
// 2026-07-28).
func pingMethod(sess *mcp.Session) string {
	if sess.Era() == "modern" {
		return "tools/list"
	}
	return "ping"
}

func (c *checker) checkUnknownMethod(sess *mcp.Session) {
	ctx, cancel := c.step(5 * time.Second)
	defer cancel()
	_, err := sess.Request(ctx, "agentwire/no-such-method", nil)
	var je *jsonrpc.Error
	rule := "JSON-RPC 2.0: -32601 for an unknown method"
	switch {
	case errors.As(err, &je) && je.Code == jsonrpc.CodeMethodNotFound:
		c.add("unknown method", "pass", "-32601 "+je.Message, rule)
	case errors.As(err, &je):
		c.add("unknown method", "warn", fmt.Sprintf("answered %d %q instead of -32601", je.Code, je.Message), rule)
	case err == nil:
		c.add("unknown method", "fail", "an unknown method succeeded", rule)
	case errors.Is(err, context.DeadlineExceeded):
		c.add("unknown method", "fail", "no answer within 5 s", rule)
	default:
		c.add("unknown method", "fail", err.Error(), rule)
	}
}

func (c *checker) checkNotJSON(sess *mcp.Session, proc *process.Process) {
	rule := "JSON-RPC 2.0: -32700 (id null) for a line that is not JSON; the stream goes on"
	before := sess.Client().Stats().UnknownResponses
	// Nothing else is being written now, so the line cannot split a message.
	if _, err := io.WriteString(proc.Stdin(), "this is not json\n"); err != nil {
		c.add("not JSON", "fail", "could not write: "+err.Error(), rule)
		return
	}
	health := c.health(sess)
	time.Sleep(50 * time.Millisecond)
	answered := sess.Client().Stats().UnknownResponses > before
	switch {
	case health == "dead":
		c.add("not JSON", "fail", "the server died after a line that is not JSON", rule)
	case health == "silent":
		c.add("not JSON", "warn", "the server stopped answering (it is still running)", rule)
	case answered:
		c.add("not JSON", "pass", "answered with an error (id null) and kept serving", rule)
	default:
		c.add("not JSON", "warn", "no -32700 reply, but kept serving", rule)
	}
}

func (c *checker) checkLargeRequest(sess *mcp.Session) {
	rule := "no size limit in MCP; a server should take (or refuse) a large message and keep serving"
	ctx, cancel := c.step(10 * time.Second)
	defer cancel()
	pad := strings.Repeat("x", 1<<20+1024)
	_, err := sess.Request(ctx, "tools/list", map[string]any{"_meta": map[string]any{"dev.agentwire/padding": pad}})
	var je *jsonrpc.Error
	switch {
	case err == nil:
		c.add("large request", "pass", "a 1 MiB request was answered", rule)
	case errors.As(err, &je):
		c.add("large request", "pass", fmt.Sprintf("a 1 MiB request was refused with %d", je.Code), rule)
	case c.health(sess) == "dead":
		c.add("large request", "fail", "the server died on a 1 MiB request", rule)
	default:
		c.add("large request", "warn", "no answer to a 1 MiB request: "+err.Error(), rule)
	}
}

func (c *checker) checkConcurrency(sess *mcp.Session) {
	rule := "JSON-RPC 2.0: several requests in flight, answered in any order"
	ctx, cancel := c.step(10 * time.Second)
	defer cancel()
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i := range 2 {
		wg.Go(func() {
			_, errs[i] = sess.Request(ctx, pingMethod(sess), nil)
		})
	}
	wg.Wait()
	var msgs []string
	for _, err := range errs {
		if err != nil {
			msgs = append(msgs, strings.ReplaceAll(err.Error(), "\n", " "))
		}
	}
	if len(msgs) > 0 {
		c.add("concurrency", "fail", "two requests in flight: "+strings.Join(msgs, "; "), rule)
		return
	}
	c.add("concurrency", "pass", "two requests in flight, both answered", rule)
}

func (c *checker) checkCallTools(sess *mcp.Session) {
	ctx, cancel := c.step(20 * time.Second)
	defer cancel()
	tools, err := sess.ListTools(ctx)
	if err != nil {
		c.add("call tools", "fail", "tools/list: "+err.Error(), "MCP tools")
		return
	}
	var called, skipped []string
	for _, t := range tools {
		args, ok := defaultArgs(t.InputSchema)
		if !ok || t.Name == "crash" {
			skipped = append(skipped, t.Name)
			continue
		}
		tctx, tcancel := c.step(5 * time.Second)
		_, err := sess.CallTool(tctx, t.Name, args)
		tcancel()
		var je *jsonrpc.Error
		if err != nil && !errors.As(err, &je) {
			c.add("call tools", "fail", fmt.Sprintf("%s: %v", t.Name, err), "MCP tools")
			return
		}
		called = append(called, t.Name)
	}
	c.add("call tools", "info", fmt.Sprintf("called %s; skipped %s", strings.Join(called, ", "), strings.Join(skipped, ", ")), "MCP tools")
}

// defaultArgs fills a tool's required properties with default values when
// their types allow it.
func defaultArgs(schema json.RawMessage) (map[string]any, bool) {
	var s struct {
		Required   []string `json:"required"`
		Properties map[string]struct {
			Type any `json:"type"`
		} `json:"properties"`
	}
	if json.Unmarshal(schema, &s) != nil {
		return nil, false
	}
	args := map[string]any{}
	for _, name := range s.Required {
		switch s.Properties[name].Type {
		case "string":
			args[name] = "agentwire"
		case "integer", "number":
			args[name] = 1
		case "boolean":
			args[name] = false
		case "array":
			args[name] = []any{}
		case "object":
			args[name] = map[string]any{}
		default:
			return nil, false
		}
	}
	return args, true
}

func (c *checker) checkCancellation(sess *mcp.Session, tool string, args json.RawMessage) {
	rule := "MCP: after notifications/cancelled, no further message for the request"
	if tool == "" {
		// Without a slow tool, check what every server must survive: a
		// cancellation for a request that has already finished.
		ctx, cancel := c.step(5 * time.Second)
		defer cancel()
		sess.Client().Notify(ctx, "notifications/cancelled", map[string]any{"requestId": 987654321, "reason": "agentwire check"})
		switch c.health(sess) {
		case "dead":
			c.add("cancellation", "fail", "the server died after a cancellation for a finished request", rule)
			return
		case "silent":
			c.add("cancellation", "warn", "the server stopped answering after a cancellation for a finished request", rule)
			return
		}
		c.add("cancellation", "pass", "a cancellation for a finished request was ignored (give --slow-tool to cancel a running one)", rule)
		return
	}
	before := sess.Client().Stats().LateResponses
	ctx, cancel := c.step(300 * time.Millisecond)
	_, err := sess.CallTool(ctx, tool, args)
	cancel()
	if err == nil || !errors.Is(err, context.DeadlineExceeded) {
		c.add("cancellation", "warn", fmt.Sprintf("%s finished within 300 ms (%v): nothing to cancel", tool, err), rule)
		return
	}
	time.Sleep(time.Second)
	late := sess.Client().Stats().LateResponses - before
	switch {
	case c.health(sess) == "dead":
		c.add("cancellation", "fail", "the server died after a cancellation", rule)
	case !c.alive(sess):
		c.add("cancellation", "warn", "the server stopped answering after a cancellation", rule)
	case late > 0:
		c.add("cancellation", "warn", "a response came after the cancellation", rule)
	default:
		c.add("cancellation", "pass", fmt.Sprintf("%s cancelled after 300 ms; no response afterwards", tool), rule)
	}
}
