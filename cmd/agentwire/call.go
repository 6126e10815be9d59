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
	"time"

	"github.com/agentwire/agentwire/client"
	"github.com/agentwire/agentwire/jsonrpc"
	"github.com/agentwire/agentwire/mcp"
	"github.com/agentwire/agentwire/process"
	"github.com/agentwire/agentwire/socket"
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
// down with the ladder; a transport failure exits 2.
func runCall(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("call", flag.ContinueOnError)
	fs.SetOutput(stderr)
	method := fs.String("method", "", "the request's method (default tools/list, or ping with --era none)")
	params := fs.String("params", "", "the request's params, as JSON")
	tool := fs.String("tool", "", "call this tool (tools/call)")
	toolArgs := fs.String("args", "{}", "the tool's arguments, as JSON (with --tool)")
	era := fs.String("era", "auto", "auto, modern, legacy, or none (plain JSON-RPC, no handshake)")
	probeTimeout := fs.Duration("probe-timeout", mcp.DefaultProbeTimeout, "how long the server/discover probe may take")
	allowance := fs.Duration("startup-allowance", mcp.DefaultProcessStartupAllowance,
		"extra time for the first probe of the freshly started server (0 when --probe-timeout is given alone)")
	timeout := fs.Duration("timeout", 30*time.Second, "how long to wait for the response (after connecting)")
	connectTimeout := fs.Duration("connect-timeout", mcp.DefaultConnectTimeout, "how long the MCP negotiation may take")
	grace := fs.Duration("grace", process.DefaultGrace, "each wait of the shutdown ladder")
	report := fs.Bool("report", false, "write a JSON report of the session to stderr")
	logLevel := fs.String("log-level", "error", "debug, info, warn or error")
	connect := fs.String("connect", "", "talk to a server listening on unix:PATH or tcp:HOST:PORT instead of starting one")
	url := fs.String("url", "", "talk to a Streamable HTTP server at this URL instead of starting one")
	token := fs.String("token", "", "the bearer token to send with --url")
	if err := fs.Parse(args); err != nil {
		return 2
	}
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
		fmt.Fprintln(stderr, "agentwire call: missing the server command (agentwire call [flags] -- CMD [ARGS...]), --connect ADDR or --url URL")
		return 2
	}
	if given > 1 {
		fmt.Fprintln(stderr, "agentwire call: give one of a server command, --connect and --url")
		return 2
	}
	if *url != "" && *era == "none" {
		fmt.Fprintln(stderr, "agentwire call: --url speaks MCP over Streamable HTTP; --era none is for stdio and sockets")
		return 2
	}
	if *token != "" && *url == "" {
		fmt.Fprintln(stderr, "agentwire call: --token goes with --url")
		return 2
	}
	var p any
	if *params != "" {
		if !json.Valid([]byte(*params)) {
			fmt.Fprintf(stderr, "agentwire call: --params is not valid JSON: %s\n", *params)
			return 2
		}
		p = json.RawMessage(*params)
	}
	if *timeout <= 0 || *grace <= 0 || *probeTimeout <= 0 || *connectTimeout <= 0 {
		fmt.Fprintln(stderr, "agentwire call: --timeout, --connect-timeout, --grace and --probe-timeout must be positive")
		return 2
	}
	mode := mcp.Auto
	switch *era {
	case "auto":
	case "modern":
		mode = mcp.Modern
	case "legacy":
		mode = mcp.Legacy
	case "none":
	default:
		fmt.Fprintf(stderr, "agentwire call: bad --era %q (auto, modern, legacy or none)\n", *era)
		return 2
	}
	if *tool != "" {
		if *era == "none" {
			fmt.Fprintln(stderr, "agentwire call: --tool needs an MCP era (not --era none)")
			return 2
		}
		if !json.Valid([]byte(*toolArgs)) {
			fmt.Fprintf(stderr, "agentwire call: --args is not valid JSON: %s\n", *toolArgs)
			return 2
		}
		*method = "tools/call"
		p = map[string]any{"name": *tool, "arguments": json.RawMessage(*toolArgs)}
	}
	if *method == "" {
		*method = "tools/list"
		if *era == "none" {
			*method = "ping"
		}
	}
	logger, ok := newLogger(*logLevel, stderr)
	if !ok {
		fmt.Fprintf(stderr, "agentwire call: bad --log-level %q\n", *logLevel)
		return 2
	}

	var cmd process.Command
	if len(argv) > 0 {
		cmd = process.Command{Path: argv[0], Args: argv[1:]}
	}
	transport := &client.Options{Logger: logger, Process: &process.Options{Grace: *grace, Logger: logger}}
	rep := callReport{Era: "none", Probe: string(mcp.ProbeNone)}
	var ctx context.Context // the call's, made once connected

	var c *client.Client
	var closeSession func() process.ShutdownResult
	var call func() (json.RawMessage, error)
	var sock net.Conn
	if *connect != "" {
		dctx, dcancel := context.WithTimeout(context.Background(), *connectTimeout)
		var err error
		sock, err = socket.Dial(dctx, *connect)
		dcancel()
		if err != nil {
			fmt.Fprintln(stderr, "agentwire call:", err)
			return 2
		}
	}
	if *era == "none" {
		var err error
		if sock != nil {
			c = client.New(sock, sock, transport)
		} else if c, err = client.Start(cmd, transport); err != nil {
			fmt.Fprintln(stderr, "agentwire call:", err)
			return 2
		}
		call = func() (json.RawMessage, error) { return c.Call(ctx, *method, p) }
		closeSession = c.Close
	} else {
		start := mcp.StartServer
		if sock != nil {
			start = func(ctx context.Context, _ process.Command, o *mcp.ClientOptions) (*mcp.Session, error) {
				return mcp.NewClient(ctx, sock, sock, o)
			}
		}
		if *url != "" {
			start = func(ctx context.Context, _ process.Command, o *mcp.ClientOptions) (*mcp.Session, error) {
				return mcp.ConnectHTTP(ctx, *url, o, &mcp.HTTPClientOptions{Token: *token})
			}
		}
		sess, err := start(context.Background(), cmd, &mcp.ClientOptions{
			ConnectTimeout: *connectTimeout,
			Mode:           mode, ProbeTimeout: *probeTimeout, ProcessStartupAllowance: noneIfZero(*allowance),
			Transport: transport, Info: mcp.Implementation{Name: "agentwire-call", Version: "1"},
		})
		var ce *mcp.ConnectError
		if errors.As(err, &ce) {
			fmt.Fprintln(stderr, "agentwire call:", err)
			rep.Era, rep.Probe, rep.ConnectMS = "", string(ce.Probe), ce.Duration.Milliseconds()
			if *report {
				writeReport(stderr, rep, ce.Client, ce.Shutdown)
			}
			return 2
		}
		if err != nil {
			fmt.Fprintln(stderr, "agentwire call:", err)
			return 2
		}
		c = sess.Client()
		closeSession = sess.Close
		rep.Era, rep.ProtocolVersion, rep.Probe = sess.Era(), sess.ProtocolVersion(), string(sess.Probe())
		rep.ConnectMS = sess.ConnectDuration().Milliseconds()
		call = func() (json.RawMessage, error) { return sess.Request(ctx, *method, p) }
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	res, err := call()
	cancel()

	code := 0
	var rpcErr *jsonrpc.Error
	switch {
	case err == nil:
		fmt.Fprintf(stdout, "%s\n", res)
	case errors.As(err, &rpcErr):
		fmt.Fprintf(stdout, "%s\n", jsonrpc.AppendError(nil, rpcErr))
		code = 1
	case errors.Is(err, context.DeadlineExceeded):
		fmt.Fprintf(stderr, "agentwire call: no response to %s within %v\n", *method, *timeout)
		code = 2
	default:
		fmt.Fprintln(stderr, "agentwire call:", err)
		code = 2
	}

	shut := closeSession()
	if *report {
		writeReport(stderr, rep, c, shut)
	}
	return code
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
	if st.Restarts > 0 && errors.As(c.LastLoss(), &lost) && lost.Exit != nil && lost.Exit.StderrTail != "" {
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
