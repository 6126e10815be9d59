package server_test

import (
	"bufio"
	"context"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/agentwire/agentwire/mcp"
	"github.com/agentwire/agentwire/mcp/server"
	"github.com/agentwire/agentwire/rpc"
)

// BenchmarkStdioToolsCall drives a server over a pair of OS pipes in this
// process with an allocation-free client: one tools/call of an echo tool
// with typed arguments in flight (sequential) or 64 (pipelined), in both
// eras. It is the MCP layer's cost over rpc's own echo benchmark.
//
//	go test -run XXX -bench StdioToolsCall -count 6 ./mcp/server | benchstat -
func BenchmarkStdioToolsCall(b *testing.B) {
	for _, era := range []string{"legacy", "modern"} {
		b.Run("era="+era+"/sequential", func(b *testing.B) { benchToolsCall(b, era == "modern", 1) })
		b.Run("era="+era+"/pipelined", func(b *testing.B) { benchToolsCall(b, era == "modern", 64) })
	}
}

type benchEchoArgs struct {
	Text string `json:"text"`
}

// startBenchServer serves the echo tool over a pair of OS pipes and returns
// the client's ends, initialized in the legacy era unless modern.
func startBenchServer(b *testing.B, modern bool) (in *os.File, out *bufio.Reader, stop func()) {
	s := server.New(mcp.Implementation{Name: "bench", Version: "1"}, nil)
	server.AddTool(s, mcp.Tool{Name: "echo"}, func(_ context.Context, _ *server.ToolRequest, in benchEchoArgs) (*mcp.ToolResult, error) {
		return mcp.TextResult(in.Text), nil
	})
	cr, sw, err := os.Pipe()
	if err != nil {
		b.Fatal(err)
	}
	sr, cw, err := os.Pipe()
	if err != nil {
		b.Fatal(err)
	}
	conn := rpc.New(sr, sw, s.Handler(), s.ConnOptions(&rpc.Options{Logger: slog.New(slog.DiscardHandler)}))
	out = bufio.NewReaderSize(cr, 64<<10)
	stop = func() {
		cw.Close()
		io.Copy(io.Discard, cr)
		conn.Wait()
		cr.Close()
		sr.Close()
	}
	if !modern {
		io.WriteString(cw, `{"jsonrpc":"2.0","id":"i","method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"b","version":"1"}}}`+"\n")
		if _, err := out.ReadSlice('\n'); err != nil {
			b.Fatal(err)
		}
		io.WriteString(cw, `{"jsonrpc":"2.0","method":"notifications/initialized"}`+"\n")
	}
	return cw, out, stop
}

func benchToolsCall(b *testing.B, modern bool, inFlight int) {
	cw, out, stop := startBenchServer(b, modern)
	defer stop()
	params := `{"name":"echo","arguments":{"text":"hello, world"}}`
	if modern {
		params = `{"name":"echo","arguments":{"text":"hello, world"},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"b","version":"1"},"io.modelcontextprotocol/clientCapabilities":{}}}`
	}
	request := func(buf []byte, id int) []byte {
		buf = append(buf[:0], `{"jsonrpc":"2.0","id":`...)
		buf = strconv.AppendInt(buf, int64(id), 10)
		buf = append(buf, `,"method":"tools/call","params":`...)
		buf = append(buf, params...)
		return append(buf, "}\n"...)
	}
	tokens := make(chan struct{}, inFlight)
	errc := make(chan error, 1)
	b.ReportAllocs()
	b.ResetTimer()
	go func() {
		buf := make([]byte, 0, 512)
		for i := 0; i < b.N; i++ {
			tokens <- struct{}{}
			if _, err := cw.Write(request(buf, i)); err != nil {
				errc <- err
				return
			}
		}
		errc <- nil
	}()
	for i := 0; i < b.N; i++ {
		line, err := out.ReadSlice('\n')
		if err != nil {
			b.Fatal(err)
		}
		if i == 0 && !containsText(line) {
			b.Fatalf("unexpected answer: %s", line)
		}
		<-tokens
	}
	b.StopTimer()
	if err := <-errc; err != nil {
		b.Fatal(err)
	}
}

func containsText(line []byte) bool {
	for i := 0; i+len(`"hello, world"`) <= len(line); i++ {
		if string(line[i:i+len(`"hello, world"`)]) == `"hello, world"` {
			return true
		}
	}
	return false
}

// BenchmarkStdioToolsCallLarge is one tools/call whose text is 8 MiB, the
// bench's large-message round trip, in process.
func BenchmarkStdioToolsCallLarge(b *testing.B) {
	cw, out, stop := startBenchServer(b, false)
	defer stop()
	req := []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"` + strings.Repeat("x", 8<<20) + `"}}}` + "\n")
	b.SetBytes(int64(len(req)))
	for b.Loop() {
		errc := make(chan error, 1)
		go func() { _, err := cw.Write(req); errc <- err }()
		n := 0
		for {
			line, err := out.ReadSlice('\n')
			n += len(line)
			if err == nil {
				break
			}
			if err != bufio.ErrBufferFull {
				b.Fatal(err)
			}
		}
		if n < 8<<20 {
			b.Fatalf("answer of %d bytes", n)
		}
		if err := <-errc; err != nil {
			b.Fatal(err)
		}
	}
}
