package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/agentwire/agentwire/client"
	"github.com/agentwire/agentwire/mcp"
	"github.com/agentwire/agentwire/mcp/bridge"
	"github.com/agentwire/agentwire/mcp/host"
	"github.com/agentwire/agentwire/mcp/streamable"
	"github.com/agentwire/agentwire/process"
	"github.com/agentwire/agentwire/rpc"
	"github.com/agentwire/agentwire/telemetry"
)

// listFlag is a repeatable string flag.
type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

// TokenEnv is the environment variable a serving command takes its bearer
// token from when neither --token nor --token-file is given.
const TokenEnv = "AGENTWIRE_TOKEN"

// UpstreamTokenEnv is the environment variable bridge --url takes the
// bearer token it sends upstream from when --url-token is not given.
const UpstreamTokenEnv = "AGENTWIRE_UPSTREAM_TOKEN"

// httpFlags are the flags of every command that serves Streamable HTTP.
type httpFlags struct {
	fs          *flag.FlagSet
	token       *string
	tokenFile   *string
	origins     listFlag
	hosts       listFlag
	maxConns    *int
	maxInFlight *int
	maxBuffered *int64
	idle        *time.Duration
	write       *time.Duration
	oauth       *oauthFlags

	sessions    *bool
	sessionIdle *time.Duration
	maxSessions *int
	sse         *bool
}

func addHTTPFlags(fs *flag.FlagSet) *httpFlags {
	f := &httpFlags{fs: fs,
		token:       fs.String("token", "", "require this bearer token on every request (401 otherwise); visible to other local users in ps, prefer --token-file or $"+TokenEnv),
		tokenFile:   fs.String("token-file", "", "require the bearer token read from this file (one trailing newline is ignored)"),
		maxConns:    fs.Int("max-conns", 0, "connections open at once (default 1024, at most half the open-file limit); beyond, the one waiting longest without a request is closed, or 503"),
		maxInFlight: fs.Int("max-in-flight", 0, "requests served at once across all clients (default 256, or --max-concurrent); 503 beyond"),
		maxBuffered: fs.Int64("max-buffered-bytes", 0, "request bytes held by the requests in flight (default 16777216); 503 beyond"),
		idle:        fs.Duration("idle-timeout", 0, "close a connection that sends no request for this long (default 30s; a new connection gets at most 10s for its headers)"),
		write:       fs.Duration("write-timeout", 0, "cut off a client that reads nothing of its response for this long (default 30s)"),
		sessions:    fs.Bool("sessions", false, "serve 2025 (legacy) clients in sessions: Mcp-Session-Id, the GET stream for server messages, DELETE, resumption with Last-Event-ID (default: statelessly, GET and DELETE 405)"),
		sessionIdle: fs.Duration("session-idle", 0, "with --sessions: end a session idle this long (default 10m; 60s for one that sent nothing after initialize)"),
		maxSessions: fs.Int("max-sessions", 0, "with --sessions: live sessions (default 4096); beyond, the one idle longest is ended, or initialize gets 503"),
		sse:         fs.Bool("sse", false, "also serve the 2024-11-05 HTTP+SSE transport (GET /sse, POST /messages) for clients older than Streamable HTTP"),
	}
	fs.Var(&f.origins, "allow-origin", "an Origin browsers may call from, besides loopback ones (repeatable; * for any)")
	fs.Var(&f.hosts, "allow-host", "a Host name the server answers to (repeatable; default on loopback: localhost, 127.0.0.1, ::1)")
	f.oauth = addOAuthFlags(fs)
	return f
}

// given lists the HTTP flags on the command line.
func (f *httpFlags) given() []string {
	var names []string
	f.fs.Visit(func(fl *flag.Flag) {
		switch fl.Name {
		case "token", "token-file", "allow-origin", "allow-host", "max-conns", "max-in-flight",
			"max-buffered-bytes", "idle-timeout", "write-timeout",
			"sessions", "session-idle", "max-sessions", "sse",
			"oauth-issuer", "oauth-resource", "oauth-introspect", "oauth-scope":
			names = append(names, "--"+fl.Name)
		}
	})
	return names
}

