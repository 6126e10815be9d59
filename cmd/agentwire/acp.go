package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/agentwire/agentwire/acp"
	"github.com/agentwire/agentwire/acp/acpclient"
	"github.com/agentwire/agentwire/client"
	"github.com/agentwire/agentwire/jsonrpc"
	"github.com/agentwire/agentwire/process"
	"github.com/agentwire/agentwire/socket"
	"github.com/agentwire/agentwire/telemetry"
)

// Exit statuses of `agentwire acp` beyond the common ones: the stop reason
// of the turn (--prompt), or why there was none.
const (
	exitACPAuth            = 3 // the agent requires authentication
	exitACPMaxTokens       = 4
	exitACPMaxTurnRequests = 5
	exitACPRefusal         = 6
	exitACPCancelled       = 7 // cancelled without a signal (--timeout)
	exitACPUnknownStop     = 8
)

const acpSynopsis = `usage: agentwire acp [flags] -- CMD [ARGS...]
       agentwire acp [flags] --connect unix:PATH|tcp:HOST:PORT
`

// acpReport is what acp --report writes to stderr.
type acpReport struct {
	Agent           string           `json:"agent"`
	AgentVersion    string           `json:"agent_version"`
	ProtocolVersion int              `json:"protocol_version"`
	AuthMethods     []string         `json:"auth_methods"`
	SessionID       string           `json:"session_id"`
	StopReason      string           `json:"stop_reason"`
	InitializeMS    int64            `json:"initialize_ms"`
	TurnMS          int64            `json:"turn_ms"`
	Updates         map[string]int64 `json:"updates"`
	Permissions     struct {
		Asked     int64 `json:"asked"`
		Allowed   int64 `json:"allowed"`
		Rejected  int64 `json:"rejected"`
		Cancelled int64 `json:"cancelled"`
	} `json:"permissions"`
	FS struct {
		Reads   int64 `json:"reads"`
		Writes  int64 `json:"writes"`
		Refused int64 `json:"refused"`
	} `json:"fs"`
	Terminals struct {
		Created int64 `json:"created"`
		Killed  int64 `json:"killed"`
		Refused int64 `json:"refused"`
	} `json:"terminals"`
	Shutdown         string `json:"shutdown"`
	ShutdownMS       int64  `json:"shutdown_ms"`
	StdoutViolations int64  `json:"stdout_violations"`
	LateResponses    int64  `json:"late_responses"`
	Restarts         int    `json:"restarts"`
	ExitCode         int    `json:"exit_code"`
	StderrTail       string `json:"stderr_tail"`
}

// repeated is a flag that may be given several times.
type repeated []string

func (r *repeated) String() string     { return strings.Join(*r, ",") }
func (r *repeated) Set(s string) error { *r = append(*r, s); return nil }

// acpRun is one `agentwire acp`: the connection, its session, and what
// the turns and the terminal share.
type acpRun struct {
	stdout, stderr io.Writer
	ctx            context.Context // a.sig.ctx, with the environment's trace context
	name           string          // "agentwire acp", the prefix of our messages
	conn           *acpclient.Conn
	sess           *acpclient.Session
	render         *acpRenderer
	sig            *acpSignals
	lines          *prompter // the one reader of stdin: prompts and permission answers
	ask            *askPolicy
	timeout        time.Duration
	cancelGrace    time.Duration
	interactive    bool
	tty            bool     // stdin is a terminal the user answers on
	argv           []string // the agent's command (nil with --connect)

	closeOnce sync.Once
	shut      process.ShutdownResult

	turnMS     int64
	stopReason acp.StopReason
}

