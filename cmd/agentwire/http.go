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
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/agentwire/agentwire/client"
	"github.com/agentwire/agentwire/mcp"
	"github.com/agentwire/agentwire/process"
)

// listFlag is a repeatable string flag.
type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

// httpFlags are the flags of every command that serves Streamable HTTP.
type httpFlags struct {
	token   *string
	origins listFlag
	hosts   listFlag
}

func addHTTPFlags(fs *flag.FlagSet) *httpFlags {
	f := &httpFlags{token: fs.String("token", "", "require this bearer token on every request (401 otherwise)")}
	fs.Var(&f.origins, "allow-origin", "an Origin browsers may call from, besides loopback ones (repeatable; * for any)")
	fs.Var(&f.hosts, "allow-host", "a Host name the server answers to (repeatable; default on loopback: localhost, 127.0.0.1, ::1)")
	return f
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
// says otherwise.
func (f *httpFlags) httpOptions(addr string, logger *slog.Logger) *mcp.HTTPOptions {
	o := &mcp.HTTPOptions{Token: *f.token, AllowedOrigins: f.origins, AllowedHosts: f.hosts, Logger: logger}
	host, _, _ := net.SplitHostPort(addr)
	if len(o.AllowedHosts) == 0 && mcp.IsLoopbackHost(host) {
		o.AllowedHosts = []string{"localhost", "127.0.0.1", "::1"}
	}
	return o
}

// serveHTTP serves h on addr until SIGINT or SIGTERM, then ends event
// streams and waits (bounded) for requests in flight.
func serveHTTP(what, addr string, h *mcp.HTTPHandler, stderr io.Writer, logger *slog.Logger) int {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		fmt.Fprintf(stderr, "agentwire %s: %v\n", what, err)
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, ErrorLog: slog.NewLogLogger(logger.Handler(), slog.LevelWarn)}
	// The endpoint's URL goes to stderr, so that a caller that asked for
	// port 0 learns the port.
	fmt.Fprintf(stderr, "agentwire %s: serving MCP over Streamable HTTP at http://%s/mcp\n", what, ln.Addr())
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	select {
	case err := <-served:
		fmt.Fprintf(stderr, "agentwire %s: %v\n", what, err)
		return 1
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	down := make(chan error, 1)
	go func() { down <- srv.Shutdown(sctx) }() // stops listening at once
	herr := h.Shutdown(sctx)
	if err := <-down; err != nil || herr != nil {
		logger.Warn("shutdown cut short", "error", errors.Join(err, herr))
	}
	return 0
}

// runBridge is `agentwire bridge --http ADDR -- CMD [ARGS...]`: one stdio
// MCP server, started once and restarted if it crashes, served to every
// Streamable HTTP client of either era.
func runBridge(args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("bridge", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("http", "", "serve Streamable HTTP on [HOST:]PORT (host default 127.0.0.1)")
	hf := addHTTPFlags(fs)
	grace := fs.Duration("grace", process.DefaultGrace, "each wait of the server's shutdown ladder")
	logLevel := fs.String("log-level", "warn", "debug, info, warn or error")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	argv := fs.Args()
	if *addr == "" || len(argv) == 0 {
		fmt.Fprintln(stderr, "agentwire bridge: usage: agentwire bridge --http [HOST:]PORT [--token T] [--allow-origin O] -- CMD [ARGS...]")
		return 2
	}
	logger, ok := newLogger(*logLevel, stderr)
	if !ok {
		fmt.Fprintf(stderr, "agentwire bridge: bad --log-level %q\n", *logLevel)
		return 2
	}
	listenAddr, err := httpAddress(*addr)
	if err != nil {
		fmt.Fprintln(stderr, "agentwire bridge:", err)
		return 2
	}
	sess, err := mcp.StartServer(context.Background(), process.Command{Path: argv[0], Args: argv[1:]}, &mcp.ClientOptions{
		Info: mcp.Implementation{Name: "agentwire-bridge", Version: "1"},
		Transport: &client.Options{
			Logger:  logger,
			Process: &process.Options{Grace: *grace, Stderr: stderr, Logger: logger},
			// A shared server is kept up for as long as the bridge runs.
			Restart: &client.RestartPolicy{MaxRestarts: math.MaxInt32},
		},
	})
	if err != nil {
		fmt.Fprintln(stderr, "agentwire bridge:", err)
		return 1
	}
	defer sess.Close()
	logger.Info("bridging", "server", argv[0], "era", sess.Era(), "version", sess.ProtocolVersion())
	h := mcp.NewBridge(sess).HTTPHandler(hf.httpOptions(listenAddr, logger))
	return serveHTTP("bridge", listenAddr, h, stderr, logger)
}
