package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strings"
	"time"

	"github.com/agentwire/agentwire/client"
	"github.com/agentwire/agentwire/jsonrpc"
	"github.com/agentwire/agentwire/mcp"
	"github.com/agentwire/agentwire/mcp/host"
	"github.com/agentwire/agentwire/mcp/streamable"
	"github.com/agentwire/agentwire/process"
	"github.com/agentwire/agentwire/socket"
	"github.com/agentwire/agentwire/telemetry"
)

// callReport is what --report writes to stderr.
type callReport struct {
	Era              string `json:"era"`
	ProtocolVersion  string `json:"protocol_version"`
	Probe            string `json:"probe"`
	ConnectMS        int64  `json:"connect_ms"`
	Shutdown         string `json:"shutdown"`
	ShutdownMS       int64  `json:"shutdown_ms"`
	StdoutViolations int64  `json:"stdout_violations"`
	LateResponses    int64  `json:"late_responses"`
	Restarts         int    `json:"restarts"`
	ExitCode         int    `json:"exit_code"`
	StderrTail       string `json:"stderr_tail"`
}

// runCall is `agentwire call`: start a stdio server, send one request,
// print the result (exit 0) or the error object (exit 1), shut the server
// down with the ladder; a transport failure exits 2, a request for input
// nothing answered 3, a signal 128+N (after the ladder and the report).
func runCall(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("call")
	method := fs.String("method", "", "the request's method (default tools/list; required with --era none)")
	params := fs.String("params", "", "the request's params, as JSON")
	tool := fs.String("tool", "", "call this tool (tools/call)")
	toolArgs := fs.String("args", "{}", "the tool's arguments, as JSON (with --tool)")
	asTask := fs.Bool("task", false, "run the tool as a task (with --tool): show its status changes on stderr until it ends; an interrupt cancels it")
	input := fs.String("input", "", `answers to what the server asks (elicitation, sampling, roots), as JSON keyed by method, e.g. {"elicitation/create":{"name":"Ann"}}`)
	inputFile := fs.String("input-file", "", "the same, read from a file")
	era := fs.String("era", "auto", "auto, modern, legacy, or none (plain JSON-RPC, no handshake)")
	probeTimeout := fs.Duration("probe-timeout", host.DefaultProbeTimeout, "how long the server/discover probe may take")
	allowance := fs.Duration("startup-allowance", host.DefaultProcessStartupAllowance,
		"extra time for the first probe of the freshly started server (0 when --probe-timeout is given alone)")
	timeout := fs.Duration("timeout", 30*time.Second, "how long to wait for the response (after connecting)")
	connectTimeout := fs.Duration("connect-timeout", host.DefaultConnectTimeout, "how long the MCP negotiation may take")
	grace := fs.Duration("grace", process.DefaultGrace, "each wait of the shutdown ladder")
	report := fs.Bool("report", false, "write a JSON report of the session to stderr")
	logLevel := fs.String("log-level", "error", "debug, info, warn or error")
	connect := fs.String("connect", "", "talk to a server listening on unix:PATH or tcp:HOST:PORT instead of starting one")
	url := fs.String("url", "", "talk to a Streamable HTTP server at this URL instead of starting one")
	token := fs.String("token", "", "the bearer token to send with --url")
	oauth := addClientOAuthFlags(fs)
	of := addOTelFlags(fs, false)
	if code, done := parseFlags(fs, args, callSynopsis, stdout, stderr); done {
		return code
	}
	bad := func(format string, a ...any) int { return usageError(stderr, "call", callSynopsis, format, a...) }
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if set["probe-timeout"] && !set["startup-allowance"] {
		// The probe timeout the user asked for is the one they get.
		*allowance = 0
	}
	argv := fs.Args()
	given := 0
	for _, b := range []bool{len(argv) > 0, *connect != "", *url != ""} {
		if b {
			given++
		}
	}
	if given == 0 {
		return bad("missing the server command (-- CMD [ARGS...]), --connect ADDR or --url URL")
	}
	if given > 1 {
		return bad("give one of a server command, --connect and --url")
	}
	if *url != "" && *era == "none" {
		return bad("--url speaks MCP over Streamable HTTP; --era none is for stdio and sockets")
	}
	if *token != "" && *url == "" {
		return bad("--token goes with --url")
	}
	if err := oauth.validate(set, *url); err != nil {
		return bad("%v", err)
	}
	var p any
	if *params != "" {
		if !json.Valid([]byte(*params)) {
			return bad("--params is not valid JSON: %s", cutLine(*params, 200))
		}
		p = json.RawMessage(*params)
	}
	if *timeout <= 0 || *grace <= 0 || *probeTimeout <= 0 || *connectTimeout <= 0 {
		return bad("--timeout, --connect-timeout, --grace and --probe-timeout must be positive")
	}
	eras := mcp.BothEras
	if *era != "none" {
		var ok bool
		if eras, ok = parseEraFlag(*era, "auto"); !ok {
			return bad("bad --era %q (auto, modern, legacy or none)", *era)
		}
	}
	if *asTask && *tool == "" {
		return bad("--task runs a tool as a task: it needs --tool")
	}
	if set["args"] && *tool == "" {
		return bad("--args goes with --tool (for another method, give --params)")
	}
	if *tool != "" {
		switch {
		case *era == "none":
			return bad("--tool needs an MCP era (not --era none)")
		case *method != "":
			return bad("--tool calls tools/call: it does not combine with --method")
		case *params != "":
			return bad("--tool builds the params from --args: it does not combine with --params")
		case !json.Valid([]byte(*toolArgs)):
			return bad("--args is not valid JSON: %s", cutLine(*toolArgs, 200))
		}
		*method = "tools/call"
		p = map[string]any{"name": *tool, "arguments": json.RawMessage(*toolArgs)}
	}
	if *method == "" {
		if *era == "none" {
			// Plain JSON-RPC has no method every server answers.
			return bad("--era none needs --method (plain JSON-RPC has no method every server has; serve echo answers echo and sleep)")
		}
		*method = "tools/list"
	}
	in := &callInput{}
	if *input != "" || *inputFile != "" {
		if *input != "" && *inputFile != "" {
			return bad("--input and --input-file exclude each other")
		}
		if *era == "none" {
			return bad("--input answers MCP requests; --era none has none")
		}
		b := []byte(*input)
		if *inputFile != "" {
			var err error
			if b, err = os.ReadFile(*inputFile); err != nil {
				return bad("--input-file: %v", err)
			}
		}
		var err error
		if in.given, err = parseInput(b); err != nil {
			return bad("--input: %v", err)
		}
	}
	if *era != "none" && stdinTerminal() {
		in.term = &prompter{in: os.Stdin, out: stderr}
	}
	logger, ok := newLogger(*logLevel, stderr)
	if !ok {
		return bad("bad --log-level %q", *logLevel)
	}
	if err := of.check(); err != nil {
		return bad("%v", err)
	}
	obs, obsCode, err := startTelemetry(of, "call", "call", stderr)
	if err != nil {
		fmt.Fprintln(stderr, "agentwire call:", err)
		return obsCode
	}

	// From here on a signal stops the call cleanly: the first runs the
	// ladder and writes the report, a second kills the server's group.
	intr := watchInterrupts()
	defer intr.stop()
	// Spans are flushed on every way out, within their bound, after the
	// server's shutdown and with the signals still watched.
	defer obs.close()
	// The call's CLIENT span is a root, or a child of $TRACEPARENT's.
	callCtx := obs.traceRoot(intr.ctx)
	interrupted := func() int {
		fmt.Fprintf(stderr, "agentwire call: interrupted by %s\n", signalName(intr.signal()))
		return intr.code()
	}

	var cmd process.Command
	if len(argv) > 0 {
		cmd = process.Command{Path: argv[0], Args: argv[1:], Env: obs.childEnv()}
	}
	transport := &client.Options{Logger: logger, Process: &process.Options{Grace: *grace, Logger: logger}}
	proto := telemetry.MCP
	if *era == "none" {
		proto = telemetry.JSONRPC
	}
	switch {
	case *connect != "":
		t, peer := socketTransport(*connect)
		transport.Outbound = obs.clientSide(proto, t, false, peer)
		transport.Middleware = obs.serverSide(proto, t, false)
	case *url != "":
		transport.Outbound = obs.clientSide(proto, telemetry.TCP, true, urlPeer(*url))
	default:
		transport.Outbound = obs.clientSide(proto, telemetry.Pipe, false, "")
		transport.Middleware = obs.serverSide(proto, telemetry.Pipe, false)
	}
	rep := callReport{Era: "none", Probe: string(host.ProbeNone)}
	var ctx context.Context // the call's, made once connected

	var c *client.Client
	var closeSession func() process.ShutdownResult
	var call func() (json.RawMessage, error)
	var sock net.Conn
	if *connect != "" {
		dctx, dcancel := context.WithTimeout(intr.ctx, *connectTimeout)
		var err error
		sock, err = socket.Dial(dctx, *connect)
		dcancel()
		if _, ok := interruptedBy(intr.ctx); ok {
			if sock != nil {
				sock.Close()
			}
			return interrupted()
		}
		if err != nil {
			fmt.Fprintln(stderr, "agentwire call:", err)
			return exitTransport
		}
	}
	if *era == "none" {
		var err error
		if sock != nil {
			c = client.New(sock, sock, transport)
		} else if c, err = client.Start(cmd, transport); err != nil {
			fmt.Fprintln(stderr, "agentwire call:", err)
			return exitTransport
		}
		call = func() (json.RawMessage, error) { return c.Call(ctx, *method, p) }
		closeSession = c.Close
		if m := obs.m(); m != nil {
			obs.observe(m.ObserveClient(c))
		}
	} else {
		start := host.StartServer
		if sock != nil {
			start = func(ctx context.Context, _ process.Command, o *host.Options) (*host.Session, error) {
				return host.NewClient(ctx, sock, sock, o)
			}
		}
		if *url != "" {
			co := &streamable.ClientOptions{Token: *token}
			if *oauth.use {
				oc, err := oauth.start(intr.ctx, "call", stderr, *url)
				if _, ok := interruptedBy(intr.ctx); ok {
					if oc != nil {
						oc.close()
					}
					return interrupted()
				}
				if err != nil {
					fmt.Fprintln(stderr, "agentwire call: --oauth:", err)
					return exitTransport
				}
				defer oc.close()
				co = &streamable.ClientOptions{Authorizer: oc.authorizer}
			}
			start = func(ctx context.Context, _ process.Command, o *host.Options) (*host.Session, error) {
				return streamable.Connect(ctx, *url, o, co)
			}
		}
		sess, err := start(callCtx, cmd, &host.Options{
			ConnectTimeout: *connectTimeout,
			Eras:           eras, ProbeTimeout: *probeTimeout, ProcessStartupAllowance: noneIfZero(*allowance),
			Transport: transport, Info: mcp.Implementation{Name: "agentwire-call", Version: "1"},
			Capabilities: in.capabilities(), OnInput: in.answer,
		})
		var ce *host.ConnectError
		if errors.As(err, &ce) {
			if m := obs.m(); m != nil {
				m.RecordConnectError(context.Background(), err)
			}
			code := exitTransport
			if _, ok := interruptedBy(intr.ctx); ok {
				code = interrupted()
			} else {
				fmt.Fprintln(stderr, "agentwire call:", errorText(err, *report))
			}
			rep.Era, rep.Probe, rep.ConnectMS = "", string(ce.Probe), ce.Duration.Milliseconds()
			if *report {
				writeReport(stderr, rep, ce.Client, ce.Shutdown)
			}
			return code
		}
		if err != nil {
			if _, ok := interruptedBy(intr.ctx); ok {
				return interrupted()
			}
			fmt.Fprintln(stderr, "agentwire call:", errorText(err, false))
			return exitTransport
		}
		c = sess.Client()
		closeSession = sess.Close
		if m := obs.m(); m != nil {
			obs.observe(m.ObserveSession(sess))
		}
		rep.Era, rep.ProtocolVersion, rep.Probe = sess.Era().String(), sess.ProtocolVersion(), string(sess.Probe())
		rep.ConnectMS = sess.ConnectDuration().Milliseconds()
		call = func() (json.RawMessage, error) { return sess.Request(ctx, *method, p) }
		if *asTask {
			call = func() (json.RawMessage, error) {
				return callAsTask(ctx, intr.ctx, sess, *tool, json.RawMessage(*toolArgs), stderr)
			}
		}
	}
	if c != nil {
		if proc := c.Process(); proc != nil {
			defer intr.onSecond(proc.Kill)()
		}
	}
	// The time the user takes to answer the server does not count.
	clock := newPausableDeadline(callCtx, *timeout)
	ctx, stopCall := context.WithCancel(clock.ctx)
	in.mu.Lock()
	in.stop, in.clock = stopCall, clock
	in.mu.Unlock()
	res, err := call()
	timedOut := errors.Is(context.Cause(clock.ctx), context.DeadlineExceeded)
	stopCall()
	clock.stop()

	code := exitOK
	var rpcErr *jsonrpc.Error
	_, wasInterrupted := interruptedBy(intr.ctx)
	switch missing := in.unansweredRequest(); {
	case wasInterrupted:
		code = interrupted()
	case missing != "":
		fmt.Fprintln(stderr, inputHelp(missing))
		code = exitInput
	case err == nil:
		fmt.Fprintf(stdout, "%s\n", res)
	case errors.As(err, &rpcErr):
		fmt.Fprintf(stdout, "%s\n", jsonrpc.AppendError(nil, rpcErr))
		code = exitFailure
	case timedOut || errors.Is(err, context.DeadlineExceeded):
		fmt.Fprintf(stderr, "agentwire call: no response to %s within %v\n", *method, *timeout)
		code = exitTransport
	default:
		fmt.Fprintln(stderr, "agentwire call:", errorText(err, *report))
		code = exitTransport
	}

	shut := closeSession()
	obs.recordShutdown(shut)
	if intr.secondCame() && shut.Outcome != "" && shut.ExitCode == -1 {
		// The second signal killed it, whatever step the ladder was at.
		shut.Outcome = process.Killed
	}
	if *report {
		writeReport(stderr, rep, c, shut)
	}
	if !wasInterrupted && intr.code() != 0 { // during the shutdown
		code = interrupted()
	}
	return code
}