// runACP is `agentwire acp`: a terminal client for any ACP agent. With
// --prompt it runs one turn and exits with the stop reason's status;
// otherwise it reads prompts from stdin until /quit or end of input.
func runACP(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("acp")
	promptText := fs.String("prompt", "", "run one turn with this prompt, print the reply on stdout and exit with the stop reason's status")
	promptFile := fs.String("prompt-file", "", "the same, with the prompt read from a file (- for stdin)")
	cwd := fs.String("cwd", ".", "the session's working directory (also a root of the files served)")
	var addDirs, configs repeated
	fs.Var(&addDirs, "add-dir", "an additional directory of the session, also served (repeatable)")
	load := fs.String("load", "", "load this session (session/load) instead of opening a new one")
	resume := fs.String("resume", "", "resume this session (session/resume) instead of opening a new one")
	mode := fs.String("mode", "", "switch the session to this mode before the first prompt")
	fs.Var(&configs, "config", "set a config option before the first prompt, as ID=VALUE (repeatable)")
	auth := fs.String("auth", "", "authenticate with this method before opening the session")
	permission := fs.String("permission", "", "ask, deny or allow the agent's permission requests (default: ask with stdin on a terminal, else deny)")
	readOnly := fs.Bool("read-only", false, "serve fs/read_text_file only")
	noFS := fs.Bool("no-fs", false, "serve no files")
	noTerminal := fs.Bool("no-terminal", false, "run no terminals for the agent")
	maxTerminals := fs.Int("max-terminals", acpclient.DefaultMaxTerminals, "terminals alive at once")
	terminalOutput := fs.Int("terminal-output", acpclient.DefaultMaxTerminalOutput, "bytes of output kept per terminal")
	timeout := fs.Duration("timeout", 0, "bound on each turn: cancel, then --cancel-grace (default 10m with --prompt, none interactive)")
	connectTimeout := fs.Duration("connect-timeout", acpclient.DefaultInitTimeout, "bound on starting the agent and initialize")
	cancelGrace := fs.Duration("cancel-grace", acpclient.DefaultCancelGrace, "how long a cancelled turn waits for the agent's \"cancelled\"")
	grace := fs.Duration("grace", process.DefaultGrace, "each wait of the shutdown ladder")
	report := fs.Bool("report", false, "write a JSON report of the run to stderr")
	asJSON := fs.Bool("json", false, "write the updates as JSON lines on stdout instead of rendering them")
	showStderr := fs.Bool("show-stderr", false, "pass the agent's stderr through (default: keep its tail for errors and the report)")
	quiet := fs.Bool("quiet", false, "no banner, tool calls or plans on stderr: only the reply")
	thoughts := fs.Bool("thoughts", false, "show the agent's thoughts on stderr")
	logLevel := fs.String("log-level", "error", "debug, info, warn or error")
	connect := fs.String("connect", "", "talk to an agent listening on unix:PATH or tcp:HOST:PORT instead of starting one")
	of := addOTelFlags(fs, false)
	if code, done := parseFlags(fs, args, acpSynopsis, stdout, stderr); done {
		return code
	}
	bad := func(format string, a ...any) int { return usageError(stderr, "acp", acpSynopsis, format, a...) }
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	argv := fs.Args()
	switch {
	case len(argv) == 0 && *connect == "":
		return bad("missing the agent command (-- CMD [ARGS...]) or --connect ADDR")
	case len(argv) > 0 && *connect != "":
		return bad("give an agent command or --connect, not both")
	case set["prompt"] && set["prompt-file"]:
		return bad("--prompt and --prompt-file exclude each other")
	case *load != "" && *resume != "":
		return bad("--load and --resume exclude each other")
	case *noFS && *readOnly:
		return bad("--read-only and --no-fs exclude each other")
	case *maxTerminals <= 0 || *terminalOutput <= 0:
		return bad("--max-terminals and --terminal-output must be positive")
	case *connectTimeout <= 0 || *cancelGrace <= 0 || *grace <= 0 || *timeout < 0:
		return bad("--connect-timeout, --cancel-grace and --grace must be positive, --timeout not negative")
	}
	interactive := !set["prompt"] && !set["prompt-file"]
	text := *promptText
	if *promptFile != "" {
		var b []byte
		var err error
		if *promptFile == "-" {
			b, err = io.ReadAll(io.LimitReader(os.Stdin, 64<<20))
		} else {
			b, err = os.ReadFile(*promptFile)
		}
		if err != nil {
			return bad("--prompt-file: %v", err)
		}
		text = string(b)
	}
	if !interactive && strings.TrimSpace(text) == "" {
		return bad("the prompt is empty")
	}
	tty := *promptFile != "-" && stdinTerminal()
	switch *permission {
	case "":
		*permission = "deny"
		if tty {
			*permission = "ask"
		}
	case "ask":
		if !tty {
			return bad("--permission ask needs stdin on a terminal (give deny or allow)")
		}
	case "deny", "allow":
	default:
		return bad("bad --permission %q (ask, deny or allow)", *permission)
	}
	if !interactive && !set["timeout"] {
		*timeout = 10 * time.Minute
	}
	var config [][2]string
	for _, c := range configs {
		id, v, ok := strings.Cut(c, "=")
		if !ok || id == "" {
			return bad("--config wants ID=VALUE, not %q", cutLine(c, 80))
		}
		config = append(config, [2]string{id, v})
	}
	absCwd, err := filepath.Abs(*cwd)
	if err != nil {
		return bad("--cwd: %v", err)
	}
	if st, err := os.Stat(absCwd); err != nil || !st.IsDir() {
		return bad("--cwd %s is not a directory", *cwd)
	}
	var dirs []string
	for _, d := range addDirs {
		abs, err := filepath.Abs(d)
		if err != nil {
			return bad("--add-dir: %v", err)
		}
		if st, err := os.Stat(abs); err != nil || !st.IsDir() {
			return bad("--add-dir %s is not a directory", d)
		}
		dirs = append(dirs, abs)
	}
	logger, ok := newLogger(*logLevel, stderr)
	if !ok {
		return bad("bad --log-level %q", *logLevel)
	}
	if err := of.check(); err != nil {
		return bad("%v", err)
	}
	obs, obsCode, err := startTelemetry(of, "acp", "acp", stderr)
	if err != nil {
		fmt.Fprintln(stderr, "agentwire acp:", err)
		return obsCode
	}

	a := &acpRun{stdout: stdout, stderr: stderr, name: "agentwire acp", timeout: *timeout, cancelGrace: *cancelGrace,
		interactive: interactive, tty: tty, argv: argv}
	// Prompts and permission answers come from one reader of stdin; what
	// it would print on an interrupted read is ours to print.
	a.lines = &prompter{in: os.Stdin, out: io.Discard}
	a.render = newACPRenderer(stdout, stderr, *asJSON, *quiet, *thoughts)
	a.sig = watchACPSignals(stderr, interactive)
	defer a.sig.stop()
	// Spans are flushed on every way out, within their bound, after the
	// agent's shutdown and with the signals still watched.
	defer obs.close()
	// The first request's CLIENT span is a root, or a child of
	// $TRACEPARENT's; so is every later one (each its own trace).
	a.ctx = obs.traceRoot(a.sig.ctx)
	peerTransport, peer := telemetry.Pipe, ""
	if *connect != "" {
		peerTransport, peer = socketTransport(*connect)
	}

	opts := &acpclient.Options{
		Info:         acp.Implementation{Name: "agentwire-acp", Version: "1"},
		Logger:       logger,
		Updates:      a.render,
		TerminalAuth: interactive && tty,
		CancelGrace:  *cancelGrace,
		InitTimeout:  *connectTimeout,
		Transport: &client.Options{Logger: logger, Process: &process.Options{Grace: *grace, Logger: logger},
			// What the client sends, CLIENT spans; what the agent asks
			// (files, terminals, permissions), SERVER spans.
			Outbound:   obs.clientSide(telemetry.ACP, peerTransport, false, peer),
			Middleware: obs.serverSide(telemetry.ACP, peerTransport, false),
		},
	}
	if *showStderr {
		opts.Transport.Process.Stderr = stderr
	}
	switch {
	case *noFS:
		opts.FS = acpclient.NoFiles
	case *readOnly:
		opts.FS = acpclient.RootedFS{ReadOnly: true}
	}
	if !*noTerminal {
		opts.Terminals = &acpclient.TerminalOptions{MaxLive: *maxTerminals, MaxOutputBytes: *terminalOutput}
	}
	switch *permission {
	case "ask":
		a.ask = &askPolicy{lines: a.lines, render: a.render, turn: make(chan struct{}, 1)}
		opts.Permissions = a.ask
	case "allow":
		opts.Permissions = acpclient.AllowOnce
	default:
		opts.Permissions = acpclient.DenyAll
	}

	rep := acpReport{Updates: map[string]int64{}, AuthMethods: []string{}}
	start := time.Now()
	ctx, cancel := context.WithTimeout(a.ctx, *connectTimeout)
	var sock net.Conn
	if *connect != "" {
		sock, err = socket.Dial(ctx, *connect)
		if err == nil {
			a.conn, err = acpclient.New(ctx, sock, sock, opts)
		}
	} else {
		a.conn, err = acpclient.Start(ctx, process.Command{Path: argv[0], Args: argv[1:], Env: obs.childEnv()}, opts)
	}
	cancel()
	rep.InitializeMS = time.Since(start).Milliseconds()
	if err != nil {
		if sock != nil {
			sock.Close()
		}
		code := a.startFailed(err)
		if *report {
			a.writeReport(rep)
		}
		return code
	}
	if sock != nil {
		defer sock.Close()
	}
	a.sig.setClose(a.close)
	a.render.setTerminals(a.terminal)
	if p := a.conn.Process(); p != nil {
		a.sig.onKill(p.Kill)
	}
	info := a.conn.AgentInfo()
	rep.Agent, rep.AgentVersion, rep.ProtocolVersion = info.Name, info.Version, a.conn.ProtocolVersion()
	for _, m := range a.conn.AuthMethods() {
		rep.AuthMethods = append(rep.AuthMethods, m.ID)
	}
	if !*quiet {
		a.banner()
	}

	code := a.setup(absCwd, dirs, *auth, *load, *resume, *mode, config)
	if code < 0 {
		if interactive {
			code = a.loop()
		} else {
			code = a.once(text)
		}
	}
	if a.sess != nil {
		rep.SessionID = a.sess.ID()
	}
	rep.StopReason, rep.TurnMS = string(a.stopReason), a.turnMS
	if sigCode := a.sig.code(); sigCode != 0 {
		code = sigCode
		fmt.Fprintf(stderr, "%s: interrupted by %s\n", a.name, signalName(a.sig.signal()))
	}
	a.close()
	obs.recordShutdown(a.shut)
	if *report {
		a.fillReport(&rep)
		a.writeReport(rep)
	}
	return code
}

