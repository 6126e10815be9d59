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

	"github.com/agentwire/agentwire/mcp/host"
	"github.com/agentwire/agentwire/mcp/streamable"
	"github.com/agentwire/agentwire/process"
)

// checkResult is one row of `agentwire check`.
type checkResult struct {
	Check    string `json:"check"`
	Result   string `json:"result"` // pass, warn, fail, info, not run
	Evidence string `json:"evidence"`
	Rule     string `json:"rule"`
}

type checkReport struct {
	Server  []string      `json:"server,omitempty"`
	URL     string        `json:"url,omitempty"`
	Checks  []checkResult `json:"checks"`
	Passed  bool          `json:"passed"`
	Seconds float64       `json:"seconds"`
}

// The results a row can have. notRun is a probe that could not run: its
// evidence says why, and it is never counted as the server's failure.
const (
	pass   = "pass"
	warn   = "warn"
	fail   = "fail"
	info   = "info"
	notRun = "not run"
)

// callToolsMode is --call-tools: off, read-only tools only (the flag
// alone), or every tool (--call-tools=all).
type callToolsMode string

const (
	callNone     callToolsMode = ""
	callReadOnly callToolsMode = "read-only"
	callAll      callToolsMode = "all"
)

func (m *callToolsMode) String() string   { return string(*m) }
func (m *callToolsMode) IsBoolFlag() bool { return true }
func (m *callToolsMode) Set(s string) error {
	switch s {
	case "true", "read-only", "readonly":
		*m = callReadOnly
	case "all":
		*m = callAll
	case "false":
		*m = callNone
	default:
		return fmt.Errorf("want --call-tools (read-only tools) or --call-tools=all, not %q", s)
	}
	return nil
}

// checkOptions are the flags of check.
type checkOptions struct {
	timeout        time.Duration
	grace          time.Duration
	probeTimeout   time.Duration
	allowance      time.Duration
	connectTimeout time.Duration
	requestTimeout time.Duration
	toolTimeout    time.Duration
	slowTool       string
	slowArgs       json.RawMessage
	callTools      callToolsMode
	skipTools      map[string]bool
	token          string
	// With --oauth: what gives the requests their token, and the
	// authorization row (a failure when there is no token).
	auth    streamable.Authorizer
	authRow *checkResult
}

const checkHelp = `usage: agentwire check [flags] -- CMD [ARGS...]
       agentwire check [flags] --url URL
       agentwire check --acp [flags] -- CMD [ARGS...]   (an ACP agent; see check --acp --help)

Runs a fixed battery against an MCP server, from the outside, and prints one
row per check: its result, what was seen (the evidence) and the rule.
Results: pass, warn, fail, info, and "not run" (the probe could not run; the
evidence says why; never counted against the server). Exit 0 when nothing
failed, 1 when something did, 2 on bad usage.

A stdio server (CMD) gets: era (server/discover, then initialize), unknown
method, a line that is not JSON, a 1 MiB request, two requests in flight,
with --call-tools each tool called, cancellation, stdout hygiene over the
whole run, stderr use and the shutdown ladder. Every probe starts on a
server that has just answered: a probe that kills or hangs it is blamed
once, with the exit status and the last stderr line, and a fresh process
runs the rest (a "restart" row says so; after 2, the rest is not run). The
fresh process is first left alone for twice the dead one's lifetime: if it
dies too, a "lifetime" row says the server exits by itself, and the probe
is not blamed. A command that never starts gets "not run" for everything
but the era; what the run's --timeout cuts short is "not run" too.

--call-tools calls only the tools annotated readOnlyHint: true (a tool
without annotations is presumed destructive), with arguments filled from
the input schema; --call-tools=all also calls the others (with a warning:
they may write, delete or reach the network); --skip-tools names tools
never to call. A tool that outlasts --tool-timeout is cancelled: a warning
if the server goes on answering. input_required is an answer.

A Streamable HTTP server (--url) gets: era, status codes (a body that is
not JSON, GET, an unknown method, a notification), header mirroring
(2026-07-28: Mcp-Method, MCP-Protocol-Version, Mcp-Name against the body),
Origin (a foreign one must get 403), cancellation by disconnect (with
--slow-tool) and subscriptions/listen (2026-07-28); a server that stops
answering after a probe is blamed once ("server health") and the probes
after it are not run.

A server behind OAuth takes --token T, or --oauth: a token obtained as
agentwire call --oauth obtains one (the authorization URL on stderr, a
loopback listener for the redirect, tokens kept in the user's config
directory), before the run's --timeout starts; an "authorization" row
comes first, and when no token was obtained it fails and nothing else
runs. --oauth-client-id ID with --oauth-issuer URL is a client registered
beforehand at that authorization server (its secret, if any, in
$AGENTWIRE_OAUTH_CLIENT_SECRET; --oauth-client-auth how it is sent).

Flags:
`