// errorText is err's message for stderr, bounded: a server's stderr tail
// in it is cut to its first and last lines, each line to a terminal's
// width or so, and left out entirely when the report carries it.
func errorText(err error, reported bool) string {
	if reported {
		return errorWithout(err, " (its stderr tail is in the report)")
	}
	return boundText(err.Error())
}

// errorWithout is err's message with the server's stderr tail replaced by
// note, for when the tail is shown elsewhere.
func errorWithout(err error, note string) string {
	msg := err.Error()
	if i := strings.Index(msg, "; stderr tail:\n"); i >= 0 {
		return cutLine(msg[:i], maxErrLineSize) + note
	}
	return boundText(msg)
}

// writeReport completes rep from the client and the shutdown and writes it
// as one JSON line. The stderr tail includes the last words of a server
// that was lost and restarted.
func writeReport(w io.Writer, rep callReport, c *client.Client, shut process.ShutdownResult) {
	if c == nil { // over HTTP: no process, no stream
		b, _ := json.Marshal(rep)
		fmt.Fprintf(w, "%s\n", b)
		return
	}
	st := c.Stats()
	rep.Shutdown = string(shut.Outcome)
	rep.ShutdownMS = shut.Duration.Milliseconds()
	rep.StdoutViolations = st.Violations
	rep.LateResponses = st.LateResponses
	rep.Restarts = st.Restarts
	rep.ExitCode = shut.ExitCode
	if p := c.Process(); p != nil {
		rep.StderrTail = p.StderrTail()
	}
	var lost *client.ConnectionLostError
	if st.Restarts > 0 && errors.As(c.LastLoss(), &lost) && lost.Exit != nil && lost.Exit.StderrTail != "" &&
		lost.Exit.StderrTail != rep.StderrTail { // a server that fails the same way twice is quoted once
		rep.StderrTail = lost.Exit.StderrTail + rep.StderrTail
	}
	b, _ := json.Marshal(rep)
	fmt.Fprintf(w, "%s\n", b)
}