// close ends the connection once (terminals, then the ladder) and keeps
// how the agent ended, for the report.
func (a *acpRun) close() {
	a.closeOnce.Do(func() {
		if a.conn != nil {
			a.shut = a.conn.Close()
		}
	})
}

// startFailed reports a Start or initialize that failed and returns the
// exit status.
func (a *acpRun) startFailed(err error) int {
	if code := a.sig.code(); code != 0 {
		fmt.Fprintf(a.stderr, "%s: interrupted by %s\n", a.name, signalName(a.sig.signal()))
		return code
	}
	var ve *acpclient.VersionError
	switch {
	case errors.As(err, &ve):
		fmt.Fprintf(a.stderr, "%s: %v\n", a.name, err)
	case errors.Is(err, context.DeadlineExceeded):
		fmt.Fprintf(a.stderr, "%s: the agent did not answer initialize within --connect-timeout: %s\n", a.name, errorText(err, false))
	default:
		var je *jsonrpc.Error
		if errors.As(err, &je) {
			fmt.Fprintf(a.stderr, "%s: initialize failed: %s\n", a.name, jsonrpc.AppendError(nil, je))
			return exitFailure
		}
		fmt.Fprintf(a.stderr, "%s: %s\n", a.name, errorText(err, false))
	}
	return exitTransport
}

