package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/agentwire/agentwire/acp"
	"github.com/agentwire/agentwire/echo"
	"github.com/agentwire/agentwire/internal/acpdemo"
	"github.com/agentwire/agentwire/internal/seedserver"
	"github.com/agentwire/agentwire/mcp"
	mcpserver "github.com/agentwire/agentwire/mcp/server"
	"github.com/agentwire/agentwire/mcp/streamable"
	"github.com/agentwire/agentwire/rpc"
	"github.com/agentwire/agentwire/socket"
	"github.com/agentwire/agentwire/stdio"
	"github.com/agentwire/agentwire/telemetry"
)

func runServe(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && isHelp(args[0]) {
		fmt.Fprint(stdout, serveSynopsis+serveHelp)
		return exitOK
	}
	if len(args) == 0 || (args[0] != "echo" && args[0] != "mcp" && args[0] != "acp") {
		what := "missing the server name"
		if len(args) > 0 {
			what = fmt.Sprintf("unknown server %q", cutLine(args[0], 80))
		}
		return usageError(stderr, "serve", serveSynopsis, "%s (echo, mcp or acp)", what)
	}
	name := args[0]
	fs := newFlags("serve " + name)
	maxConcurrent := fs.Int("max-concurrent", rpc.DefaultMaxConcurrentRequests, "handlers running at once")
	maxMessage := fs.Int("max-message-bytes", rpc.DefaultMaxMessageBytes, "largest accepted line in bytes")
	grace := fs.Duration("grace", rpc.DefaultEndOfStreamTimeout, "end-of-stream grace for running handlers")
	shutdown := fs.Duration("shutdown-timeout", rpc.DefaultShutdownTimeout, "bound on cancelled handlers and the final drain")
	logLevel := fs.String("log-level", "warn", "debug, info, warn or error")
	listen := fs.String("listen", "", "serve clients on unix:PATH or tcp:HOST:PORT instead of stdio")
	of := addOTelFlags(fs, true)
	var maxBackground *int
	if name == "acp" {
		maxBackground = fs.Int("max-background", acp.DefaultMaxBackground, "prompts and MCP bridge requests running at once per connection")
	}
	var era, httpAddr, fixtureSet *string
	var taskTTL *time.Duration
	var hf *httpFlags
	var rf *redisFlags
	var legacySilent, ignoreEOF, ignoreTerm, noGuard, demoTools *bool
	if name == "mcp" {
		httpAddr = fs.String("http", "", "serve Streamable HTTP on [HOST:]PORT (host default 127.0.0.1) instead of stdio")
		fixtureSet = fs.String("fixtures", "", "add a fixture set: conformance (the MCP conformance suite's tools, resources and prompts)")
		hf = addHTTPFlags(fs)
		rf = addRedisFlags(fs)
		era = fs.String("era", "dual", "dual, modern or legacy")
		taskTTL = fs.Duration("task-ttl", 0, "how long a task is kept once it has ended (default 1h)")
		legacySilent = fs.Bool("legacy-silent", false, "as a legacy server, answer nothing before initialize")
		ignoreEOF = fs.Bool("ignore-eof", false, "keep running after stdin EOF")
		ignoreTerm = fs.Bool("ignore-sigterm", false, "ignore SIGTERM")
		noGuard = fs.Bool("no-stdout-guard", false, "let tools write to stdout (chatty pollutes the stream)")
		demoTools = fs.Bool("demo-tools", false, "with --http: offer crash too, which ends the server (left out over HTTP otherwise)")
	}
	synopsis := "usage: agentwire serve " + name + " [flags]\n"
	if code, done := parseFlags(fs, args[1:], synopsis, stdout, stderr); done {
		return code
	}
	if fs.NArg() > 0 {
		return usageError(stderr, "serve "+name, synopsis, "unexpected argument %q", cutLine(fs.Arg(0), 80))
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(strings.ToUpper(*logLevel))); err != nil {
		fmt.Fprintf(stderr, "agentwire serve %s: bad --log-level %q\n", name, *logLevel)
		return 2
	}
	if *maxConcurrent <= 0 || *maxMessage <= 0 || *grace <= 0 || *shutdown <= 0 {
		fmt.Fprintf(stderr, "agentwire serve %s: limits and timeouts must be positive\n", name)
		return 2
	}
	if err := of.check(); err != nil {
		return usageError(stderr, "serve "+name, synopsis, "%v", err)
	}
	// Spans and metrics, when asked for, are started just before serving
	// (once every flag has been checked) and flushed on every way out.
	var obs *observability
	defer func() { obs.close() }()
	startObs := func() (int, bool) {
		var code int
		var err error
		if obs, code, err = startTelemetry(of, "serve", "serve "+name, stderr); err != nil {
			fmt.Fprintf(stderr, "agentwire serve %s: %v\n", name, err)
			return code, false
		}
		return 0, true
	}
	proto := map[string]telemetry.Protocol{"echo": telemetry.JSONRPC, "mcp": telemetry.MCP, "acp": telemetry.ACP}[name]
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	base := &rpc.Options{
		MaxConcurrentRequests: *maxConcurrent,
		MaxMessageBytes:       *maxMessage,
		EndOfStreamTimeout:    *grace,
		ShutdownTimeout:       *shutdown,
		Logger:                logger,
	}

	if fixtureSet != nil && *fixtureSet != "" && *fixtureSet != "conformance" {
		fmt.Fprintf(stderr, "agentwire serve mcp: unknown --fixtures %q (conformance)\n", *fixtureSet)
		return 2
	}
	if taskTTL != nil && *taskTTL < 0 {
		fmt.Fprintln(stderr, "agentwire serve mcp: --task-ttl must be positive")
		return 2
	}
	var eras mcp.Eras
	if era != nil {
		var ok bool
		if eras, ok = parseEraFlag(*era, "dual"); !ok {
			fmt.Fprintf(stderr, "agentwire serve mcp: bad --era %q (dual, modern or legacy)\n", *era)
			return 2
		}
	}
	if *listen != "" && name == "mcp" && (*ignoreEOF || *ignoreTerm || *noGuard) {
		fmt.Fprintln(stderr, "agentwire serve mcp: --ignore-eof, --ignore-sigterm and --no-stdout-guard are stdio behaviours; they do not combine with --listen")
		return 2
	}
	if httpAddr != nil && *httpAddr != "" {
		if *listen != "" || *ignoreEOF || *ignoreTerm || *noGuard || *legacySilent {
			fmt.Fprintln(stderr, "agentwire serve mcp: --http does not combine with --listen, --ignore-eof, --ignore-sigterm, --no-stdout-guard or --legacy-silent")
			return 2
		}
		addr, err := httpAddress(*httpAddr)
		if err != nil {
			fmt.Fprintln(stderr, "agentwire serve mcp:", err)
			return 2
		}
		o, err := hf.httpOptions(addr, logger)
		if err != nil {
			fmt.Fprintln(stderr, "agentwire serve mcp:", err)
			return 2
		}
		o.Conn = base
		// Over a network, no client may end the server: crash only when
		// asked for.
		so := mcpserver.Options{Logger: logger, Eras: eras}
		closeRedis := func() {}
		if *rf.url != "" {
			if closeRedis, err = rf.apply(&so, o, logger); err != nil {
				fmt.Fprintln(stderr, "agentwire serve mcp:", err)
				return 2
			}
		} else if given := rf.given(fs); len(given) > 0 {
			fmt.Fprintf(stderr, "agentwire serve mcp: %s: only with --redis\n", strings.Join(given, ", "))
			return 2
		}
		withTaskTTL(&so, *taskTTL)
		if code, ok := startObs(); !ok {
			closeRedis()
			return code
		}
		obs.withRPC(base, proto, telemetry.TCP, true)
		srv := seedserver.New(seedserver.Options{Server: so, Stderr: stderr, Fixtures: *fixtureSet, OmitCrash: !*demoTools})
		h := streamable.NewHandler(srv, o)
		if m := obs.m(); m != nil {
			obs.observe(m.ObserveHTTP(h))
			obs.observe(m.ObserveServer(srv))
		}
		intr := watchInterrupts()
		defer intr.stop()
		code := serveHTTP("serve mcp", addr, h, o, stderr, logger, intr)
		// The tasks running here end (failed, in a shared store: no other
		// instance could finish them) before the link to Redis does.
		ctx, cancel := context.WithTimeout(context.Background(), *shutdown)
		srv.Shutdown(ctx)
		cancel()
		closeRedis()
		obs.close() // with the signals still watched
		return code
	}
	if hf != nil {
		given := append(hf.given(), rf.given(fs)...)
		if *demoTools {
			given = append(given, "--demo-tools")
		}
		if len(given) > 0 {
			fmt.Fprintf(stderr, "agentwire serve mcp: %s: only with --http\n", strings.Join(given, ", "))
			return 2
		}
	}
	if code, ok := startObs(); !ok {
		return code
	}
	if *listen != "" {
		t, _ := socketTransport(*listen)
		obs.withRPC(base, proto, t, false)
		return serveListen(name, *listen, stderr, logger, base, maxBackground, eras, legacySilent, fixtureSet, taskTTL, obs)
	}
	obs.withRPC(base, proto, telemetry.Pipe, false)
	ignoring := ignoreTerm != nil && *ignoreTerm
	// A signal's default action would end the server before the flush:
	// the first one flushes, then ends it the same way.
	stopFlush := obs.flushOnSignal(ignoring)
	defer func() {
		obs.close() // with the signals still caught
		stopFlush()
	}()
	var conn interface{ Wait() error }
	var rc *rpc.Conn
	var err error
	stopTasks := func() {}
	switch name {
	case "echo":
		rc, err = stdio.Serve(echo.Handler(), echo.Options(base), nil)
		conn = rc
	case "acp":
		var ac *acp.Conn
		if ac, err = acp.ServeStdio(acpdemo.New(), &acp.Options{MaxBackground: *maxBackground, ShutdownGrace: *grace, Logger: logger}, base); err == nil {
			conn, rc = ac, ac.Conn
		}
	case "mcp":
		so := mcpserver.Options{Eras: eras, LegacySilent: *legacySilent, Logger: logger}
		withTaskTTL(&so, *taskTTL)
		if *ignoreTerm {
			signal.Ignore(syscall.SIGTERM)
		}
		srv := seedserver.New(seedserver.Options{Server: so, Stderr: stderr, Fixtures: *fixtureSet})
		if m := obs.m(); m != nil {
			obs.observe(m.ObserveServer(srv))
		}
		rc, err = srv.ServeStdio(&stdio.Config{NoGuard: *noGuard}, base)
		conn = rc
		stopTasks = func() {
			// The client has gone: its tasks' handlers stop (their tasks
			// end failed), within the shutdown bound.
			ctx, cancel := context.WithTimeout(context.Background(), *shutdown)
			defer cancel()
			srv.Shutdown(ctx)
		}
	}
	if err != nil {
		logger.Error("cannot start", "error", err)
		return 1
	}
	if m := obs.m(); m != nil {
		obs.observe(m.ObserveConn(rc))
	}
	err = conn.Wait()
	stopTasks()
	if ignoreEOF != nil && *ignoreEOF {
		// What was served is flushed before the endless wait.
		obs.close()
		for { // a server that will not stop: only a signal ends it
			time.Sleep(time.Hour)
		}
	}
	if err != nil {
		logger.Warn("connection ended", "error", err)
		return 1
	}
	return 0
}