// noneIfZero maps "no allowance" to mcp's negative "none" (0 there means
// the default).
func noneIfZero(d time.Duration) time.Duration {
	if d <= 0 {
		return -1
	}
	return d
}

func newLogger(level string, w io.Writer) (*slog.Logger, bool) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, false
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: l})), true
}

// discard is a logger for the demo's clients: the demo prints tables, not logs.
var discard = slog.New(slog.DiscardHandler)

// callAsTask runs a tool as a task and waits for it, telling stderr of
// every status change. When the wait is interrupted the task is
// cancelled, so that nothing keeps running on the server unseen.
func callAsTask(ctx, intr context.Context, sess *host.Session, tool string, args json.RawMessage, stderr io.Writer) (json.RawMessage, error) {
	task, err := sess.StartTool(ctx, tool, args)
	if err != nil {
		return nil, err
	}
	if task.ID() == "" {
		fmt.Fprintln(stderr, "agentwire call: the server answered at once, without a task")
	} else {
		fmt.Fprintf(stderr, "agentwire call: task %s started\n", task.ID())
	}
	res, err := task.Wait(ctx, func(st *host.TaskState) {
		line := "agentwire call: task " + st.ID + ": " + st.Status
		if st.StatusMessage != "" {
			line += " (" + cutLine(st.StatusMessage, 200) + ")"
		}
		fmt.Fprintln(stderr, line)
	})
	if err != nil && task.ID() != "" && (ctx.Err() != nil || intr.Err() != nil) {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		if cerr := task.Cancel(cctx); cerr == nil {
			fmt.Fprintf(stderr, "agentwire call: task %s cancelled\n", task.ID())
		}
		cancel()
	}
	if errors.Is(err, host.ErrTaskCancelled) {
		return nil, fmt.Errorf("task %s was cancelled", task.ID())
	}
	if err != nil {
		return nil, err
	}
	return json.Marshal(res)
}