func (a *acpRun) banner() {
	info := a.conn.AgentInfo()
	name := info.Name
	if name == "" {
		name = "(unnamed agent)"
	}
	line := fmt.Sprintf("%s %s, ACP v%d", name, info.Version, a.conn.ProtocolVersion())
	if ms := a.conn.AuthMethods(); len(ms) > 0 {
		ids := make([]string, len(ms))
		for i, m := range ms {
			ids[i] = m.ID
		}
		line += "; auth methods: " + strings.Join(ids, ", ")
	}
	a.render.info(line)
}

// setup authenticates if asked, opens the session and applies --mode and
// --config. It returns -1 to go on, or the exit status.
func (a *acpRun) setup(cwd string, dirs []string, auth, load, resume, mode string, config [][2]string) int {
	ctx := a.ctx
	if auth != "" {
		if code := a.authenticate(ctx, auth); code >= 0 {
			return code
		}
	}
	cfg := acpclient.SessionConfig{Cwd: cwd, AddDirs: dirs}
	open := func() error {
		var err error
		switch {
		case load != "":
			a.sess, err = a.conn.LoadSession(ctx, load, cfg)
		case resume != "":
			a.sess, err = a.conn.ResumeSession(ctx, resume, cfg)
		default:
			a.sess, err = a.conn.NewSession(ctx, cfg)
		}
		return err
	}
	err := open()
	var ae *acpclient.AuthRequiredError
	if errors.As(err, &ae) && auth == "" && a.interactive && a.tty {
		if code := a.chooseAuth(ctx, ae); code >= 0 {
			return code
		}
		err = open()
	}
	if err != nil {
		return a.failed("opening the session", err)
	}
	if !a.render.quiet {
		a.render.info(a.sessionLine())
	}
	if mode != "" {
		if err := a.sess.SetMode(ctx, mode); err != nil {
			return a.failed("--mode "+mode, err)
		}
	}
	for _, kv := range config {
		if _, err := a.sess.SetConfigOption(ctx, kv[0], a.configValue(kv[0], kv[1])); err != nil {
			return a.failed("--config "+kv[0], err)
		}
	}
	return -1
}

