package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/agentwire/agentwire/client"
	"github.com/agentwire/agentwire/jsonrpc"
	"github.com/agentwire/agentwire/mcp"
	"github.com/agentwire/agentwire/mcp/host"
	"github.com/agentwire/agentwire/process"
	"github.com/agentwire/agentwire/rpc"
)

// The rules the stdio rows cite.
const (
	ruleEra        = "MCP era negotiation: server/discover, then initialize (docs/guarantees.md#e2)"
	ruleUnknown    = "JSON-RPC 2.0: -32601 for an unknown method"
	ruleNotJSON    = "JSON-RPC 2.0: -32700 (id null) for a line that is not JSON; the stream goes on"
	ruleLarge      = "no size limit in MCP; a server should take (or refuse) a large message and keep serving"
	ruleConcurrent = "JSON-RPC 2.0: several requests in flight, answered in any order"
	ruleCancel     = "MCP: after notifications/cancelled, no further message for the request"
	ruleHygiene    = "MCP stdio: stdout carries only MCP messages"
	ruleStderr     = "MCP stdio: stderr is for logs, never an error by itself"
	ruleShutdown   = "MCP stdio shutdown: exit on stdin EOF, before SIGTERM and SIGKILL (docs/guarantees.md#k7)"
	ruleRestart    = "a verdict needs a live server: after a probe that kills or hangs it, a fresh process runs the rest"
	ruleLifetime   = "MCP stdio: a server serves until its stdin closes"
)

// maxRestarts is how many fresh processes a stdio run starts after fatal
// probes; beyond, the remaining probes are not run.
const maxRestarts = 2

// Server health, as health finds it.
const (
	healthOK     = "ok"     // answered a request
	healthDead   = "dead"   // exited, or the connection is gone
	healthSilent = "silent" // running, answering nothing
)

// stdioProbe is one step of the stdio battery. run reports the server's
// health when it found it out ("" when it did not look).
type stdioProbe struct {
	name, rule string
	run        func(rule string) string
}

