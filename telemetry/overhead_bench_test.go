package telemetry_test

import (
	"context"
	"testing"

	"github.com/agentwire/agentwire/rpc"
	"github.com/agentwire/agentwire/telemetry"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"
)

// The cost of ClientMiddleware on the same in-process echo round trip,
// on the calling side:
//
//	go test -run XXX -bench 'ClientMiddleware' -count 10 ./telemetry | benchstat -

func benchClientEcho(b *testing.B, out ...rpc.OutboundMiddleware) {
	benchPipe(b, "tools/call", benchParams, nil, out)
}

func BenchmarkClientMiddlewareNone(b *testing.B) { benchClientEcho(b) }

// Tracing off: the no-op providers a program has when nothing exports.
func BenchmarkClientMiddlewareOff(b *testing.B) {
	benchClientEcho(b, telemetry.ClientMiddleware(&telemetry.Options{
		TracerProvider: tracenoop.NewTracerProvider(), MeterProvider: metricnoop.NewMeterProvider()}))
}

// A sampler that drops everything, and the middleware told so.
func BenchmarkClientMiddlewareDropSampler(b *testing.B) {
	never := sdktrace.NeverSample()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(never))
	defer tp.Shutdown(context.Background())
	benchClientEcho(b, telemetry.ClientMiddleware(&telemetry.Options{
		TracerProvider: tp, Sampler: never, MeterProvider: metricnoop.NewMeterProvider()}))
}

// Tracing off on the serving side: the middleware over the no-op
// providers (it hands incoming trace context on, allocation-free).
func BenchmarkServerMiddlewareOff(b *testing.B) {
	benchEcho(b, benchParams, telemetry.ServerMiddleware(&telemetry.Options{
		TracerProvider: tracenoop.NewTracerProvider(), MeterProvider: metricnoop.NewMeterProvider()}))
}