// configValue is VALUE as the option's type wants it: a bool for a
// boolean option, else the string.
func (a *acpRun) configValue(id, v string) any {
	for _, o := range a.sess.ConfigOptions() {
		if o.ID == id && o.Type == "boolean" {
			if b, err := strconv.ParseBool(v); err == nil {
				return b
			}
		}
	}
	return v
}

func (a *acpRun) sessionLine() string {
	line := "session " + a.sess.ID()
	if modes := a.sess.Modes(); len(modes) > 0 {
		ids := make([]string, len(modes))
		for i, m := range modes {
			ids[i] = m.ID
		}
		line += fmt.Sprintf("; mode %s (modes: %s)", a.sess.Mode(), strings.Join(ids, ", "))
	}
	for _, o := range a.sess.ConfigOptions() {
		line += fmt.Sprintf("; %s: %s", o.ID, o.CurrentValue)
	}
	return line
}

// failed reports an error of a step other than the turn and returns its
// exit status: 3 for authentication, 1 for the agent's JSON-RPC error, 2
// for anything else (a capability the agent lacks, a lost connection).
func (a *acpRun) failed(what string, err error) int {
	if a.sig.code() != 0 {
		return a.sig.code()
	}
	var ae *acpclient.AuthRequiredError
	var be *acpclient.BusyError
	var je *jsonrpc.Error
	switch {
	case errors.As(err, &ae):
		a.authHelp(ae)
		return exitACPAuth
	case errors.As(err, &be):
		fmt.Fprintf(a.stderr, "%s: %s: %v: %s\n", a.name, what, err, jsonrpc.AppendError(nil, be.Err))
		return exitFailure
	case errors.As(err, &je):
		fmt.Fprintf(a.stderr, "%s: %s: the agent answered %s\n", a.name, what, jsonrpc.AppendError(nil, je))
		return exitFailure
	}
	fmt.Fprintf(a.stderr, "%s: %s: %s\n", a.name, what, errorText(err, false))
	return exitTransport
}

// authMethods is what the agent offers, from the error or initialize.
func (a *acpRun) authMethods(ae *acpclient.AuthRequiredError) []acp.AuthMethod {
	if ae != nil && len(ae.Methods) > 0 {
		return ae.Methods
	}
	return a.conn.AuthMethods()
}

// authHelp lists the agent's auth methods and how to use one.
func (a *acpRun) authHelp(ae *acpclient.AuthRequiredError) {
	ms := a.authMethods(ae)
	if len(ms) == 0 {
		fmt.Fprintf(a.stderr, "%s: the agent requires authentication, and offers no auth method (authMethods is empty)\n", a.name)
		return
	}
	fmt.Fprintf(a.stderr, "%s: the agent requires authentication; it offers:\n", a.name)
	for _, m := range ms {
		fmt.Fprintf(a.stderr, "  %s\n", describeAuth(m))
	}
	fmt.Fprintf(a.stderr, "Run again with --auth METHOD (e.g. --auth %s).\n", ms[0].ID)
}

