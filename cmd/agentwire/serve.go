package main

import (
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strings"

	"github.com/agentwire/agentwire/echo"
	"github.com/agentwire/agentwire/rpc"
	"github.com/agentwire/agentwire/stdio"
)

func runServe(args []string, stderr io.Writer) int {
	if len(args) == 0 || args[0] != "echo" {
		fmt.Fprintf(stderr, "agentwire serve: expected a server name (echo)\n\n%s", usage)
		return 2
	}
	fs := flag.NewFlagSet("serve echo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	maxConcurrent := fs.Int("max-concurrent", rpc.DefaultMaxConcurrentRequests, "handlers running at once")
	maxMessage := fs.Int("max-message-bytes", rpc.DefaultMaxMessageBytes, "largest accepted line in bytes")
	grace := fs.Duration("grace", rpc.DefaultEndOfStreamTimeout, "end-of-stream grace for running handlers")
	shutdown := fs.Duration("shutdown-timeout", rpc.DefaultShutdownTimeout, "bound on cancelled handlers and the final drain")
	logLevel := fs.String("log-level", "warn", "debug, info, warn or error")
	if err := fs.Parse(args[1:]); err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "agentwire serve echo: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(strings.ToUpper(*logLevel))); err != nil {
		fmt.Fprintf(stderr, "agentwire serve echo: bad --log-level %q\n", *logLevel)
		return 2
	}
	if *maxConcurrent <= 0 || *maxMessage <= 0 || *grace <= 0 || *shutdown <= 0 {
		fmt.Fprintln(stderr, "agentwire serve echo: limits and timeouts must be positive")
		return 2
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	opts := echo.Options(&rpc.Options{
		MaxConcurrentRequests: *maxConcurrent,
		MaxMessageBytes:       *maxMessage,
		EndOfStreamTimeout:    *grace,
		ShutdownTimeout:       *shutdown,
		Logger:                logger,
	})
	conn, err := stdio.Serve(echo.Handler(), opts, nil)
	if err != nil {
		logger.Error("cannot start", "error", err)
		return 1
	}
	if err := conn.Wait(); err != nil {
		logger.Warn("connection ended", "error", err)
		return 1
	}
	return 0
}
