package rpc_test

import (
	"bufio"
	"encoding/json"
	"io"
	"os"
	"strconv"
	"testing"

	"github.com/agentwire/agentwire/echo"
	"github.com/agentwire/agentwire/rpc"
)

// The benchmarks run an echo server over a pair of OS pipes in this process
// and drive it with the same allocation-free client: one request in flight
// (Sequential) or 64 (Pipelined). Reference is the hand-written loop the
// performance goals of docs/guarantees.md (P1-P6) are stated against: bufio.Reader line ->
// json.Unmarshal into a reused struct with raw id/params -> json.Encoder ->
// one write per reply. Compare ns/op and allocs/op of the pairs:
//
//	go test -run XXX -bench . -count 6 ./rpc | benchstat -
//
// (P1: Sequential agentwire >= 0.85x Reference throughput; P2: Pipelined
// >= 1.2x; P3: <= 12 allocs per round trip.)

type serveFunc func(r *os.File, w *os.File) (stop func())

func serveAgentwire(r, w *os.File) func() {
	c := rpc.New(r, w, echo.Handler(), &rpc.Options{Logger: quiet})
	return func() { c.Wait() }
}

// referenceServe is the hand-written loop.
func referenceServe(r, w *os.File) func() {
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer w.Close()
		br := bufio.NewReader(r)
		enc := json.NewEncoder(w)
		var req struct {
			JSONRPC string          `json:"jsonrpc"`
			ID      json.RawMessage `json:"id"`
			Method  string          `json:"method"`
			Params  json.RawMessage `json:"params"`
		}
		type response struct {
			JSONRPC string          `json:"jsonrpc"`
			ID      json.RawMessage `json:"id"`
			Result  json.RawMessage `json:"result"`
		}
		for {
			line, err := br.ReadSlice('\n')
			if err != nil {
				return
			}
			if err := json.Unmarshal(line, &req); err != nil {
				continue
			}
			if err := enc.Encode(response{JSONRPC: "2.0", ID: req.ID, Result: req.Params}); err != nil {
				return
			}
		}
	}()
	return func() { <-done }
}

// benchPair starts a server on OS pipes and returns the client's ends.
func benchPair(b *testing.B, serve serveFunc) (in io.Writer, out *bufio.Reader, finish func()) {
	cr, sw, err := os.Pipe() // server -> client
	if err != nil {
		b.Fatal(err)
	}
	sr, cw, err := os.Pipe() // client -> server
	if err != nil {
		b.Fatal(err)
	}
	stop := serve(sr, sw)
	return cw, bufio.NewReaderSize(cr, 64<<10), func() {
		cw.Close()
		io.Copy(io.Discard, cr)
		stop()
		cr.Close()
		sr.Close()
	}
}

var benchParams = `{"name":"echo","arguments":{"text":"hello, world"}}`

func request(buf []byte, id int) []byte {
	buf = append(buf[:0], `{"jsonrpc":"2.0","id":`...)
	buf = strconv.AppendInt(buf, int64(id), 10)
	buf = append(buf, `,"method":"echo","params":`...)
	buf = append(buf, benchParams...)
	return append(buf, "}\n"...)
}

func benchSequential(b *testing.B, serve serveFunc) {
	in, out, finish := benchPair(b, serve)
	defer finish()
	buf := make([]byte, 0, 256)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := in.Write(request(buf, i)); err != nil {
			b.Fatal(err)
		}
		if _, err := out.ReadSlice('\n'); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
}

func benchPipelined(b *testing.B, serve serveFunc) {
	const inFlight = 64
	in, out, finish := benchPair(b, serve)
	defer finish()
	tokens := make(chan struct{}, inFlight)
	b.ReportAllocs()
	b.ResetTimer()
	errc := make(chan error, 1)
	go func() {
		buf := make([]byte, 0, 256)
		for i := 0; i < b.N; i++ {
			tokens <- struct{}{}
			if _, err := in.Write(request(buf, i)); err != nil {
				errc <- err
				return
			}
		}
		errc <- nil
	}()
	for i := 0; i < b.N; i++ {
		if _, err := out.ReadSlice('\n'); err != nil {
			b.Fatal(err)
		}
		<-tokens
	}
	b.StopTimer()
	if err := <-errc; err != nil {
		b.Fatal(err)
	}
}

func BenchmarkSequential(b *testing.B) {
	b.Run("impl=agentwire", func(b *testing.B) { benchSequential(b, serveAgentwire) })
	b.Run("impl=reference", func(b *testing.B) { benchSequential(b, referenceServe) })
}

func BenchmarkPipelined(b *testing.B) {
	b.Run("impl=agentwire", func(b *testing.B) { benchPipelined(b, serveAgentwire) })
	b.Run("impl=reference", func(b *testing.B) { benchPipelined(b, referenceServe) })
}

// TestAllocationsPerRoundTrip pins guarantee P3 (at most 12 allocations per
// echo round trip in the runtime) so a regression fails the suite rather
// than waiting for someone to read a benchmark.
func TestAllocationsPerRoundTrip(t *testing.T) {
	res := testing.Benchmark(func(b *testing.B) { benchSequential(b, serveAgentwire) })
	if a := res.AllocsPerOp(); a > 12 {
		t.Errorf("%d allocations per round trip, want <= 12", a)
	}
	t.Logf("%d allocs, %d B per round trip", res.AllocsPerOp(), res.AllocedBytesPerOp())
}