// describeAuth is one auth method in a line: id, name, type, description
// and, for a type this client does not know, the variables it names.
func describeAuth(m acp.AuthMethod) string {
	typ := m.Type
	if typ == "" {
		typ = "agent"
	}
	s := fmt.Sprintf("%s  %s (%s)", m.ID, m.Name, typ)
	if m.Description != "" {
		s += ": " + cutLine(m.Description, 200)
	}
	if m.Type == "terminal" {
		s += "; runs the agent's command with " + strings.Join(m.Args, " ") + " on this terminal"
	}
	if vars := authVars(m); len(vars) > 0 {
		s += "; set " + strings.Join(vars, ", ")
	}
	return s
}

// authVars are the variable names of an env_var method (a type the schema
// does not have yet, kept raw).
func authVars(m acp.AuthMethod) []string {
	var v struct {
		Vars []struct {
			Name string `json:"name"`
		} `json:"vars"`
	}
	json.Unmarshal(m.Raw, &v)
	var names []string
	for _, x := range v.Vars {
		names = append(names, x.Name)
	}
	return names
}

// authenticate runs --auth METHOD; -1 means authenticated.
func (a *acpRun) authenticate(ctx context.Context, id string) int {
	var method *acp.AuthMethod
	for _, m := range a.conn.AuthMethods() {
		if m.ID == id {
			method = &m
			break
		}
	}
	if method == nil {
		fmt.Fprintf(a.stderr, "%s: --auth %s: the agent offers no such method\n", a.name, id)
		a.authHelp(nil)
		return exitACPAuth
	}
	switch method.Type {
	case "":
	case "terminal":
		if len(a.argv) == 0 {
			fmt.Fprintf(a.stderr, "%s: --auth %s runs the agent's command on a terminal: not with --connect\n", a.name, id)
			return exitUsage
		}
		cmd := exec.Command(a.argv[0], append(append([]string(nil), a.argv[1:]...), method.Args...)...)
		cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stderr, os.Stderr
		cmd.Env = os.Environ()
		for k, v := range method.Env {
			cmd.Env = append(cmd.Env, k+"="+v)
		}
		if err := cmd.Run(); err != nil {
			fmt.Fprintf(a.stderr, "%s: --auth %s: %v\n", a.name, id, err)
			return exitACPAuth
		}
		return -1
	default:
		fmt.Fprintf(a.stderr, "%s: --auth %s is of type %q, which this client cannot run: %s\n", a.name, id, method.Type, describeAuth(*method))
		return exitACPAuth
	}
	if err := a.conn.Authenticate(ctx, id); err != nil {
		return a.failed("authenticate "+id, err)
	}
	return -1
}

// chooseAuth asks which auth method to use; -1 means authenticated.
func (a *acpRun) chooseAuth(ctx context.Context, ae *acpclient.AuthRequiredError) int {
	ms := a.authMethods(ae)
	if len(ms) == 0 {
		a.authHelp(ae)
		return exitACPAuth
	}
	fmt.Fprintln(a.stderr, "The agent requires authentication:")
	for i, m := range ms {
		fmt.Fprintf(a.stderr, "  [%d] %s\n", i+1, describeAuth(m))
	}
	for {
		fmt.Fprint(a.stderr, "method (empty to quit) > ")
		l, err := a.lines.readLine(ctx)
		l = strings.TrimSpace(l)
		if err != nil || l == "" {
			fmt.Fprintln(a.stderr)
			return exitACPAuth
		}
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 || n > len(ms) {
			fmt.Fprintf(a.stderr, "  a number from 1 to %d\n", len(ms))
			continue
		}
		return a.authenticate(ctx, ms[n-1].ID)
	}
}

// turn runs one prompt under --timeout (paused while a permission is
// asked) and the signals.
func (a *acpRun) turn(text string) (acp.StopReason, error, bool) {
	parent := a.ctx
	var clock *pausableDeadline
	if a.timeout > 0 {
		clock = newPausableDeadline(parent, a.timeout)
		defer clock.stop()
		parent = clock.ctx
	}
	ctx, cancel := context.WithCancelCause(parent)
	defer cancel(nil)
	if a.ask != nil {
		a.ask.setClock(clock)
		defer a.ask.setClock(nil)
	}
	a.sig.startTurn(cancel)
	t0 := time.Now()
	reason, err := a.sess.Prompt(ctx, acp.TextBlock(text))
	a.sig.endTurn()
	a.turnMS += time.Since(t0).Milliseconds()
	a.stopReason = reason
	a.render.endTurn()
	timedOut := clock != nil && errors.Is(context.Cause(clock.ctx), context.DeadlineExceeded)
	return reason, err, timedOut
}