// runStdio runs the battery against a server command. Every probe starts
// on a server that has just answered: when one leaves it dead or silent,
// that probe's row says so and a fresh process (said in a "restart" row)
// runs the rest, so that no later row blames the server for a death it
// has already been blamed for. When no process can be had, the remaining
// probes are "not run", with the reason.
func (c *checker) runStdio(cmd process.Command) {
	c.cmd = cmd
	transport := &client.Options{
		Logger:  discard,
		Process: &process.Options{Grace: c.opts.grace},
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
	allowance := c.opts.allowance
	if allowance <= 0 {
		allowance = -1 // none (0 would mean mcp's default)
	}
	c.mopts = &host.Options{
		ProbeTimeout: c.opts.probeTimeout, ConnectTimeout: c.opts.connectTimeout, ProcessStartupAllowance: allowance,
		Transport: transport, Info: mcp.Implementation{Name: "agentwire-check", Version: "1"},
	}
	probes := []stdioProbe{
		{"unknown method", ruleUnknown, c.checkUnknownMethod},
		{"not JSON", ruleNotJSON, c.checkNotJSON},
		{"large request", ruleLarge, c.checkLargeRequest},
		{"concurrency", ruleConcurrent, c.checkConcurrency},
	}
	if c.opts.callTools != callNone {
		probes = append(probes, stdioProbe{"call tools", ruleTools, c.checkCallTools})
	}
	probes = append(probes, stdioProbe{"cancellation", ruleCancel, c.checkCancellation})

	// A server that dies on the probe is restarted by the client (to go on
	// in legacy); this check reports it as a failure all the same.
	c.started = time.Now()
	sess, err := host.StartServer(c.ctx, cmd, c.mopts)
	if err != nil {
		c.eraFailed(err, probes)
		return
	}
	c.sess, c.procs, c.lastProc = sess, 1, sess.Client().Process()
	evidence := fmt.Sprintf("%s %s; probe %s in %s", sess.Era(), sess.ProtocolVersion(), sess.Probe(), millis(sess.ConnectDuration()))
	result := pass
	switch {
	case sess.Probe() == host.ProbeExit:
		result, evidence = fail, evidence+"; the server exited on the probe (it had to be restarted)"
	case sess.Probe() == host.ProbeTimeout:
		result, evidence = warn, evidence+"; silent until initialize: every modern client waits out its probe timeout"
	case sess.ConnectDuration() > c.opts.probeTimeout:
		evidence += fmt.Sprintf("; slow to start: past the %v probe timeout, within the startup allowance", c.opts.probeTimeout)
	}
	c.add("era", result, evidence, ruleEra)

	for _, p := range probes {
		if c.sess == nil || c.ctx.Err() != nil {
			reason := c.lost
			if c.sess != nil {
				reason = c.cutReason() // the server is shut down by finish
			}
			c.add(p.name, notRun, reason, p.rule)
			continue
		}
		from := len(c.results)
		state := p.run(p.rule)
		if c.cutShort(from) {
			continue // the next round ends the session
		}
		if c.sess == nil {
			continue // the probe lost the server and could not replace it
		}
		if state == "" {
			state = c.health()
		}
		if state != healthOK {
			c.replace(p.name, state, from)
		}
	}
	c.finish()
}

// eraFailed reports a connect that failed: the era row with what was seen,
// every probe not run, and only the rows that have evidence.
func (c *checker) eraFailed(err error, probes []stdioProbe) {
	var ce *host.ConnectError
	var proc *process.Process
	evidence := "the server did not start: " + err.Error()
	if errors.As(err, &ce) {
		evidence = fmt.Sprintf("probe %s after %s: %v", ce.Probe, millis(ce.Duration), err)
		if ce.Client != nil {
			proc = ce.Client.Process()
		}
	}
	if proc != nil && !strings.Contains(evidence, "stderr") {
		if last := lastLine(proc.StderrTail()); last != "" {
			evidence += fmt.Sprintf("; last stderr line %q", clip(last, 120))
		}
	}
	c.add("era", fail, evidence, ruleEra)
	for _, p := range probes {
		c.add(p.name, notRun, "no MCP session (the era check failed)", p.rule)
	}
	c.hygiene()
	if proc != nil {
		c.stderrUse(proc)
	} else {
		c.add("stderr use", notRun, "no server process", ruleStderr)
	}
	var lost *client.ConnectionLostError
	switch {
	case ce == nil || ce.Shutdown.Outcome == "":
		c.add("shutdown", notRun, "no server process to shut down", ruleShutdown)
	case errors.As(err, &lost) && lost.Exit != nil:
		c.add("shutdown", notRun, "the server exited by itself during the handshake ("+lost.Exit.Status+")", ruleShutdown)
	default:
		c.shutdown(ce.Shutdown)
	}
}

// replace ends the current server, which a probe left dead or silent, and
// starts a fresh one for the rest of the battery. A death is the probe's
// doing only if a fresh process, sent nothing but pings, outlives the
// dead one's lifetime: one that dies too dies by itself, and then the rows
// from "from" on are not the probe's failure.
func (c *checker) replace(after, state string, from int) {
	old := c.sess
	c.sess = nil
	var what, status string
	lifetime := time.Since(c.started)
	if state == healthDead {
		status = deathNote(old.Client().Process())
		short := status
		if i := strings.Index(short, "; last stderr line"); i >= 0 {
			short = short[:i] // the probe's row quotes it
		}
		what = fmt.Sprintf("the server died on %q (%s, %s after it started)", after, short, millis(lifetime))
		old.Close()
	} else {
		shut := c.closeBounded(old)
		what = fmt.Sprintf("the server stopped answering after %q (still running; shut down: %s in %s)", after, shut.Outcome, millis(shut.Duration))
	}
	switch {
	case c.restarts >= maxRestarts:
		c.lost = fmt.Sprintf("%s, and %d fresh processes have been used up", what, maxRestarts)
		c.add("restart", info, c.lost+": the checks below are not run", ruleRestart)
		return
	case c.ctx.Err() != nil:
		c.lost = what + ", and " + c.cutReason()
		c.add("restart", info, c.lost, ruleRestart)
		return
	}
	c.restarts++
	c.started = time.Now()
	sess, err := host.StartServer(c.ctx, c.cmd, c.mopts)
	if err != nil {
		c.lost = fmt.Sprintf("%s, and a fresh process did not connect: %v", what, err)
		c.add("restart", info, c.lost, ruleRestart)
		return
	}
	c.sess, c.lastProc = sess, sess.Client().Process()
	c.procs++
	control := ""
	if state == healthDead && lifetime <= maxControl {
		// The control: leave the fresh process alone for longer than the
		// dead one lived.
		wait := 2*lifetime + 100*time.Millisecond
		select {
		case <-time.After(time.Until(c.started.Add(wait))):
		case <-c.ctx.Done():
		}
		if c.ctx.Err() == nil {
			if c.health() == healthDead {
				c.diesByItself(after, status, lifetime, from)
				return
			}
			control = fmt.Sprintf("; left alone, it outlived that (%s): the death was the probe's doing", millis(time.Since(c.started)))
		}
	}
	c.add("restart", info, fmt.Sprintf("%s: the checks below ran on a fresh process (#%d, %s %s, connected in %s%s)",
		what, c.procs, sess.Era(), sess.ProtocolVersion(), millis(sess.ConnectDuration()), control), ruleRestart)
}

// maxControl is the longest lifetime the control of replace waits out.
const maxControl = 2 * time.Second

// diesByItself reports a server that exits soon after it starts, whatever
// it is sent: the probe that was running is not blamed, and nothing more
// is run.
func (c *checker) diesByItself(after, status string, lifetime time.Duration, from int) {
	second := deathNote(c.sess.Client().Process())
	secondLife := time.Since(c.started)
	c.sess.Close()
	c.sess = nil
	for i := from; i < len(c.results); i++ {
		if r := &c.results[i]; r.Result == fail || r.Result == warn {
			r.Result, r.Evidence = notRun, fmt.Sprintf("the server died while this ran, but it dies by itself (see lifetime): %s", r.Evidence)
		}
	}
	c.add("lifetime", fail, fmt.Sprintf("the server exits by itself soon after it starts: process #%d after %s (during %q: %s), process #%d, sent nothing but pings, was dead when looked at %s after its start (%s)",
		c.procs-1, millis(lifetime), after, status, c.procs, millis(secondLife), second), ruleLifetime)
	c.lost = fmt.Sprintf("the server exits by itself about %s after it starts", millis(lifetime))
}

// finish shuts the last server down and reports stdout, stderr and the
// ladder.
func (c *checker) finish() {
	if c.sess == nil {
		c.hygiene()
		c.stderrUse(c.lastProc)
		c.add("shutdown", notRun, "no running server to shut down: "+c.lost, ruleShutdown)
		return
	}
	proc := c.sess.Client().Process()
	exitedBefore := exited(proc)
	shut := c.closeBounded(c.sess)
	c.sess = nil
	c.hygiene()
	c.stderrUse(proc)
	// Past the deadline the server is killed, whatever step the ladder
	// was at, so its outcome says nothing; a first signal lets the ladder
	// run its course, which is evidence.
	if c.ctx.Err() != nil && errors.Is(context.Cause(c.ctx), context.DeadlineExceeded) {
		c.add("shutdown", notRun, c.cutReason()+": the server was killed without the ladder", ruleShutdown)
		return
	}
	if exitedBefore {
		c.add("shutdown", notRun, "the server had exited by itself before the shutdown ("+deathNote(proc)+")", ruleShutdown)
		return
	}
	c.shutdown(shut)
}

// closeBounded runs the shutdown ladder, which may not outlast the run:
// past the deadline the server is killed.
func (c *checker) closeBounded(sess *host.Session) process.ShutdownResult {
	done := make(chan process.ShutdownResult, 1)
	go func() { done <- sess.Close() }()
	select {
	case shut := <-done:
		return shut
	case <-ladderCutShort(c.ctx): // the deadline or a second signal; a first signal lets the ladder run
		if p := sess.Client().Process(); p != nil {
			p.Kill()
		}
		return <-done
	}
}

func exited(p *process.Process) bool {
	if p == nil {
		return false
	}
	select {
	case <-p.Exited():
		return true
	default:
		return false
	}
}

// deathNote says how a process ended: its status and last stderr line.
func deathNote(p *process.Process) string {
	if p == nil {
		return "no process"
	}
	t := time.NewTimer(time.Second)
	defer t.Stop()
	select {
	case <-p.Exited():
	case <-t.C:
		return "the connection is gone; the process is still running"
	}
	e := p.ExitError()
	if e == nil {
		return "exited"
	}
	note := e.Status
	if last := lastLine(e.StderrTail); last != "" {
		note += fmt.Sprintf("; last stderr line %q", clip(last, 120))
	}
	return note
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	return s
}

// hygiene reports stdout pollution over the whole run, the shutdown
// included. Without a session there is no evidence of a clean stdout.
func (c *checker) hygiene() {
	c.mu.Lock()
	bad, n := append([]string(nil), c.violations...), c.violated
	c.mu.Unlock()
	switch {
	case n > 0:
		c.add("stdout hygiene", fail, fmt.Sprintf("%d non-protocol line(s): %s", n, quote(bad, 3)), ruleHygiene)
	case c.procs == 0:
		c.add("stdout hygiene", notRun, "no MCP session was established: stdout never carried a conversation to judge (no stray line either)", ruleHygiene)
	case c.procs == 1:
		c.add("stdout hygiene", pass, "only protocol messages on stdout over the whole run", ruleHygiene)
	default:
		c.add("stdout hygiene", pass, fmt.Sprintf("only protocol messages on stdout over the whole run (%d processes)", c.procs), ruleHygiene)
	}
}

func (c *checker) stderrUse(proc *process.Process) {
	if proc == nil {
		c.add("stderr use", notRun, "no server process", ruleStderr)
		return
	}
	tail := strings.TrimSpace(proc.StderrTail())
	ev := "nothing written to stderr"
	if tail != "" {
		lines := strings.Split(tail, "\n")
		ev = fmt.Sprintf("%d line(s) in the tail; last: %q", len(lines), clip(lines[len(lines)-1], 120))
	}
	c.add("stderr use", pass, "informational: "+ev, ruleStderr)
}

func (c *checker) shutdown(shut process.ShutdownResult) {
	ladder := fmt.Sprintf("%s in %s (grace %v)", shut.Outcome, millis(shut.Duration), c.opts.grace)
	if c.procs > 1 {
		ladder += fmt.Sprintf(" (process #%d)", c.procs)
	}
	switch shut.Outcome {
	case process.Exited:
		c.add("shutdown", pass, ladder+": exited on stdin EOF", ruleShutdown)
	case process.Terminated:
		c.add("shutdown", warn, ladder+": ignored stdin EOF", ruleShutdown)
	default:
		c.add("shutdown", fail, ladder+": ignored stdin EOF and SIGTERM", ruleShutdown)
	}
}

// health says whether the server still answers: healthOK, healthDead (it
// exited or the connection is gone) or healthSilent (running, not
// answering within --request-timeout).
func (c *checker) health() string {
	sess := c.sess
	if exited(sess.Client().Process()) {
		return healthDead
	}
	ctx, cancel := c.step(c.opts.requestTimeout)
	defer cancel()
	_, err := sess.Request(ctx, pingMethod(sess), nil)
	var je *jsonrpc.Error
	switch {
	case err == nil || errors.As(err, &je) || errors.Is(err, mcp.ErrInputRequired):
		return healthOK
	case errors.Is(err, client.ErrConnectionLost) || exited(sess.Client().Process()):
		return healthDead
	}
	return healthSilent
}

// pingMethod is a cheap request in the server's era (ping is gone in
// 2026-07-28).
func pingMethod(sess *host.Session) string {
	if sess.Era() == mcp.Modern {
		return "tools/list"
	}
	return "ping"
}

// noAnswer is the evidence for a request that got no answer, by what the
// server does now.
func (c *checker) noAnswer(what string, err error) (result, evidence, state string) {
	state = c.health()
	switch state {
	case healthDead:
		return fail, fmt.Sprintf("the server died on %s (%s)", what, deathNote(c.sess.Client().Process())), state
	case healthSilent:
		return warn, fmt.Sprintf("no answer to %s (%v), and the server answers nothing now (still running)", what, err), state
	}
	return fail, fmt.Sprintf("no answer to %s (%v), though the server answers other requests", what, err), state
}

func (c *checker) checkUnknownMethod(rule string) string {
	ctx, cancel := c.step(c.opts.requestTimeout)
	defer cancel()
	t0 := time.Now()
	_, err := c.sess.Request(ctx, "agentwire/no-such-method", nil)
	var je *jsonrpc.Error
	switch {
	case errors.As(err, &je) && je.Code == jsonrpc.CodeMethodNotFound:
		c.add("unknown method", pass, fmt.Sprintf("-32601 %q in %s", clip(je.Message, 80), millis(time.Since(t0))), rule)
	case errors.As(err, &je):
		c.add("unknown method", warn, fmt.Sprintf("answered %d %q instead of -32601", je.Code, clip(je.Message, 80)), rule)
	case err == nil:
		c.add("unknown method", fail, "agentwire/no-such-method succeeded", rule)
	default:
		result, ev, state := c.noAnswer("agentwire/no-such-method", err)
		c.add("unknown method", result, ev, rule)
		return state
	}
	return ""
}

func (c *checker) checkNotJSON(rule string) string {
	proc := c.sess.Client().Process()
	before := c.sess.Client().Stats().UnknownResponses
	// Nothing else is being written now, so the line cannot split a message.
	if _, err := io.WriteString(proc.Stdin(), "this is not json\n"); err != nil {
		state := c.health()
		if state == healthDead {
			c.add("not JSON", notRun, "could not write the line: the server is gone ("+deathNote(proc)+")", rule)
		} else {
			c.add("not JSON", notRun, "could not write the line: "+err.Error(), rule)
		}
		return state
	}
	t0 := time.Now()
	state := c.health()
	waited := time.Since(t0)
	time.Sleep(50 * time.Millisecond)
	answered := c.sess.Client().Stats().UnknownResponses > before
	switch {
	case state == healthDead:
		c.add("not JSON", fail, "the server died after a line that is not JSON ("+deathNote(proc)+")", rule)
	case state == healthSilent:
		c.add("not JSON", warn, fmt.Sprintf("the server stopped answering after a line that is not JSON (nothing for %s; still running)", millis(waited)), rule)
	case answered:
		c.add("not JSON", pass, "answered with an error (id null) and kept serving", rule)
	default:
		c.add("not JSON", warn, "no -32700 reply, but kept serving", rule)
	}
	return state
}

func (c *checker) checkLargeRequest(rule string) string {
	ctx, cancel := c.step(2 * c.opts.requestTimeout)
	defer cancel()
	pad := strings.Repeat("x", 1<<20+1024)
	t0 := time.Now()
	_, err := c.sess.Request(ctx, "tools/list", map[string]any{"_meta": map[string]any{"dev.agentwire/padding": pad}})
	var je *jsonrpc.Error
	switch {
	case err == nil:
		c.add("large request", pass, "a 1 MiB request was answered in "+millis(time.Since(t0)), rule)
	case errors.As(err, &je):
		c.add("large request", pass, fmt.Sprintf("a 1 MiB request was refused with %d %q", je.Code, clip(je.Message, 80)), rule)
	default:
		result, ev, state := c.noAnswer("a 1 MiB request", err)
		if result == fail && state == healthOK {
			result = warn // answers small requests, not this one
		}
		c.add("large request", result, ev, rule)
		return state
	}
	return ""
}

func (c *checker) checkConcurrency(rule string) string {
	ctx, cancel := c.step(2 * c.opts.requestTimeout)
	defer cancel()
	var wg sync.WaitGroup
	errs := make([]error, 2)
	sess := c.sess
	t0 := time.Now()
	for i := range 2 {
		wg.Go(func() {
			_, errs[i] = sess.Request(ctx, pingMethod(sess), nil)
		})
	}
	wg.Wait()
	took := time.Since(t0)
	var msgs []string
	var je *jsonrpc.Error
	for _, err := range errs {
		if err != nil && !errors.As(err, &je) {
			msgs = append(msgs, strings.ReplaceAll(err.Error(), "\n", " "))
		}
	}
	if len(msgs) == 0 {
		c.add("concurrency", pass, fmt.Sprintf("two %s requests in flight, both answered in %s", pingMethod(sess), millis(took)), rule)
		return ""
	}
	state := c.health()
	switch state {
	case healthDead:
		c.add("concurrency", fail, "the server died with two requests in flight ("+deathNote(sess.Client().Process())+")", rule)
	case healthSilent:
		c.add("concurrency", fail, "two requests in flight: "+strings.Join(msgs, "; ")+"; the server answers nothing now (still running)", rule)
	default:
		c.add("concurrency", fail, "two requests in flight: "+strings.Join(msgs, "; "), rule)
	}
	return state
}

func (c *checker) checkCancellation(rule string) string {
	sess := c.sess
	tool, args := c.opts.slowTool, c.opts.slowArgs
	if tool == "" {
		// Without a slow tool, check what every server must survive: a
		// cancellation for a request that has already finished.
		ctx, cancel := c.step(c.opts.requestTimeout)
		defer cancel()
		sess.Client().Notify(ctx, "notifications/cancelled", map[string]any{"requestId": 987654321, "reason": "agentwire check"})
		state := c.health()
		switch state {
		case healthDead:
			c.add("cancellation", fail, "the server died after a cancellation for a finished request ("+deathNote(sess.Client().Process())+")", rule)
		case healthSilent:
			c.add("cancellation", warn, "the server stopped answering after a cancellation for a finished request", rule)
		default:
			c.add("cancellation", pass, "a cancellation for a finished request was ignored, and the server kept answering (give --slow-tool to cancel a running one)", rule)
		}
		return state
	}
	before := sess.Client().Stats().LateResponses
	ctx, cancel := c.step(300 * time.Millisecond)
	_, err := sess.CallTool(ctx, tool, args)
	cancel()
	if err == nil || !errors.Is(err, context.DeadlineExceeded) {
		if err != nil && !isAnswer(err) {
			result, ev, state := c.noAnswer("tools/call "+tool, err)
			c.add("cancellation", result, ev, rule)
			return state
		}
		c.add("cancellation", warn, fmt.Sprintf("%s finished within 300 ms (%s): nothing to cancel", tool, answerNote(err)), rule)
		return ""
	}
	time.Sleep(time.Second)
	late := sess.Client().Stats().LateResponses - before
	state := c.health()
	switch {
	case state == healthDead:
		c.add("cancellation", fail, "the server died after a cancellation ("+deathNote(sess.Client().Process())+")", rule)
	case state == healthSilent:
		c.add("cancellation", warn, "the server stopped answering after a cancellation", rule)
	case late > 0:
		c.add("cancellation", warn, fmt.Sprintf("%s cancelled after 300 ms; a response came afterwards", tool), rule)
	default:
		c.add("cancellation", pass, fmt.Sprintf("%s cancelled after 300 ms; no response in the next second, and the server kept answering", tool), rule)
	}
	return state
}

// isAnswer says whether err is the server's answer (a JSON-RPC error, or
// input_required) rather than the lack of one.
func isAnswer(err error) bool {
	var je *jsonrpc.Error
	return errors.As(err, &je) || errors.Is(err, mcp.ErrInputRequired)
}

func answerNote(err error) string {
	var je *jsonrpc.Error
	switch {
	case err == nil:
		return "a result"
	case errors.As(err, &je):
		return fmt.Sprintf("error %d %q", je.Code, clip(je.Message, 80))
	case errors.Is(err, mcp.ErrInputRequired):
		return "input_required"
	}
	return err.Error()
}
