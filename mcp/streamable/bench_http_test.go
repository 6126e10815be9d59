package streamable_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/agentwire/agentwire/mcp"
	"github.com/agentwire/agentwire/mcp/internal/mcptest"
	"github.com/agentwire/agentwire/mcp/streamable"
)

// benchWriter is the least a ResponseWriter can be: what the server spends
// beyond it is the server's own (the network side is measured by the
// benchmarks in bench/, against the peers).
type benchWriter struct {
	hdr    http.Header
	status int
	body   bytes.Buffer
}

func (w *benchWriter) Header() http.Header         { return w.hdr }
func (w *benchWriter) WriteHeader(code int)        { w.status = code }
func (w *benchWriter) Write(b []byte) (int, error) { return w.body.Write(b) }

// What http.ResponseController asks of a writer, as net/http's has it.
func (w *benchWriter) SetWriteDeadline(time.Time) error { return nil }
func (w *benchWriter) SetReadDeadline(time.Time) error  { return nil }
func (w *benchWriter) FlushError() error                { return nil }

// BenchmarkHTTPToolsCall serves tools/call echo POSTs through ServeHTTP, in
// each era, and reports the allocations a request costs the server (the
// request and writer are reused, so net/http's own are not counted).
func BenchmarkHTTPToolsCall(b *testing.B) {
	s := mcptest.NewServer(nil)
	h := streamable.NewHandler(s, nil)
	defer h.Shutdown(context.Background())
	cases := []struct {
		name string
		body string
		hdr  http.Header
	}{
		{"era=2025-11-25", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hello"}}}`,
			http.Header{"Content-Type": {"application/json"}, "Accept": {"application/json, text/event-stream"}, "Mcp-Protocol-Version": {"2025-11-25"}}},
	}
	modern := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":` + withMeta(`"name":"echo","arguments":{"text":"hello"}`) + `}`
	cases = append(cases, struct {
		name string
		body string
		hdr  http.Header
	}{"era=2026-07-28", modern, modernHeaders(modern, nil)})
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			body := strings.NewReader(c.body)
			r, _ := http.NewRequest(http.MethodPost, "http://localhost/mcp", io.NopCloser(body))
			r.Header = c.hdr
			r.RemoteAddr = "127.0.0.1:1234"
			r.ContentLength = int64(len(c.body))
			w := &benchWriter{hdr: http.Header{}}
			b.ReportAllocs()
			for b.Loop() {
				body.Reset(c.body)
				w.body.Reset()
				clear(w.hdr)
				h.ServeHTTP(w, r)
				if w.status != 0 && w.status != http.StatusOK {
					b.Fatalf("status %d: %s", w.status, w.body.String())
				}
			}
			if !strings.Contains(w.body.String(), `"text":"hello"`) {
				b.Fatalf("answer %s", w.body.String())
			}
		})
	}
}

var _ = mcp.LatestVersion
