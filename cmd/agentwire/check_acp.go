package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/agentwire/agentwire/acp"
	"github.com/agentwire/agentwire/acp/acpclient"
	"github.com/agentwire/agentwire/client"
	"github.com/agentwire/agentwire/jsonrpc"
	"github.com/agentwire/agentwire/process"
)

// The rules the ACP rows cite.
const (
	ruleACPInit          = "ACP initialize: the first request; the agent answers protocolVersion 1 (or the client disconnects)"
	ruleACPAuth          = "ACP: authMethods in the initialize result; authenticate takes one of their ids"
	ruleACPUnknown       = "JSON-RPC 2.0: -32601 for an unknown method"
	ruleACPNotJSON       = "JSON-RPC 2.0: -32700 (id null) for a line that is not JSON; the stream goes on"
	ruleACPBatch         = "ACP has no batches: an array gets one error, id null (JSON-RPC: -32600 for an empty one)"
	ruleACPNew           = "ACP session/new: a sessionId; the session's updates come after the result"
	ruleACPUnknownSess   = "ACP: a request naming an unknown session is an error (-32002 resource not found)"
	ruleACPPrompt        = "ACP session/prompt: a stopReason, after every update of the turn"
	ruleACPControl       = "ACP: control requests (set_mode, session/new) are answered while a prompt runs"
	ruleACPCancel        = "ACP session/cancel: the turn MUST end with stopReason cancelled, not an error"
	ruleACPCancelRequest = "ACP $/cancel_request: the request ends (stopReason cancelled, or -32800)"
	ruleACPUndeclared    = "ACP: an agent calls only the client methods the client declared in initialize"
	ruleACPEOF           = "ACP stdio: at end of input, answer the prompts in flight (cancelled), then exit"
	ruleACPHygiene       = "ACP stdio: stdout carries only ACP messages"
	ruleACPStderr        = "ACP stdio: stderr is for logs, never an error by itself"
	ruleACPShutdown      = "ACP stdio shutdown: exit on stdin EOF, before SIGTERM and SIGKILL"
)

const checkACPHelp = `usage: agentwire check --acp [flags] -- CMD [ARGS...]

Runs a fixed battery against an ACP agent, from the outside, and prints one
row per check: its result, what was seen and the rule. Rows: initialize,
auth methods (and authenticate with --auth), unknown method, a line that is
not JSON, a batch, session/new, an unknown session, a prompt (--acp-prompt),
a control request during a prompt, session/cancel, $/cancel_request,
undeclared client methods, EOF with a prompt in flight, stdout hygiene,
stderr use and the shutdown ladder. The probes during a prompt need a prompt
that takes a while (--slow-prompt; "slow 20" for agentwire serve acp):
without one they are "not run". An agent that requires authentication gets
"not run" for the session rows, unless --auth names a method. The client
declares files (rooted in a fresh temporary directory), terminals and
nothing else. Exit 0 when nothing failed, 1 when something did, 2 on bad
usage.

Flags:
`

// acpFlagGiven reports whether check's arguments ask for the ACP battery.
func acpFlagGiven(args []string) bool {
	for _, a := range args {
		switch a {
		case "--":
			return false
		case "--acp", "-acp", "--acp=true", "-acp=true":
			return true
		}
	}
	return false
}

