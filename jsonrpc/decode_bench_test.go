package jsonrpc_test

import (
	"testing"

	"github.com/agentwire/agentwire/jsonrpc"
)

// BenchmarkDecode decodes the message every MCP server sees most: a
// tools/call, with and without the 2026-07-28 _meta.
func BenchmarkDecode(b *testing.B) {
	for _, c := range []struct{ name, line string }{
		{"legacy", `{"jsonrpc":"2.0","id":17,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hello, world"}}}`},
		{"modern", `{"jsonrpc":"2.0","id":17,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hello, world"},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"bench","version":"1.0.0"},"io.modelcontextprotocol/clientCapabilities":{}}}}`},
	} {
		b.Run(c.name, func(b *testing.B) {
			line := []byte(c.line)
			b.SetBytes(int64(len(line)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := jsonrpc.Decode(line, nil); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
