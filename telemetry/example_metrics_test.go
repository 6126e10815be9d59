package telemetry_test

import (
	"bufio"
	"context"
	"fmt"
	"log"
	"net/http/httptest"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"

	"github.com/agentwire/agentwire/process"
	"github.com/agentwire/agentwire/rpc"
	"github.com/agentwire/agentwire/telemetry"
)

// A program's telemetry: Start reads the OTEL_* environment (here an
// empty one) and the program's own settings (a Prometheus exposition, an
// --otlp URL when it has one), Options hands the providers to the
// middleware and to Metrics, and Shutdown flushes at exit.
func ExampleStart() {
	ctx := context.Background()
	setup, err := telemetry.Start(ctx, telemetry.SetupOptions{
		ServiceName: "example",
		Prometheus:  true,
		Getenv:      func(string) string { return "" }, // os.Getenv when nil
	})
	if err != nil {
		log.Fatal(err)
	}
	defer setup.Shutdown(ctx)
	fmt.Println("tracing:", setup.Tracing, "metrics:", setup.Metrics)

	metrics, err := telemetry.NewMetrics(setup.Options(telemetry.MCP, telemetry.Pipe))
	if err != nil {
		log.Fatal(err)
	}
	defer metrics.Close()
	metrics.RecordShutdown(ctx, process.ShutdownResult{Outcome: process.Terminated, Duration: 2 * time.Second})

	// What a scrape of setup.Prometheus (mounted at /metrics) shows.
	rec := httptest.NewRecorder()
	setup.Prometheus.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	sc := bufio.NewScanner(rec.Body)
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), "agentwire_process_shutdowns_total") {
			fmt.Println(sc.Text())
		}
	}
	// Output:
	// tracing: false metrics: true
	// agentwire_process_shutdowns_total{agentwire_shutdown_outcome="terminated",otel_scope_name="github.com/agentwire/agentwire/telemetry",otel_scope_schema_url="",otel_scope_version=""} 1
}

// Metrics reads the Stats of the objects it observes when the metrics
// are collected, and nothing in between: observe a connection for as
// long as it lives, and stop when it is done (its counts stay counted).
func ExampleMetrics_ObserveConn() {
	ctx := context.Background()
	setup, err := telemetry.Start(ctx, telemetry.SetupOptions{Prometheus: true, Getenv: func(string) string { return "" }})
	if err != nil {
		log.Fatal(err)
	}
	defer setup.Shutdown(ctx)
	metrics, err := telemetry.NewMetrics(setup.Options(telemetry.JSONRPC, telemetry.Pipe))
	if err != nil {
		log.Fatal(err)
	}
	defer metrics.Close()

	client, server := rpc.Pipe(rpc.Methods{"ping": func(context.Context, *rpc.Request) (any, error) {
		return "pong", nil
	}}, nil, nil, nil)
	stop := metrics.ObserveConn(server, attribute.String("conn", "example"))
	if _, err := client.Call(ctx, "ping", nil); err != nil {
		log.Fatal(err)
	}
	client.Close()
	server.Close()
	stop()

	rec := httptest.NewRecorder()
	setup.Prometheus.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	sc := bufio.NewScanner(rec.Body)
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), "# HELP agentwire_rpc_output_blocked") {
			fmt.Println(sc.Text())
		}
	}
	// Output:
	// # HELP agentwire_rpc_output_blocked_seconds_total Time writers and readers waited for room in a full output queue (backpressure), summed over them.
}