// withTaskTTL sets how long the server keeps a task once it has ended
// (--task-ttl; 0 leaves the default), in whatever store it has.
func withTaskTTL(so *mcpserver.Options, ttl time.Duration) {
	if ttl <= 0 {
		return
	}
	if so.Tasks == nil {
		so.Tasks = &mcpserver.TaskOptions{}
	}
	so.Tasks.TTL = ttl
}

// parseEraFlag reads an --era value through mcp.ParseEras, accepting only
// the words the command's help lists: bothWord ("dual" for serve, "auto"
// for call) for mcp.BothEras, and modern or legacy.
func parseEraFlag(s, bothWord string) (mcp.Eras, bool) {
	e, err := mcp.ParseEras(s)
	if err != nil || (e == mcp.BothEras && s != bothWord) {
		return mcp.BothEras, false
	}
	return e, true
}

// serveListen serves clients on a socket until SIGINT or SIGTERM: each gets
// its own connection, as if it had started the server itself.
func serveListen(name, addr string, stderr io.Writer, logger *slog.Logger, base *rpc.Options,
	maxBackground *int, eras mcp.Eras, legacySilent *bool, fixtureSet *string, taskTTL *time.Duration, obs *observability) int {
	var newConn func() (rpc.Handler, *rpc.Options)
	switch name {
	case "echo":
		newConn = func() (rpc.Handler, *rpc.Options) { return echo.Handler(), echo.Options(base) }
	case "mcp":
		so := mcpserver.Options{Eras: eras, LegacySilent: *legacySilent, Logger: logger}
		withTaskTTL(&so, *taskTTL)
		srv := seedserver.New(seedserver.Options{Server: so, Stderr: stderr, Fixtures: *fixtureSet})
		if m := obs.m(); m != nil {
			obs.observe(m.ObserveServer(srv))
		}
		newConn = func() (rpc.Handler, *rpc.Options) { return srv.Handler(), srv.ConnOptions(base) }
	case "acp":
		agent := acpdemo.New()
		newConn = func() (rpc.Handler, *rpc.Options) {
			return acp.ConnOptions(agent, &acp.Options{MaxBackground: *maxBackground, Logger: logger}, base)
		}
	}
	l, err := socket.Listen(addr)
	if err != nil {
		fmt.Fprintf(stderr, "agentwire serve %s: %v\n", name, err)
		return 1
	}
	intr := watchInterrupts()
	defer intr.stop()
	defer obs.close() // with the signals still watched
	// Say where: with tcp:HOST:0 the port is known only now.
	fmt.Fprintf(stderr, "agentwire serve %s: listening on %s:%s\n", name, l.Addr().Network(), l.Addr())
	srv := &socket.Server{NewConn: newConn}
	if m := obs.m(); m != nil {
		srv.OnConn = func(c *rpc.Conn) func() { return m.ObserveConn(c) }
	}
	if err := srv.Serve(intr.ctx, l); err != nil {
		fmt.Fprintf(stderr, "agentwire serve %s: %v\n", name, err)
		return exitFailure
	}
	return exitOK
}

// isHelp reports whether arg asks for help.
func isHelp(arg string) bool {
	return arg == "-h" || arg == "-help" || arg == "--help" || arg == "help"
}

// serveHelp follows the synopsis in `agentwire serve --help`.
const serveHelp = `
  echo   the echo test server (methods echo and sleep)
  mcp    the example MCP server, both protocol eras
  acp    the example ACP agent

On stdin/stdout, or on a socket with --listen unix:PATH|tcp:HOST:PORT (serve mcp
also over Streamable HTTP with --http [HOST:]PORT). Run agentwire serve NAME --help
for the flags of each.
`