// once is --prompt: one turn, its stop reason as the exit status.
func (a *acpRun) once(text string) int {
	reason, err, timedOut := a.turn(text)
	if a.render.json && err == nil {
		a.render.jsonStop(reason)
	}
	if code := a.sig.code(); code != 0 {
		return code
	}
	switch {
	case err == nil:
		if reason == acp.Cancelled && timedOut {
			fmt.Fprintf(a.stderr, "%s: the turn was cancelled after --timeout %v\n", a.name, a.timeout)
		}
		return stopStatus(reason)
	case timedOut || errors.Is(err, context.DeadlineExceeded):
		fmt.Fprintf(a.stderr, "%s: no reply to session/prompt within --timeout %v and --cancel-grace %v\n", a.name, a.timeout, a.cancelGrace)
		return exitTransport
	}
	return a.failed("session/prompt", err)
}

// stopStatus is the exit status of a stop reason.
func stopStatus(r acp.StopReason) int {
	switch r {
	case acp.EndTurn:
		return exitOK
	case acp.MaxTokens:
		return exitACPMaxTokens
	case acp.MaxTurnRequests:
		return exitACPMaxTurnRequests
	case acp.Refusal:
		return exitACPRefusal
	case acp.Cancelled:
		return exitACPCancelled
	}
	return exitACPUnknownStop
}

const acpInteractiveHelp = `Type a prompt (a line ending in \ continues it). Commands:
  /quit              end (or end of input)
  /modes, /mode ID   the session's modes; switch mode
  /config [ID VALUE] the config options; set one
  /commands          the agent's slash commands (sent as prompt text)
  /usage             the agent's last usage report
  /sessions          this session
  /help              this text
Ctrl-C cancels the turn; a second one stops the agent.
`

// loop is the interactive mode: prompts from stdin until /quit, end of
// input or a signal.
func (a *acpRun) loop() int {
	if !a.render.quiet {
		fmt.Fprintln(a.stderr, "(/help for the commands, /quit or end of input to end)")
	}
	for {
		text, err := a.readPrompt()
		if err != nil {
			if a.sig.code() != 0 {
				return a.sig.code()
			}
			return exitOK // end of input
		}
		if strings.TrimSpace(text) == "" {
			continue
		}
		if done, handled := a.command(text); done {
			return exitOK
		} else if handled {
			continue
		}
		reason, err, timedOut := a.turn(text)
		if a.sig.code() != 0 {
			return a.sig.code()
		}
		switch {
		case err == nil && reason == acp.EndTurn:
		case err == nil && reason == acp.Cancelled:
			a.render.info("cancelled")
		case err == nil:
			a.render.info("stop: " + string(reason))
		case timedOut || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, errTurnInterrupted):
			a.render.info(fmt.Sprintf("the agent did not answer the cancel within --cancel-grace %v", a.cancelGrace))
		default:
			a.render.info("error: " + acpErrorText(err))
			if errors.Is(err, client.ErrConnectionLost) || errors.Is(err, acpclient.ErrClosed) {
				return exitTransport
			}
		}
	}
}

