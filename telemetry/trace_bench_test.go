package telemetry_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"testing"

	"github.com/agentwire/agentwire/rpc"
	"github.com/agentwire/agentwire/telemetry"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// The cost of ServerMiddleware on an in-process echo round trip over
// rpc.Pipe: with a TracerProvider whose sampler drops everything and a
// no-op MeterProvider, against the same connection without middleware
// (the target is <= 5 %):
//
//	go test -run XXX -bench 'ServerMiddleware' -count 10 ./telemetry | benchstat -

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func benchEcho(b *testing.B, params json.RawMessage, mw ...rpc.Middleware) {
	benchPipe(b, "echo", params, mw, nil)
}

// benchPipe is an echo round trip over rpc.Pipe with mw on the serving
// side and out on the calling side.
func benchPipe(b *testing.B, method string, params json.RawMessage, mw []rpc.Middleware, out []rpc.OutboundMiddleware) {
	echo := rpc.HandlerFunc(func(_ context.Context, r *rpc.Request) (any, error) { return r.Params, nil })
	cl, sv := rpc.Pipe(echo, nil, &rpc.Options{Middleware: mw, Logger: quiet}, &rpc.Options{Logger: quiet, Outbound: out})
	defer func() {
		cl.Close()
		sv.Close()
		cl.Wait()
		sv.Wait()
	}()
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := cl.Call(ctx, method, params); err != nil {
			b.Fatal(err)
		}
	}
}

var benchParams = json.RawMessage(`{"text":"hello, world","n":42}`)

func BenchmarkServerMiddlewareNone(b *testing.B) { benchEcho(b, benchParams) }

// The provider's sampler drops everything, and the middleware is told so
// (Options.Sampler, as Setup does): a request without trace context
// starts no span.
func BenchmarkServerMiddlewareDropSampler(b *testing.B) {
	never := sdktrace.NeverSample()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(never))
	defer tp.Shutdown(context.Background())
	benchEcho(b, benchParams, telemetry.ServerMiddleware(&telemetry.Options{
		TracerProvider: tp, Sampler: never, MeterProvider: metricnoop.NewMeterProvider()}))
}

// The same provider, the middleware not told of its sampler: every
// request pays for the span the provider starts only to drop it (the
// SDK's own cost, about 250 ns and two allocations).
func BenchmarkServerMiddlewareDropSamplerUnknown(b *testing.B) {
	tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.NeverSample()))
	defer tp.Shutdown(context.Background())
	benchEcho(b, benchParams, telemetry.ServerMiddleware(&telemetry.Options{
		TracerProvider: tp, MeterProvider: metricnoop.NewMeterProvider()}))
}

// With a traceparent in _meta the middleware parses it (and the sampler
// still drops the span).
func BenchmarkServerMiddlewareDropSamplerWithParent(b *testing.B) {
	tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.NeverSample()))
	defer tp.Shutdown(context.Background())
	benchEcho(b, json.RawMessage(`{"text":"hello, world","n":42,"_meta":{"traceparent":"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}}`),
		telemetry.ServerMiddleware(&telemetry.Options{TracerProvider: tp, Sampler: sdktrace.NeverSample(), MeterProvider: metricnoop.NewMeterProvider()}))
}

func BenchmarkServerMiddlewareNoneWithParent(b *testing.B) {
	benchEcho(b, json.RawMessage(`{"text":"hello, world","n":42,"_meta":{"traceparent":"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}}`))
}

// The middleware's own cost per request, apart from the round trip
// (ns/op is what it adds to one): the handler is called directly.
func benchHandle(b *testing.B, o *telemetry.Options, params json.RawMessage) {
	h := telemetry.ServerMiddleware(o)(rpc.HandlerFunc(func(_ context.Context, r *rpc.Request) (any, error) { return r.Params, nil }))
	req := &rpc.Request{ID: "1", Method: "echo", Params: params}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	b.ReportAllocs()
	for b.Loop() {
		h.Handle(ctx, req)
	}
}

func BenchmarkServerMiddlewareHandleDropSampler(b *testing.B) {
	never := sdktrace.NeverSample()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(never))
	defer tp.Shutdown(context.Background())
	benchHandle(b, &telemetry.Options{TracerProvider: tp, Sampler: never, MeterProvider: metricnoop.NewMeterProvider()}, benchParams)
}

func BenchmarkServerMiddlewareHandleDropSamplerUnknown(b *testing.B) {
	tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.NeverSample()))
	defer tp.Shutdown(context.Background())
	benchHandle(b, &telemetry.Options{TracerProvider: tp, MeterProvider: metricnoop.NewMeterProvider()}, benchParams)
}

// A recording span, for scale: attributes, the SDK's span, no export.
func BenchmarkServerMiddlewareHandleRecording(b *testing.B) {
	tp := sdktrace.NewTracerProvider()
	defer tp.Shutdown(context.Background())
	benchHandle(b, &telemetry.Options{TracerProvider: tp, MeterProvider: metricnoop.NewMeterProvider()},
		json.RawMessage(`{"name":"echo","arguments":{"text":"hi"},"_meta":{"traceparent":"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}}`))
}

// A request carrying trace context: it is parsed, and the provider
// starts the (dropped) child span.
func BenchmarkServerMiddlewareHandleDropSamplerWithParent(b *testing.B) {
	never := sdktrace.NeverSample()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(never))
	defer tp.Shutdown(context.Background())
	benchHandle(b, &telemetry.Options{TracerProvider: tp, Sampler: never, MeterProvider: metricnoop.NewMeterProvider()},
		json.RawMessage(`{"text":"hello, world","n":42,"_meta":{"traceparent":"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}}`))
}