// resolveToken returns the bearer token to require: --token or
// --token-file (not both), else $AGENTWIRE_TOKEN, else none. A source that
// is given but empty is an error, never a server without authentication:
// `--token "$TOKEN"` with TOKEN unset must not open the server to anyone.
// The variable is removed from the environment once read, so that the
// servers a bridge starts do not inherit it.
func (f *httpFlags) resolveToken() (string, error) {
	set := map[string]bool{}
	f.fs.Visit(func(fl *flag.Flag) { set[fl.Name] = true })
	var token, from string
	switch {
	case set["token"] && set["token-file"]:
		return "", errors.New("--token and --token-file are exclusive")
	case set["token"]:
		token, from = *f.token, "--token"
	case set["token-file"]:
		b, err := os.ReadFile(*f.tokenFile)
		if err != nil {
			return "", fmt.Errorf("--token-file: %v", err)
		}
		token, from = string(b), "--token-file "+*f.tokenFile
		token = strings.TrimSuffix(token, "\n")
		token = strings.TrimSuffix(token, "\r")
	default:
		v, ok := os.LookupEnv(TokenEnv)
		if !ok {
			return "", nil
		}
		os.Unsetenv(TokenEnv)
		token, from = v, "$"+TokenEnv
	}
	if token == "" {
		return "", fmt.Errorf("%s is empty: refusing to serve without authentication (omit it to serve without a token)", from)
	}
	for i := 0; i < len(token); i++ {
		if token[i] <= ' ' || token[i] > '~' {
			return "", fmt.Errorf("%s: the token must be visible ASCII without spaces", from)
		}
	}
	return token, nil
}

// httpAddress turns ADDR, :PORT or PORT into host:port, binding 127.0.0.1
// when no host is given: "Local servers SHOULD bind to 127.0.0.1, not
// 0.0.0.0" (2026-07-28 transports, Security).
func httpAddress(addr string) (string, error) {
	if !strings.Contains(addr, ":") {
		addr = ":" + addr
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", fmt.Errorf("bad address %q: %v", addr, err)
	}
	if host == "" {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, port), nil
}

// httpOptions builds the endpoint's options: on a loopback address only
// loopback Host names are answered (DNS rebinding), unless --allow-host
// says otherwise. It fails when the token or a limit is bad.
func (f *httpFlags) httpOptions(addr string, logger *slog.Logger) (*streamable.Options, error) {
	token, err := f.resolveToken()
	if err != nil {
		return nil, err
	}
	set := map[string]bool{}
	f.fs.Visit(func(fl *flag.Flag) { set[fl.Name] = true })
	prot, err := f.oauth.protection(set)
	if err != nil {
		return nil, err
	}
	if prot != nil && token != "" {
		return nil, fmt.Errorf("a fixed bearer token (--token, --token-file or $%s) and OAuth (--oauth-issuer) exclude each other", TokenEnv)
	}
	if *f.maxConns < 0 || *f.maxInFlight < 0 || *f.maxBuffered < 0 || *f.idle < 0 || *f.write < 0 {
		return nil, errors.New("--max-conns, --max-in-flight, --max-buffered-bytes, --idle-timeout and --write-timeout must not be negative")
	}
	if *f.sessionIdle < 0 || *f.maxSessions < 0 {
		return nil, errors.New("--session-idle and --max-sessions must not be negative")
	}
	if !*f.sessions && (set["session-idle"] || set["max-sessions"]) {
		return nil, errors.New("--session-idle and --max-sessions only with --sessions")
	}
	o := &streamable.Options{Token: token, AllowedOrigins: f.origins, AllowedHosts: f.hosts, Logger: logger,
		MaxConns: *f.maxConns, MaxInFlight: *f.maxInFlight, MaxBufferedBytes: *f.maxBuffered,
		IdleTimeout: *f.idle, WriteTimeout: *f.write, Protect: prot}
	if *f.sessions {
		o.Sessions = &streamable.SessionOptions{IdleTimeout: *f.sessionIdle, MaxSessions: *f.maxSessions}
	}
	if *f.sse {
		o.SSE = &streamable.SSEOptions{}
	}
	host, _, _ := net.SplitHostPort(addr)
	if len(o.AllowedHosts) == 0 && streamable.IsLoopbackHost(host) {
		o.AllowedHosts = []string{"localhost", "127.0.0.1", "::1"}
	}
	return o, nil
}