// readPrompt reads one prompt: "> " on stderr, continued while a line
// ends in a backslash.
func (a *acpRun) readPrompt() (string, error) {
	var b strings.Builder
	prompt := "> "
	for {
		a.render.prompt(prompt)
		l, err := a.lines.readLine(a.sig.ctx)
		if err != nil {
			a.render.prompt("\n")
			if b.Len() > 0 && errors.Is(err, io.EOF) {
				return b.String(), nil
			}
			return "", err
		}
		if c, ok := strings.CutSuffix(l, `\`); ok {
			b.WriteString(c + "\n")
			prompt = "… "
			continue
		}
		b.WriteString(l)
		return b.String(), nil
	}
}

// command runs a slash command of ours; handled is false for text to send
// as a prompt (ACP's slash commands are prompt text).
func (a *acpRun) command(text string) (quit, handled bool) {
	f := strings.Fields(text)
	if len(f) == 0 || !strings.HasPrefix(f[0], "/") {
		return false, false
	}
	ctx := a.ctx
	out := func(format string, args ...any) { fmt.Fprintf(a.stderr, format+"\n", args...) }
	switch f[0] {
	case "/quit", "/exit":
		return true, true
	case "/help":
		fmt.Fprint(a.stderr, acpInteractiveHelp)
	case "/modes":
		modes := a.sess.Modes()
		if len(modes) == 0 {
			out("the agent offers no modes")
		}
		for _, m := range modes {
			mark := " "
			if m.ID == a.sess.Mode() {
				mark = "*"
			}
			out("%s %s  %s  %s", mark, m.ID, m.Name, m.Description)
		}
	case "/mode":
		if len(f) != 2 {
			out("usage: /mode ID")
			break
		}
		if err := a.sess.SetMode(ctx, f[1]); err != nil {
			out("error: %s", acpErrorText(err))
		} else {
			out("mode: %s", f[1])
		}
	case "/config":
		if len(f) == 1 {
			opts := a.sess.ConfigOptions()
			if len(opts) == 0 {
				out("the agent offers no config options")
			}
			for _, o := range opts {
				var vals []string
				for _, c := range o.Options {
					vals = append(vals, c.Value)
				}
				out("  %s = %s  (%s: %s)", o.ID, o.CurrentValue, o.Name, strings.Join(vals, ", "))
			}
			break
		}
		if len(f) != 3 {
			out("usage: /config [ID VALUE]")
			break
		}
		if _, err := a.sess.SetConfigOption(ctx, f[1], a.configValue(f[1], f[2])); err != nil {
			out("error: %s", acpErrorText(err))
		} else {
			out("%s: %s", f[1], f[2])
		}
	case "/commands":
		cmds := a.sess.Commands()
		if len(cmds) == 0 {
			out("the agent advertised no commands")
		}
		for _, c := range cmds {
			out("  /%s  %s", c.Name, c.Description)
		}
	case "/usage":
		if u := a.sess.Usage(); u == nil {
			out("the agent sent no usage")
		} else {
			s := fmt.Sprintf("%d of %d tokens", u.Used, u.Size)
			if u.Cost != nil {
				s += fmt.Sprintf("; cost %.4f %s", u.Cost.Amount, u.Cost.Currency)
			}
			out("%s", s)
		}
	case "/sessions":
		out("%s", a.sessionLine())
	default:
		return false, false
	}
	return false, true
}

// acpErrorText is an error in one line, the agent's error object as JSON.
func acpErrorText(err error) string {
	var je *jsonrpc.Error
	if errors.As(err, &je) {
		return string(jsonrpc.AppendError(nil, je))
	}
	return boundText(err.Error())
}

// fillReport completes the report from the connection's counters.
func (a *acpRun) fillReport(rep *acpReport) {
	rep.Updates = a.render.counts()
	if a.conn == nil {
		return
	}
	st := a.conn.Stats()
	rep.Permissions.Asked, rep.Permissions.Allowed = st.Permissions.Asked, st.Permissions.Allowed
	rep.Permissions.Rejected, rep.Permissions.Cancelled = st.Permissions.Rejected, st.Permissions.Cancelled
	rep.FS.Reads, rep.FS.Writes, rep.FS.Refused = st.FS.Reads, st.FS.Writes, st.FS.Refused
	rep.Terminals.Created, rep.Terminals.Killed, rep.Terminals.Refused = st.Terminals.Created, st.Terminals.Killed, st.Terminals.Refused
	rep.StdoutViolations, rep.LateResponses, rep.Restarts = st.Transport.Violations, st.Transport.LateResponses, st.Transport.Restarts
	rep.Shutdown, rep.ShutdownMS, rep.ExitCode = string(a.shut.Outcome), a.shut.Duration.Milliseconds(), a.shut.ExitCode
	if p := a.conn.Process(); p != nil {
		rep.StderrTail = p.StderrTail()
	}
}

func (a *acpRun) writeReport(rep acpReport) {
	b, _ := json.Marshal(rep)
	fmt.Fprintf(a.stderr, "%s\n", b)
}

// terminal looks up a terminal the agent created, for the renderer.
func (a *acpRun) terminal(id string) (*acpclient.Terminal, bool) { return a.conn.Terminal(id) }

// lastLines are the last n lines of s.
func lastLines(s string, n int) []string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) == 1 && lines[0] == "" {
		return nil
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return lines
}