// runCheck is `agentwire check`: a fixed battery against a stdio MCP
// server (or, with --url, a Streamable HTTP one), from the outside, for
// people who run servers they did not write.
func runCheck(args []string, stdout, stderr io.Writer) int {
	if acpFlagGiven(args) {
		return runCheckACP(args, stdout, stderr) // check_acp.go: the ACP battery
	}
	fs := flag.NewFlagSet("check", flag.ContinueOnError)
	fs.SetOutput(stderr)
	asJSON := fs.Bool("json", false, "print one JSON document instead of a table")
	timeout := fs.Duration("timeout", 60*time.Second, "bound on the whole run")
	var o checkOptions
	fs.DurationVar(&o.grace, "grace", 2*time.Second, "each wait of the shutdown ladder")
	fs.DurationVar(&o.probeTimeout, "probe-timeout", host.DefaultProbeTimeout, "how long the server/discover probe may take")
	fs.DurationVar(&o.allowance, "startup-allowance", host.DefaultProcessStartupAllowance,
		"extra time for the first probe of a freshly started server (0 when --probe-timeout is given alone)")
	fs.DurationVar(&o.connectTimeout, "connect-timeout", host.DefaultConnectTimeout, "how long the whole MCP negotiation may take")
	fs.DurationVar(&o.requestTimeout, "request-timeout", 5*time.Second, "how long each probe waits for an answer")
	fs.DurationVar(&o.toolTimeout, "tool-timeout", 5*time.Second, "with --call-tools: how long each tool may run before it is cancelled")
	fs.StringVar(&o.slowTool, "slow-tool", "", "a tool that takes time, for the cancellation check")
	slowArgs := fs.String("slow-args", "{}", "its arguments, as JSON")
	fs.Var(&o.callTools, "call-tools", "call the tools annotated readOnlyHint: true whose arguments can be filled from their schema; --call-tools=all calls every tool")
	skip := fs.String("skip-tools", "", "with --call-tools: comma-separated tools never to call")
	url := fs.String("url", "", "check a Streamable HTTP server at this URL instead of starting a command")
	fs.StringVar(&o.token, "token", "", "with --url: the bearer token to send")
	oauth := addClientOAuthFlags(fs)
	fs.Usage = func() {} // the error is printed by fs, the help below
	if code, done := parseCheckFlags(fs, args, checkHelp, "agentwire check --help", stdout, stderr); done {
		return code
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if set["probe-timeout"] && !set["startup-allowance"] {
		o.allowance = 0 // the probe timeout asked for is the one used
	}
	argv := fs.Args()
	switch {
	case len(argv) == 0 && *url == "":
		fmt.Fprintln(stderr, "agentwire check: missing the server command (agentwire check [flags] -- CMD [ARGS...]) or --url URL")
		return 2
	case len(argv) > 0 && *url != "":
		fmt.Fprintln(stderr, "agentwire check: give a server command or --url, not both")
		return 2
	case o.token != "" && *url == "":
		fmt.Fprintln(stderr, "agentwire check: --token goes with --url")
		return 2
	}
	if err := oauth.validate(set, *url); err != nil {
		fmt.Fprintln(stderr, "agentwire check:", err)
		return 2
	}
	switch {
	case *url != "" && (o.callTools != callNone || *skip != ""):
		fmt.Fprintln(stderr, "agentwire check: --call-tools and --skip-tools are for a server command (stdio), not --url")
		return 2
	}
	if !json.Valid([]byte(*slowArgs)) {
		fmt.Fprintf(stderr, "agentwire check: --slow-args is not valid JSON: %s\n", *slowArgs)
		return 2
	}
	o.slowArgs = json.RawMessage(*slowArgs)
	if *timeout <= 0 || o.grace <= 0 || o.probeTimeout <= 0 || o.connectTimeout <= 0 || o.requestTimeout <= 0 || o.toolTimeout <= 0 {
		fmt.Fprintln(stderr, "agentwire check: durations must be positive")
		return 2
	}
	o.skipTools = map[string]bool{}
	for _, name := range strings.Split(*skip, ",") {
		if name = strings.TrimSpace(name); name != "" {
			o.skipTools[name] = true
		}
	}
	if o.callTools == callAll {
		fmt.Fprintln(stderr, "agentwire check: warning: --call-tools=all calls tools that are not marked read-only; they may write, move or delete data, or reach the network")
	}
	intr := watchInterrupts() // a signal ends the battery; the server is stopped, the report written
	defer intr.stop()
	if *oauth.use {
		// Before the run's --timeout: the user may take a while.
		oc, err := oauth.start(intr.ctx, "check", stderr, *url)
		if _, ok := interruptedBy(intr.ctx); ok {
			if oc != nil {
				oc.close()
			}
			fmt.Fprintf(stderr, "agentwire check: interrupted by %s\n", signalName(intr.signal()))
			return intr.code()
		}
		o.authRow = &checkResult{"authorization", pass, "", ruleOAuth}
		switch {
		case err != nil:
			o.authRow.Result, o.authRow.Evidence = fail, "--oauth: "+err.Error()
		case oc.prompts.Load() > 0:
			o.authRow.Evidence = "a token obtained after authorizing in a browser (now stored)"
		default:
			o.authRow.Evidence = "the stored token (or its refresh): no authorization asked for"
		}
		if oc != nil {
			defer oc.close()
			o.auth = oc.authorizer
		}
	}
	start := time.Now()
	ctx, cancel := context.WithTimeout(intr.ctx, *timeout)
	defer cancel()
	o.timeout = *timeout
	c := &checker{ctx: ctx, opts: o}
	rep := checkReport{Passed: true}
	if *url != "" {
		rep.URL = *url
		c.runHTTP(*url)
	} else {
		rep.Server = argv
		c.runStdio(process.Command{Path: argv[0], Args: argv[1:]})
	}
	rep.Checks, rep.Seconds = c.results, time.Since(start).Seconds()
	for _, r := range c.results {
		if r.Result == fail {
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
		skipped := 0
		for _, r := range c.results {
			if r.Result == notRun {
				skipped++
			}
		}
		fmt.Fprintf(stdout, "\n%s in %.1f s", verdict, rep.Seconds)
		if skipped > 0 {
			fmt.Fprintf(stdout, "; %d check(s) not run", skipped)
		}
		fmt.Fprintln(stdout)
	}
	if code := intr.code(); code != 0 {
		fmt.Fprintf(stderr, "agentwire check: interrupted by %s\n", signalName(intr.signal()))
		return code
	}
	if !rep.Passed {
		return 1
	}
	return 0
}

// checker runs one battery and collects its rows.
type checker struct {
	ctx     context.Context
	opts    checkOptions
	results []checkResult

	// The stdio battery's server (check_stdio.go).
	cmd      process.Command
	mopts    *host.Options
	sess     *host.Session
	procs    int              // server processes started with a session
	restarts int              // fresh processes started after a fatal probe
	lost     string           // why there is no session now: the "not run" reason
	lastProc *process.Process // the last server process, for its stderr
	started  time.Time        // when the current server process was started

	mu         sync.Mutex
	violations []string // the first few, for the evidence
	violated   int      // how many in all
}

func (c *checker) add(check, result, evidence, rule string) {
	evidence = strings.ReplaceAll(evidence, "\n", " ")
	c.results = append(c.results, checkResult{check, result, evidence, rule})
}

// cutShort marks the rows added since from as "not run" when the run's
// --timeout ran out during them: a warning or failure then says nothing
// about the server. Passes (and info) stand: they were seen in time.
func (c *checker) cutShort(from int) bool {
	if c.ctx.Err() == nil {
		return false
	}
	for i := from; i < len(c.results); i++ {
		if r := &c.results[i]; r.Result == warn || r.Result == fail {
			r.Result, r.Evidence = notRun, fmt.Sprintf("cut short: %s (%s)", c.cutReason(), r.Evidence)
		}
	}
	return true
}

// cutReason says why the run ended early: its --timeout, or whatever
// else cancelled it (a signal).
func (c *checker) cutReason() string {
	if sig, ok := interruptedBy(c.ctx); ok {
		return "the run was interrupted by " + sig.String()
	}
	cause := context.Cause(c.ctx)
	if cause == nil || errors.Is(cause, context.DeadlineExceeded) {
		return fmt.Sprintf("the run's --timeout (%v) ran out", c.opts.timeout)
	}
	if errors.Is(cause, context.Canceled) {
		return "the run was interrupted"
	}
	if msg := cause.Error(); strings.HasPrefix(msg, "interrupted") {
		return "the run was " + msg // interrupted by SIGINT
	}
	return "the run was interrupted: " + cause.Error()
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
		q[i] = fmt.Sprintf("%q", clip(l, 80))
	}
	return strings.Join(q, ", ")
}

// clip shortens s to n bytes (on a rune boundary) for the evidence.
func clip(s string, n int) string {
	s = strings.TrimSpace(s)
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

func utf8RuneStart(b byte) bool { return b&0xC0 != 0x80 }

// ms is a duration in whole milliseconds, for the evidence.
func millis(d time.Duration) string { return fmt.Sprintf("%d ms", d.Milliseconds()) }

// parseCheckFlags parses a battery's flags; when done, the command returns
// code at once: 0 after --help (the whole help and the flags on stdout), 2
// after a bad flag (fs's one line, the synopsis and where the help is).
func parseCheckFlags(fs *flag.FlagSet, args []string, help, helpCommand string, stdout, stderr io.Writer) (code int, done bool) {
	err := fs.Parse(args)
	if err == nil {
		return 0, false
	}
	if errors.Is(err, flag.ErrHelp) {
		fmt.Fprint(stdout, help)
		fs.SetOutput(stdout)
		fs.PrintDefaults()
		return 0, true
	}
	fmt.Fprint(stderr, help[:strings.Index(help, "\n\n")+1])
	fmt.Fprintf(stderr, "(%s for the checks and the flags)\n", helpCommand)
	return 2, true
}