// runCheckACP is `agentwire check --acp`.
func runCheckACP(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("check", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Bool("acp", true, "check an ACP agent")
	asJSON := fs.Bool("json", false, "print one JSON document instead of a table")
	timeout := fs.Duration("timeout", 60*time.Second, "bound on the whole run")
	grace := fs.Duration("grace", 2*time.Second, "each wait of the shutdown ladder")
	requestTimeout := fs.Duration("request-timeout", 5*time.Second, "how long each probe waits for an answer")
	promptText := fs.String("acp-prompt", "hi", "the prompt of the prompt check")
	slow := fs.String("slow-prompt", "", "a prompt that takes a while (default the --acp-prompt)")
	auth := fs.String("auth", "", "authenticate with this method before session/new")
	fs.Usage = func() {}
	if code, done := parseCheckFlags(fs, args, checkACPHelp, "agentwire check --acp --help", stdout, stderr); done {
		return code
	}
	argv := fs.Args()
	if len(argv) == 0 {
		fmt.Fprintln(stderr, "agentwire check --acp: missing the agent command (agentwire check --acp [flags] -- CMD [ARGS...])")
		return 2
	}
	if *timeout <= 0 || *grace <= 0 || *requestTimeout <= 0 {
		fmt.Fprintln(stderr, "agentwire check: durations must be positive")
		return 2
	}
	if *slow == "" {
		*slow = *promptText
	}
	intr := watchInterrupts()
	defer intr.stop()
	start := time.Now()
	ctx, cancel := context.WithTimeout(intr.ctx, *timeout)
	defer cancel()
	c := &checker{ctx: ctx, opts: checkOptions{timeout: *timeout, grace: *grace, requestTimeout: *requestTimeout}}
	ac := &acpChecker{checker: c, prompt: *promptText, slow: *slow, auth: *auth}
	ac.run(process.Command{Path: argv[0], Args: argv[1:]})
	rep := checkReport{Server: argv, Passed: true, Checks: c.results, Seconds: time.Since(start).Seconds()}
	for _, r := range c.results {
		if r.Result == fail {
			rep.Passed = false
		}
	}
	printCheckReport(stdout, rep, *asJSON)
	if code := intr.code(); code != 0 {
		fmt.Fprintf(stderr, "agentwire check: interrupted by %s\n", signalName(intr.signal()))
		return code
	}
	if !rep.Passed {
		return 1
	}
	return 0
}

// printCheckReport prints the rows as check does: a table and the verdict,
// or one JSON document.
func printCheckReport(stdout io.Writer, rep checkReport, asJSON bool) {
	if asJSON {
		b, _ := json.MarshalIndent(rep, "", "  ")
		fmt.Fprintf(stdout, "%s\n", b)
		return
	}
	tw := tabwriter.NewWriter(stdout, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "CHECK\tRESULT\tEVIDENCE\tRULE")
	skipped := 0
	for _, r := range rep.Checks {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", r.Check, r.Result, r.Evidence, r.Rule)
		if r.Result == notRun {
			skipped++
		}
	}
	tw.Flush()
	verdict := "passed"
	if !rep.Passed {
		verdict = "FAILED"
	}
	fmt.Fprintf(stdout, "\n%s in %.1f s", verdict, rep.Seconds)
	if skipped > 0 {
		fmt.Fprintf(stdout, "; %d check(s) not run", skipped)
	}
	fmt.Fprintln(stdout)
}

// acpChecker runs the ACP battery against one agent process. The client
// talks to the agent over the process's pipes through a wire tap, which
// sees every line both ways in order: what the typed client hides (a
// reply without an id, an update after a response) is judged there.
type acpChecker struct {
	*checker
	prompt, slow, auth string

	proc *process.Process
	conn *acpclient.Conn
	tap  *wireTap
	sess *acpclient.Session
	dir  string // the session's cwd and root: a fresh temporary directory
	// noSession is why the session rows are not run ("" while they can).
	noSession string
	// noSlow is why the rows during a prompt are not run.
	noSlow string
}

func (c *acpChecker) run(cmd process.Command) {
	var err error
	if c.dir, err = os.MkdirTemp("", "agentwire-check-acp-"); err != nil {
		c.add("initialize", notRun, "no temporary directory: "+err.Error(), ruleACPInit)
		return
	}
	defer os.RemoveAll(c.dir)
	c.proc, err = process.Start(cmd, &process.Options{Grace: c.opts.grace, Logger: discard})
	if err != nil {
		c.add("initialize", fail, "the agent did not start: "+err.Error(), ruleACPInit)
		c.notRunFrom("the agent did not start")
		return
	}
	c.procs = 1
	c.tap = newWireTap(func(line []byte) {
		c.mu.Lock()
		c.violated++
		if len(c.violations) < 3 {
			c.violations = append(c.violations, string(line))
		}
		c.mu.Unlock()
	})
	opts := &acpclient.Options{
		Info:               acp.Implementation{Name: "agentwire-check", Version: "1"},
		Logger:             discard,
		Terminals:          &acpclient.TerminalOptions{KillGrace: c.opts.grace},
		Permissions:        acpclient.DenyAll,
		CancelGrace:        c.opts.requestTimeout,
		InitTimeout:        max(2*c.opts.requestTimeout, 30*time.Second),
		IgnoreCapabilities: true,
		Transport:          &client.Options{Logger: discard},
	}
	ictx, cancel := context.WithTimeout(c.ctx, opts.InitTimeout)
	t0 := time.Now()
	c.conn, err = acpclient.New(ictx, io.TeeReader(c.proc.Stdout(), c.tap.in()), &tapWriter{w: c.proc.Stdin(), tap: c.tap}, opts)
	cancel()
	if !c.initialized(err, time.Since(t0)) {
		c.finish()
		return
	}
	probes := []struct {
		name, rule string
		run        func(rule string)
	}{
		{"auth methods", ruleACPAuth, c.checkAuth},
		{"unknown method", ruleACPUnknown, c.checkUnknown},
		{"not JSON", ruleACPNotJSON, c.checkNotJSON},
		{"batch", ruleACPBatch, c.checkBatch},
		{"session/new", ruleACPNew, c.checkNewSession},
		{"unknown session", ruleACPUnknownSess, c.checkUnknownSession},
		{"prompt", ruleACPPrompt, c.checkPrompt},
		{"control during prompt", ruleACPControl, c.checkControl},
		{"cancel", ruleACPCancel, c.checkCancel},
		{"$/cancel_request", ruleACPCancelRequest, c.checkCancelRequest},
		{"undeclared methods", ruleACPUndeclared, c.checkUndeclared},
		{"EOF behaviour", ruleACPEOF, c.checkEOF},
	}
	for _, p := range probes {
		if c.lost != "" || c.ctx.Err() != nil {
			reason := c.lost
			if reason == "" {
				reason = c.cutReason()
			}
			c.add(p.name, notRun, reason, p.rule)
			continue
		}
		from := len(c.results)
		p.run(p.rule)
		c.cutShort(from)
		if c.lost == "" && exited(c.proc) && !c.eofSent() { // after EOF an exit is what is asked for
			c.lost = fmt.Sprintf("the agent died on %q (%s)", p.name, deathNote(c.proc))
			for i := from; i < len(c.results); i++ {
				if r := &c.results[i]; r.Result != fail {
					r.Result, r.Evidence = fail, c.lost+"; "+r.Evidence
				}
			}
		}
	}
	c.finish()
}

// initialized reports the initialize row; false ends the battery.
func (c *acpChecker) initialized(err error, took time.Duration) bool {
	var ve *acpclient.VersionError
	var je *jsonrpc.Error
	switch {
	case err == nil:
		info := c.conn.AgentInfo()
		who := strings.TrimSpace(info.Name + " " + info.Version)
		if who == "" {
			who = "no agentInfo"
		}
		c.add("initialize", pass, fmt.Sprintf("%s, protocol version %d, in %s", who, c.conn.ProtocolVersion(), millis(took)), ruleACPInit)
		return true
	case errors.As(err, &ve):
		c.add("initialize", fail, fmt.Sprintf("the agent answered protocol version %d, not 1", ve.Agent), ruleACPInit)
	case errors.As(err, &je):
		c.add("initialize", fail, "initialize answered "+string(jsonrpc.AppendError(nil, je)), ruleACPInit)
	case exited(c.proc):
		c.add("initialize", fail, "the agent exited before answering initialize ("+deathNote(c.proc)+")", ruleACPInit)
	default:
		c.add("initialize", fail, fmt.Sprintf("no answer to initialize in %s: %v", millis(took), err), ruleACPInit)
	}
	c.cutShort(len(c.results) - 1)
	c.lost = "initialize failed"
	c.notRunFrom(c.lost)
	return false
}

// notRunFrom adds the protocol rows after initialize as not run.
func (c *acpChecker) notRunFrom(reason string) {
	for _, r := range []struct{ name, rule string }{
		{"auth methods", ruleACPAuth}, {"unknown method", ruleACPUnknown}, {"not JSON", ruleACPNotJSON},
		{"batch", ruleACPBatch}, {"session/new", ruleACPNew}, {"unknown session", ruleACPUnknownSess},
		{"prompt", ruleACPPrompt}, {"control during prompt", ruleACPControl}, {"cancel", ruleACPCancel},
		{"$/cancel_request", ruleACPCancelRequest}, {"undeclared methods", ruleACPUndeclared}, {"EOF behaviour", ruleACPEOF},
	} {
		c.add(r.name, notRun, reason, r.rule)
	}
}

// finish closes the connection, runs the ladder and reports stdout,
// stderr and the shutdown.
func (c *acpChecker) finish() {
	if c.conn != nil {
		c.closeConn()
	}
	if c.proc == nil {
		c.add("stdout hygiene", notRun, "no agent process", ruleACPHygiene)
		c.add("stderr use", notRun, "no agent process", ruleACPStderr)
		c.add("shutdown", notRun, "no agent process to shut down", ruleACPShutdown)
		return
	}
	exitedBefore := exited(c.proc) && !c.eofSent()
	shut := c.shutdownBounded()
	c.hygiene()
	c.results[len(c.results)-1].Rule = ruleACPHygiene
	c.stderrUse(c.proc)
	c.results[len(c.results)-1].Rule = ruleACPStderr
	switch {
	case c.ctx.Err() != nil && errors.Is(context.Cause(c.ctx), context.DeadlineExceeded):
		c.add("shutdown", notRun, c.cutReason()+": the agent was killed without the ladder", ruleACPShutdown)
	case exitedBefore:
		c.add("shutdown", notRun, "the agent had exited by itself before the shutdown ("+deathNote(c.proc)+")", ruleACPShutdown)
	default:
		c.shutdown(shut)
		c.results[len(c.results)-1].Rule = ruleACPShutdown
	}
}

// eofSent reports whether the EOF row closed the agent's input (then an
// exit before the ladder is the behaviour asked for).
func (c *acpChecker) eofSent() bool { return c.tap.eof() }

// closeConn ends the client side; the agent's input closes with it.
func (c *acpChecker) closeConn() {
	done := make(chan struct{})
	go func() { c.conn.Close(); close(done) }()
	select {
	case <-done:
	case <-ladderCutShort(c.ctx):
		c.proc.Kill()
		<-done
	}
}

// shutdownBounded runs the ladder, which may not outlast the run.
func (c *acpChecker) shutdownBounded() process.ShutdownResult {
	done := make(chan process.ShutdownResult, 1)
	go func() { done <- c.proc.Shutdown() }()
	select {
	case shut := <-done:
		return shut
	case <-ladderCutShort(c.ctx):
		c.proc.Kill()
		return <-done
	}
}

// alive says whether the agent still answers a request: healthOK,
// healthDead or healthSilent.
// unanswered judges a probe that got no answer: a fail, or only a warn
// when the agent is still alive but silent.
func (c *acpChecker) unanswered() (result, state string) {
	state = c.alive()
	if state == healthSilent {
		return warn, state
	}
	return fail, state
}

func (c *acpChecker) alive() string {
	if exited(c.proc) {
		return healthDead
	}
	ctx, cancel := c.step(c.opts.requestTimeout)
	defer cancel()
	_, err := c.conn.Call(ctx, "agentwire/health-check", map[string]any{})
	var je *jsonrpc.Error
	switch {
	case err == nil || errors.As(err, &je):
		return healthOK
	case errors.Is(err, client.ErrConnectionLost) || exited(c.proc):
		return healthDead
	}
	return healthSilent
}

// dead marks the agent lost after a probe that left it dead or silent.
func (c *acpChecker) dead(what, state string) string {
	if state == healthDead {
		c.lost = fmt.Sprintf("the agent died on %s (%s)", what, deathNote(c.proc))
	} else {
		c.lost = fmt.Sprintf("the agent stopped answering after %s (still running)", what)
	}
	return c.lost
}

func (c *acpChecker) checkAuth(rule string) {
	ms := c.conn.AuthMethods()
	if len(ms) == 0 {
		c.add("auth methods", info, "none offered", rule)
	} else {
		var parts []string
		for _, m := range ms {
			switch m.Type {
			case "", "terminal":
				typ := m.Type
				if typ == "" {
					typ = "agent"
				}
				parts = append(parts, fmt.Sprintf("%s (%s)", m.ID, typ))
			default:
				parts = append(parts, fmt.Sprintf("%s (%s: a type this client does not know)", m.ID, m.Type))
			}
		}
		c.add("auth methods", info, strings.Join(parts, ", "), rule)
	}
	if c.auth == "" {
		return
	}
	ctx, cancel := c.step(c.opts.requestTimeout)
	defer cancel()
	if err := c.conn.Authenticate(ctx, c.auth); err != nil {
		c.add("authenticate", fail, fmt.Sprintf("authenticate %q: %s", c.auth, acpErrorText(err)), rule)
		return
	}
	c.add("authenticate", pass, fmt.Sprintf("authenticate %q succeeded", c.auth), rule)
}

func (c *acpChecker) checkUnknown(rule string) {
	ctx, cancel := c.step(c.opts.requestTimeout)
	defer cancel()
	t0 := time.Now()
	_, err := c.conn.Call(ctx, "agentwire/no-such-method", map[string]any{})
	var je *jsonrpc.Error
	switch {
	case errors.As(err, &je) && je.Code == jsonrpc.CodeMethodNotFound:
		c.add("unknown method", pass, fmt.Sprintf("-32601 %q in %s", clip(je.Message, 80), millis(time.Since(t0))), rule)
	case errors.As(err, &je):
		c.add("unknown method", warn, fmt.Sprintf("answered %d %q instead of -32601", je.Code, clip(je.Message, 80)), rule)
	case err == nil:
		c.add("unknown method", fail, "agentwire/no-such-method succeeded", rule)
	default:
		result, state := c.unanswered()
		c.add("unknown method", result, fmt.Sprintf("no answer to agentwire/no-such-method (%v): %s", err, c.dead("agentwire/no-such-method", state)), rule)
	}
}

// rawProbe writes a line that is not a request of the client's and
// returns the agent's replies to it: the responses that answer no id of
// ours, seen before the agent answered the next request.
func (c *acpChecker) rawProbe(row, line, rule string) ([]tapLine, bool) {
	mark := c.tap.mark()
	if _, err := io.WriteString(c.proc.Stdin(), line+"\n"); err != nil {
		c.add(row, notRun, "could not write the line: "+err.Error(), rule)
		return nil, false
	}
	state := c.alive()
	time.Sleep(50 * time.Millisecond)
	switch state {
	case healthDead:
		c.add(row, fail, fmt.Sprintf("the agent died after %q (%s)", line, deathNote(c.proc)), rule)
		c.dead(fmt.Sprintf("%q", line), state)
		return nil, false
	case healthSilent:
		c.add(row, warn, fmt.Sprintf("the agent stopped answering after %q (still running)", line), rule)
		c.dead(fmt.Sprintf("%q", line), state)
		return nil, false
	}
	var replies []tapLine
	for _, l := range c.tap.since(mark) {
		if !l.out && l.response && !l.idOurs() {
			replies = append(replies, l)
		}
	}
	return replies, true
}

func (c *acpChecker) checkNotJSON(rule string) {
	replies, ok := c.rawProbe("not JSON", "this is not json", rule)
	if !ok {
		return
	}
	switch {
	case len(replies) == 0:
		c.add("not JSON", warn, "no -32700 reply, but kept serving", rule)
	case !replies[0].hasID:
		c.add("not JSON", warn, fmt.Sprintf("an error without an id member (%s), and kept serving", clip(string(replies[0].raw), 120)), rule)
	case replies[0].code == jsonrpc.CodeParseError:
		c.add("not JSON", pass, "answered -32700 with id null and kept serving", rule)
	default:
		c.add("not JSON", warn, fmt.Sprintf("answered %s instead of -32700, and kept serving", clip(string(replies[0].raw), 120)), rule)
	}
}

func (c *acpChecker) checkBatch(rule string) {
	replies, ok := c.rawProbe("batch", "[]", rule)
	if !ok {
		return
	}
	switch {
	case len(replies) == 1 && replies[0].hasID && replies[0].code == jsonrpc.CodeInvalidRequest:
		c.add("batch", pass, "an empty batch got one -32600 with id null, and the agent kept serving", rule)
	case len(replies) == 0:
		c.add("batch", warn, "no reply to an empty batch, but kept serving", rule)
	default:
		var q []string
		for _, r := range replies {
			q = append(q, string(r.raw))
		}
		c.add("batch", warn, fmt.Sprintf("an empty batch got %d repl(ies): %s", len(replies), quote(q, 2)), rule)
	}
}

func (c *acpChecker) checkNewSession(rule string) {
	ctx, cancel := c.step(c.opts.requestTimeout)
	defer cancel()
	mark := c.tap.mark()
	t0 := time.Now()
	s, err := c.conn.NewSession(ctx, acpclient.SessionConfig{Cwd: c.dir})
	took := time.Since(t0)
	var ae *acpclient.AuthRequiredError
	switch {
	case errors.As(err, &ae):
		ids := []string{}
		for _, m := range ae.Methods {
			ids = append(ids, m.ID)
		}
		c.add("session/new", info, fmt.Sprintf("authentication required: %s (give --auth METHOD)", strings.Join(ids, ", ")), rule)
		c.noSession = "needs --auth (the agent requires authentication)"
		return
	case err != nil:
		c.add("session/new", fail, "session/new failed: "+acpErrorText(err), rule)
		c.noSession = "session/new failed"
		if !errors.As(err, new(*jsonrpc.Error)) {
			if state := c.alive(); state != healthOK {
				c.dead("session/new", state)
			}
		}
		return
	}
	c.sess = s
	early := 0
	for _, l := range c.tap.since(mark) {
		if l.response && l.sessionID == s.ID() {
			break
		}
		if l.method == acp.MethodUpdate && l.sessionID == s.ID() {
			early++
		}
	}
	ev := fmt.Sprintf("sessionId %q in %s", s.ID(), millis(took))
	if early > 0 {
		c.add("session/new", warn, fmt.Sprintf("%s; %d update(s) for it came before the result: a client that registers the session on the result drops them", ev, early), rule)
		return
	}
	c.add("session/new", pass, ev, rule)
}

func (c *acpChecker) checkUnknownSession(rule string) {
	ctx, cancel := c.step(c.opts.requestTimeout)
	defer cancel()
	_, err := c.conn.Call(ctx, acp.MethodPrompt, map[string]any{"sessionId": "agentwire-check-no-such-session",
		"prompt": []acp.ContentBlock{acp.TextBlock(c.prompt)}})
	var je *jsonrpc.Error
	switch {
	case errors.As(err, &je) && (je.Code == acp.CodeResourceNotFound || je.Code == jsonrpc.CodeInvalidParams):
		c.add("unknown session", pass, fmt.Sprintf("a prompt for a bogus session got %d %q", je.Code, clip(je.Message, 80)), rule)
	case errors.As(err, &je):
		c.add("unknown session", warn, fmt.Sprintf("a prompt for a bogus session got %d %q, not -32002", je.Code, clip(je.Message, 80)), rule)
	case err == nil:
		c.add("unknown session", fail, "a prompt for a bogus session succeeded", rule)
	default:
		result, state := c.unanswered()
		c.add("unknown session", result, fmt.Sprintf("no answer to a prompt for a bogus session (%v)", err), rule)
		if state != healthOK {
			c.dead("a prompt for a bogus session", state)
		}
	}
}

// sessionless adds a session row as not run when there is no session.
func (c *acpChecker) sessionless(row, rule string) bool {
	if c.sess != nil {
		return false
	}
	c.add(row, notRun, c.noSession, rule)
	return true
}

// known stop reasons of ACP v1.
var knownStops = map[acp.StopReason]bool{acp.EndTurn: true, acp.MaxTokens: true, acp.MaxTurnRequests: true, acp.Refusal: true, acp.Cancelled: true}

func (c *acpChecker) checkPrompt(rule string) {
	if c.sessionless("prompt", rule) {
		return
	}
	ctx, cancel := c.step(max(6*c.opts.requestTimeout, 30*time.Second))
	defer cancel()
	mark := c.tap.mark()
	t0 := time.Now()
	reason, err := c.sess.Prompt(ctx, acp.TextBlock(c.prompt))
	took := time.Since(t0)
	if err != nil {
		c.add("prompt", info, fmt.Sprintf("%q: %s", clip(c.prompt, 40), acpErrorText(err)), rule)
		c.noSession = "the prompt failed"
		c.sess = nil
		return
	}
	time.Sleep(200 * time.Millisecond) // time for what a careless agent sends after the response
	updates, late := 0, 0
	answered := false
	for _, l := range c.tap.since(mark) {
		switch {
		case !l.out && l.response && l.stopReason != "":
			answered = true
		case l.method == acp.MethodUpdate && l.sessionID == c.sess.ID():
			if answered {
				late++
			} else {
				updates++
			}
		}
	}
	ev := fmt.Sprintf("%q: stopReason %s after %d update(s) in %s", clip(c.prompt, 40), reason, updates, millis(took))
	switch {
	case late > 0:
		c.add("prompt", fail, fmt.Sprintf("%s; %d update(s) came after the response (a client has returned by then)", ev, late), rule)
	case !knownStops[reason]:
		c.add("prompt", warn, ev+": not a stop reason of ACP v1", rule)
	default:
		c.add("prompt", pass, ev, rule)
	}
}

// slowTurn is a prompt started in the background.
type slowTurn struct {
	cancel context.CancelFunc
	done   chan struct{}
	reason acp.StopReason
	err    error
	at     time.Time // when it returned
}

func (c *acpChecker) startSlow() *slowTurn {
	ctx, cancel := context.WithCancel(c.ctx)
	t := &slowTurn{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(t.done)
		t.reason, t.err = c.sess.Prompt(ctx, acp.TextBlock(c.slow))
		t.at = time.Now()
	}()
	return t
}

// ended says whether the turn returned within d.
func (t *slowTurn) ended(d time.Duration) bool {
	select {
	case <-t.done:
		return true
	case <-time.After(d):
		return false
	}
}

// stopSlow cancels a background turn and waits for it.
func (c *acpChecker) stopSlow(t *slowTurn) {
	if !t.ended(0) {
		ctx, cancel := c.step(c.opts.requestTimeout)
		c.sess.Cancel(ctx)
		cancel()
		if !t.ended(c.opts.requestTimeout) {
			t.cancel()
			<-t.done
		}
	}
	t.cancel()
}

// tooFast reports a slow prompt that ended within 200 ms: the rows during
// a prompt are then not run.
func (c *acpChecker) tooFast(row, rule string, t *slowTurn) bool {
	if !t.ended(200 * time.Millisecond) {
		return false
	}
	c.add(row, notRun, c.slowEndedAtOnce(), rule)
	return true
}

// slowEndedAtOnce records that the slow prompt is not slow, and says so.
func (c *acpChecker) slowEndedAtOnce() string {
	c.noSlow = fmt.Sprintf("the slow prompt %q ended within 200 ms (give --slow-prompt)", clip(c.slow, 40))
	return c.noSlow
}

// slowless adds a row that needs a running prompt as not run when there is
// no session, or the slow prompt was found not to be slow.
func (c *acpChecker) slowless(row, rule string) bool {
	if c.sessionless(row, rule) {
		return true
	}
	if c.noSlow != "" {
		c.add(row, notRun, c.noSlow, rule)
		return true
	}
	return false
}

func (c *acpChecker) checkControl(rule string) {
	if c.slowless("control during prompt", rule) {
		return
	}
	t := c.startSlow()
	defer c.stopSlow(t)
	if c.tooFast("control during prompt", rule, t) {
		return
	}
	ctx, cancel := c.step(c.opts.requestTimeout)
	defer cancel()
	what := "session/set_mode"
	t0 := time.Now()
	var err error
	if mode := c.sess.Mode(); mode != "" {
		err = c.sess.SetMode(ctx, mode)
	} else {
		what = "session/new"
		_, err = c.conn.NewSession(ctx, acpclient.SessionConfig{Cwd: c.dir})
	}
	answeredAt := time.Now()
	took := answeredAt.Sub(t0)
	var je *jsonrpc.Error
	if err != nil && !errors.As(err, &je) {
		c.add("control during prompt", fail, fmt.Sprintf("%s during a prompt: no answer in %s (%v)", what, millis(took), err), rule)
		return
	}
	promptDone := t.ended(0) && t.at.Before(answeredAt)
	switch {
	case promptDone:
		c.add("control during prompt", fail, fmt.Sprintf("%s waited behind a prompt: answered in %s, only after the prompt's response", what, millis(took)), rule)
	case took >= time.Second:
		c.add("control during prompt", warn, fmt.Sprintf("%s during a prompt answered in %s (before the prompt's response, but slowly)", what, millis(took)), rule)
	default:
		c.add("control during prompt", pass, fmt.Sprintf("%s during a prompt answered in %s, before the prompt's response", what, millis(took)), rule)
	}
}

func (c *acpChecker) checkCancel(rule string) {
	if c.slowless("cancel", rule) {
		return
	}
	t := c.startSlow()
	defer c.stopSlow(t)
	if c.tooFast("cancel", rule, t) {
		return
	}
	ctx, cancel := c.step(c.opts.requestTimeout)
	defer cancel()
	t0 := time.Now()
	c.sess.Cancel(ctx)
	if !t.ended(c.opts.requestTimeout) {
		c.add("cancel", fail, fmt.Sprintf("no answer to the prompt within %v of session/cancel", c.opts.requestTimeout), rule)
		return
	}
	took := millis(t.at.Sub(t0))
	switch {
	case t.err != nil:
		c.add("cancel", fail, fmt.Sprintf("the cancelled prompt was answered with an error (%s) in %s: it MUST reply cancelled, not an error", acpErrorText(t.err), took), rule)
	case t.reason == acp.Cancelled:
		c.add("cancel", pass, "session/cancel 200 ms in: stopReason cancelled in "+took, rule)
	default:
		c.add("cancel", warn, fmt.Sprintf("session/cancel 200 ms in: stopReason %s in %s, not cancelled", t.reason, took), rule)
	}
}

func (c *acpChecker) checkCancelRequest(rule string) {
	if c.slowless("$/cancel_request", rule) {
		return
	}
	mark := c.tap.mark()
	ctx, cancel := context.WithTimeout(c.ctx, 200*time.Millisecond)
	_, err := c.conn.Call(ctx, acp.MethodPrompt, map[string]any{"sessionId": c.sess.ID(),
		"prompt": []acp.ContentBlock{acp.TextBlock(c.slow)}})
	cancel()
	if err == nil || !errors.Is(err, context.DeadlineExceeded) {
		if err == nil {
			c.add("$/cancel_request", notRun, c.slowEndedAtOnce(), rule)
		} else {
			c.add("$/cancel_request", warn, "the raw session/prompt failed at once: "+acpErrorText(err), rule)
		}
		return
	}
	t0 := time.Now()
	var id string
	for _, l := range c.tap.since(mark) {
		if l.out && l.method == acp.MethodPrompt {
			id = l.id
		}
	}
	deadline := time.Now().Add(c.opts.requestTimeout)
	for time.Now().Before(deadline) && c.ctx.Err() == nil {
		for _, l := range c.tap.since(mark) {
			if l.out || !l.response || l.id != id || id == "" {
				continue
			}
			took := millis(l.at.Sub(t0))
			switch {
			case l.stopReason == string(acp.Cancelled):
				c.add("$/cancel_request", pass, "$/cancel_request 200 ms into a prompt: stopReason cancelled in "+took, rule)
			case l.code == jsonrpc.CodeRequestCancelled:
				c.add("$/cancel_request", pass, "$/cancel_request 200 ms into a prompt: -32800 in "+took, rule)
			case l.stopReason != "":
				c.add("$/cancel_request", warn, fmt.Sprintf("ignored: the prompt went on and ended %s %s later", l.stopReason, took), rule)
			default:
				c.add("$/cancel_request", warn, fmt.Sprintf("answered %s", clip(string(l.raw), 120)), rule)
			}
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	c.add("$/cancel_request", warn, fmt.Sprintf("ignored: no answer to the prompt within %v of $/cancel_request", c.opts.requestTimeout), rule)
	// The prompt may still run: stop it the ACP way before the next probe.
	sctx, scancel := c.step(c.opts.requestTimeout)
	c.sess.Cancel(sctx)
	scancel()
}

// declaredMethods are the agent-to-client methods this client serves.
var declaredMethods = map[string]bool{
	acp.MethodUpdate: true, acp.MethodRequestPermission: true, acp.MethodCancelRequest: true,
	acp.MethodReadTextFile: true, acp.MethodWriteTextFile: true,
	acp.MethodTerminalCreate: true, acp.MethodTerminalOutput: true, acp.MethodTerminalWait: true,
	acp.MethodTerminalKill: true, acp.MethodTerminalRelease: true,
}

func (c *acpChecker) checkUndeclared(rule string) {
	called := map[string]int{}
	var undeclared []string
	for _, l := range c.tap.since(0) {
		if l.out || l.method == "" || l.method == acp.MethodUpdate {
			continue
		}
		if called[l.method] == 0 && !declaredMethods[l.method] && !strings.HasPrefix(l.method, "_") {
			undeclared = append(undeclared, l.method)
		}
		called[l.method]++
	}
	var seen []string
	for m, n := range called {
		seen = append(seen, fmt.Sprintf("%s ×%d", m, n))
	}
	sort.Strings(seen)
	switch {
	case len(undeclared) > 0:
		c.add("undeclared methods", fail, "the agent called what this client did not declare: "+strings.Join(undeclared, ", "), rule)
	case len(seen) > 0:
		c.add("undeclared methods", pass, "only declared methods called: "+strings.Join(seen, ", "), rule)
	default:
		c.add("undeclared methods", pass, "the agent called no client method beyond session/update", rule)
	}
}

func (c *acpChecker) checkEOF(rule string) {
	if c.slowless("EOF behaviour", rule) {
		return
	}
	t := c.startSlow()
	defer t.cancel()
	if c.tooFast("EOF behaviour", rule, t) {
		return
	}
	t0 := time.Now()
	c.tap.sentEOF()
	c.proc.CloseStdin()
	answered := t.ended(c.opts.requestTimeout)
	var je *jsonrpc.Error
	if answered && t.err != nil && !errors.As(t.err, &je) {
		answered = false // the connection ended without an answer
	}
	gone := false
	select {
	case <-c.proc.Exited():
		gone = true
	case <-time.After(c.opts.grace):
	}
	what := "unanswered"
	if answered {
		what = "answered " + string(t.reason)
		if t.err != nil {
			what = "answered with an error"
		}
		what += " " + millis(t.at.Sub(t0)) + " after EOF"
	}
	switch {
	case answered && gone:
		c.add("EOF behaviour", pass, "a prompt in flight at EOF was "+what+", then the agent exited", rule)
	case answered:
		c.add("EOF behaviour", pass, "a prompt in flight at EOF was "+what+"; the agent is still running (see shutdown)", rule)
	case gone:
		c.add("EOF behaviour", warn, "the agent exited at EOF without answering the prompt in flight", rule)
	default:
		c.add("EOF behaviour", info, fmt.Sprintf("the prompt in flight is unanswered %v after EOF and the agent still runs (see shutdown)", c.opts.requestTimeout), rule)
	}
	if !t.ended(0) {
		t.cancel()
		<-t.done
	}
}

// wireTap sees the lines of a connection both ways, in the order each
// direction carried them, and records what the checks judge.
type wireTap struct {
	pollution func(line []byte)

	mu      sync.Mutex
	lines   []tapLine
	inBuf   []byte
	outBuf  []byte
	eofSent bool
}

// tapLine is one line, as much of it as the checks read.
type tapLine struct {
	at         time.Time
	out        bool // written by the client
	raw        []byte
	method     string
	id         string // raw JSON id ("" without one)
	hasID      bool   // the id member is present (null included)
	response   bool
	code       int64 // an error response's code
	stopReason string
	sessionID  string // params.sessionId, or a response's result.sessionId
}

// idOurs reports a response to one of the client's requests (a number or
// a string id); a reply to a line that was no request has id null or none.
func (l tapLine) idOurs() bool { return l.id != "" && l.id != "null" }

const maxTapLine = 4096 // bytes of a line kept for the evidence

func newWireTap(pollution func([]byte)) *wireTap { return &wireTap{pollution: pollution} }

type tapIn struct{ t *wireTap }

func (w tapIn) Write(p []byte) (int, error) { w.t.feed(false, p); return len(p), nil }

// in is the writer io.TeeReader copies the agent's output to.
func (t *wireTap) in() io.Writer { return tapIn{t} }

// tapWriter passes the client's lines to the agent, recording them.
type tapWriter struct {
	w   io.WriteCloser
	tap *wireTap
}

func (w *tapWriter) Write(p []byte) (int, error) {
	w.tap.feed(true, p)
	return w.w.Write(p)
}

func (w *tapWriter) Close() error { return w.w.Close() }

func (t *wireTap) feed(out bool, p []byte) {
	t.mu.Lock()
	defer t.mu.Unlock()
	buf := &t.inBuf
	if out {
		buf = &t.outBuf
	}
	*buf = append(*buf, p...)
	for {
		i := bytes.IndexByte(*buf, '\n')
		if i < 0 {
			if len(*buf) > 16<<20 { // a line past any limit: keep its head only
				*buf = (*buf)[:maxTapLine]
			}
			return
		}
		line := bytes.TrimRight((*buf)[:i], "\r")
		t.record(out, line)
		*buf = (*buf)[i+1:]
	}
}

func (t *wireTap) record(out bool, line []byte) {
	if len(bytes.TrimSpace(line)) == 0 {
		return
	}
	l := tapLine{at: time.Now(), out: out, raw: append([]byte(nil), line[:min(len(line), maxTapLine)]...)}
	var m struct {
		ID     *json.RawMessage `json:"id"`
		Method string           `json:"method"`
		Params struct {
			SessionID string `json:"sessionId"`
		} `json:"params"`
		Result *struct {
			SessionID  string `json:"sessionId"`
			StopReason string `json:"stopReason"`
		} `json:"result"`
		Error *struct {
			Code int64 `json:"code"`
		} `json:"error"`
	}
	trimmed := bytes.TrimSpace(line)
	if trimmed[0] == '[' && json.Valid(trimmed) {
		t.lines = append(t.lines, l) // a batch: kept, judged by the batch row
		return
	}
	if err := json.Unmarshal(trimmed, &m); err != nil || trimmed[0] != '{' {
		if !out && t.pollution != nil {
			t.pollution(l.raw)
		}
		t.lines = append(t.lines, l)
		return
	}
	var probe map[string]json.RawMessage
	json.Unmarshal(trimmed, &probe)
	_, l.hasID = probe["id"]
	if m.ID != nil {
		l.id = string(*m.ID)
	} else if l.hasID {
		l.id = "null"
	}
	l.method = m.Method
	l.sessionID = m.Params.SessionID
	if m.Method == "" && (m.Result != nil || m.Error != nil) {
		l.response = true
		if m.Result != nil {
			l.sessionID, l.stopReason = m.Result.SessionID, m.Result.StopReason
		}
		if m.Error != nil {
			l.code = m.Error.Code
		}
	}
	t.lines = append(t.lines, l)
}

// mark is the position of the next line.
func (t *wireTap) mark() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.lines)
}

// since returns the lines from mark on.
func (t *wireTap) since(mark int) []tapLine {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]tapLine(nil), t.lines[min(mark, len(t.lines)):]...)
}

func (t *wireTap) sentEOF() {
	t.mu.Lock()
	t.eofSent = true
	t.mu.Unlock()
}

func (t *wireTap) eof() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.eofSent
}
