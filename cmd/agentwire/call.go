package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/agentwire/agentwire/client"
	"github.com/agentwire/agentwire/jsonrpc"
	"github.com/agentwire/agentwire/process"
)

// callReport is what --report writes to stderr.
type callReport struct {
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
	method := fs.String("method", "ping", "the request's method")
	params := fs.String("params", "", "the request's params, as JSON")
	timeout := fs.Duration("timeout", 30*time.Second, "how long to wait for the response")
	grace := fs.Duration("grace", process.DefaultGrace, "each wait of the shutdown ladder")
	report := fs.Bool("report", false, "write a JSON report of the session to stderr")
	logLevel := fs.String("log-level", "error", "debug, info, warn or error")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	argv := fs.Args()
	if len(argv) == 0 {
		fmt.Fprintln(stderr, "agentwire call: missing the server command (agentwire call [flags] -- CMD [ARGS...])")
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
	if *timeout <= 0 || *grace <= 0 {
		fmt.Fprintln(stderr, "agentwire call: --timeout and --grace must be positive")
		return 2
	}
	logger, ok := newLogger(*logLevel, stderr)
	if !ok {
		fmt.Fprintf(stderr, "agentwire call: bad --log-level %q\n", *logLevel)
		return 2
	}

	c, err := client.Start(process.Command{Path: argv[0], Args: argv[1:]}, &client.Options{
		Logger:  logger,
		Process: &process.Options{Grace: *grace, Logger: logger},
	})
	if err != nil {
		fmt.Fprintln(stderr, "agentwire call:", err)
		return 2
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	res, err := c.Call(ctx, *method, p)
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

	shut := c.Close()
	if *report {
		st := c.Stats()
		r := callReport{
			Shutdown:         string(shut.Outcome),
			ShutdownMS:       shut.Duration.Milliseconds(),
			StdoutViolations: st.Violations,
			LateResponses:    st.LateResponses,
			Restarts:         st.Restarts,
			ExitCode:         shut.ExitCode,
		}
		if p := c.Process(); p != nil {
			r.StderrTail = p.StderrTail()
		}
		b, _ := json.Marshal(r)
		fmt.Fprintf(stderr, "%s\n", b)
	}
	return code
}

func newLogger(level string, w io.Writer) (*slog.Logger, bool) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, false
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: l})), true
}