// serveHTTP serves h on addr until SIGINT or SIGTERM, then ends event
// streams and waits (bounded, and cut short by a second signal) for
// requests in flight. h.Serve applies the connection limits (cap, header
// and idle timeouts, header size); the descriptors they are sized by are
// the hard limit, to which Go raises the soft RLIMIT_NOFILE at start.
func serveHTTP(what, addr string, h *streamable.Handler, opts *streamable.Options, stderr io.Writer, logger *slog.Logger, intr *interrupts) int {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		fmt.Fprintf(stderr, "agentwire %s: %v\n", what, err)
		return exitFailure
	}
	// The endpoint's URL goes to stderr, so that a caller that asked for
	// port 0 learns the port.
	fmt.Fprintf(stderr, "agentwire %s: serving MCP over Streamable HTTP at http://%s%s\n", what, ln.Addr(), streamable.DefaultPath)
	if opts.SSE != nil {
		fmt.Fprintf(stderr, "agentwire %s: and over HTTP+SSE (2024-11-05) at http://%s%s\n", what, ln.Addr(), streamable.DefaultSSEPath)
	}
	served := make(chan error, 1)
	go func() { served <- h.Serve(ln) }()
	select {
	case err := <-served:
		fmt.Fprintf(stderr, "agentwire %s: %v\n", what, err)
		return exitFailure
	case <-intr.ctx.Done():
	}
	fmt.Fprintf(stderr, "agentwire %s: %s: stopping (a second signal cuts it short)\n", what, signalName(intr.signal()))
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	defer intr.onSecond(cancel)()
	if err := h.Shutdown(sctx); err != nil {
		logger.Warn("shutdown cut short", "error", err)
	}
	if err := <-served; !errors.Is(err, http.ErrServerClosed) {
		logger.Warn("serving ended", "error", err)
	}
	return exitOK
}

// runBridge is `agentwire bridge --http ADDR -- CMD [ARGS...]`: one stdio
// MCP server, started once and restarted if it crashes, served to every
// Streamable HTTP client of either era; or `agentwire bridge --http ADDR
// --url URL`: an MCP server over HTTP (Streamable HTTP of either era, or
// the 2024-11-05 HTTP+SSE transport) served the same way, which puts a
// 2026-07-28 face on an older server.
func runBridge(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("bridge")
	addr := fs.String("http", "", "serve Streamable HTTP on [HOST:]PORT (host default 127.0.0.1)")
	upstream := fs.String("url", "", "bridge the MCP server at this http(s) URL instead of starting a command")
	upstreamToken := fs.String("url-token", "", "with --url: the bearer token to send upstream (default $"+UpstreamTokenEnv+")")
	hf := addHTTPFlags(fs)
	grace := fs.Duration("grace", process.DefaultGrace, "each wait of the server's shutdown ladder")
	logLevel := fs.String("log-level", "warn", "debug, info, warn or error")
	of := addOTelFlags(fs, true)
	if code, done := parseFlags(fs, args, bridgeSynopsis, stdout, stderr); done {
		return code
	}
	bad := func(format string, a ...any) int { return usageError(stderr, "bridge", bridgeSynopsis, format, a...) }
	argv := fs.Args()
	switch {
	case *addr == "" && len(argv) == 0 && *upstream == "":
		return bad("missing --http [HOST:]PORT and the server (-- CMD [ARGS...] or --url URL)")
	case *addr == "":
		return bad("missing --http [HOST:]PORT")
	case len(argv) > 0 && *upstream != "":
		return bad("--url and a server command exclude each other")
	case len(argv) == 0 && *upstream == "":
		return bad("missing the server (-- CMD [ARGS...] or --url URL)")
	case *upstreamToken != "" && *upstream == "":
		return bad("--url-token only with --url")
	}
	if *upstream != "" && !strings.HasPrefix(*upstream, "http://") && !strings.HasPrefix(*upstream, "https://") {
		return bad("--url must be an http:// or https:// URL")
	}
	if err := of.check(); err != nil {
		return bad("%v", err)
	}
	logger, ok := newLogger(*logLevel, stderr)
	if !ok {
		return bad("bad --log-level %q", *logLevel)
	}
	listenAddr, err := httpAddress(*addr)
	if err != nil {
		return bad("%v", err)
	}
	opts, err := hf.httpOptions(listenAddr, logger)
	if err != nil {
		return bad("%v", err)
	}
	obs, code, err := startTelemetry(of, "bridge", "bridge", stderr)
	if err != nil {
		fmt.Fprintln(stderr, "agentwire bridge:", err)
		return code
	}
	if obs.active() {
		// Every HTTP request gets a SERVER span, whichever path serves it
		// (the stateless exchange, a legacy session, HTTP+SSE: all are
		// built on Conn).
		opts.Conn = &rpc.Options{}
		obs.withRPC(opts.Conn, telemetry.MCP, telemetry.TCP, true)
	}
	// The first signal stops serving and runs the ladder on the server; a
	// second one cuts the HTTP shutdown short and kills the server's group.
	intr := watchInterrupts()
	defer intr.stop()
	// Spans are flushed on every way out, within their bound, after the
	// server's shutdown and with the signals still watched.
	defer obs.close()
	info := mcp.Implementation{Name: "agentwire-bridge", Version: "1"}
	var sess *host.Session
	what := ""
	if *upstream != "" {
		token := *upstreamToken
		if token == "" {
			token = os.Getenv(UpstreamTokenEnv)
		}
		what = *upstream
		sess, err = streamable.Connect(intr.ctx, *upstream, &host.Options{Info: info, Transport: &client.Options{
			Outbound:   obs.clientSide(telemetry.MCP, telemetry.TCP, true, urlPeer(*upstream)),
			Middleware: obs.serverSide(telemetry.MCP, telemetry.TCP, true),
		}}, &streamable.ClientOptions{Token: token})
	} else {
		what = argv[0]
		sess, err = host.StartServer(intr.ctx, process.Command{Path: argv[0], Args: argv[1:], Env: obs.childEnv()}, &host.Options{
			Info: info,
			Transport: &client.Options{
				// What the bridge sends the server is a CLIENT span, child
				// of the HTTP request's SERVER span; what the server asks
				// of the bridge, a SERVER span.
				Outbound:   obs.clientSide(telemetry.MCP, telemetry.Pipe, false, ""),
				Middleware: obs.serverSide(telemetry.MCP, telemetry.Pipe, false),
				Logger:     logger,
				Process:    &process.Options{Grace: *grace, Stderr: stderr, Logger: logger},
				// A shared server is kept up for as long as the bridge runs.
				Restart: &client.RestartPolicy{MaxRestarts: math.MaxInt32},
			},
		})
	}
	if _, ok := interruptedBy(intr.ctx); ok && err != nil {
		fmt.Fprintf(stderr, "agentwire bridge: interrupted by %s\n", signalName(intr.signal()))
		return intr.code()
	}
	if err != nil {
		if m := obs.m(); m != nil {
			m.RecordConnectError(context.Background(), err)
		}
		if *upstream != "" {
			fmt.Fprintln(stderr, "agentwire bridge:", err)
		} else {
			// The server's stderr went to ours as it came: not again here.
			fmt.Fprintln(stderr, "agentwire bridge:", errorWithout(err, " (its stderr is above)"))
		}
		return exitFailure
	}
	// Only a started server has a process; an HTTP upstream has none.
	proc := func() *process.Process {
		if c := sess.Client(); c != nil {
			return c.Process()
		}
		return nil
	}
	defer intr.onSecond(func() {
		if p := proc(); p != nil {
			p.Kill()
		}
	})()
	defer func() {
		obs.recordShutdown(sess.Close())
		// A server restarted while a second signal killed its predecessor
		// has had the ladder too; nothing of its group is left.
		if p := proc(); p != nil {
			p.KillGroup()
		}
	}()
	logger.Info("bridging", "server", what, "era", sess.Era(), "version", sess.ProtocolVersion())
	b := bridge.New(sess)
	h := streamable.NewHandler(b, opts)
	if m := obs.m(); m != nil {
		obs.observe(m.ObserveSession(sess))
		obs.observe(m.ObserveBridge(b))
		obs.observe(m.ObserveHTTP(h))
	}
	return serveHTTP("bridge", listenAddr, h, opts, stderr, logger, intr)
}
