package rpc_test

import (
	"context"
	"testing"

	"github.com/agentwire/agentwire/echo"
	"github.com/agentwire/agentwire/rpc"
)

// BenchmarkCall is the client side of a round trip: Call on one end of an
// in-memory pair, echo's handler on the other.
func BenchmarkCall(b *testing.B) {
	client, server := rpc.Pipe(echo.Handler(), nil, echo.Options(&rpc.Options{Logger: quiet}), &rpc.Options{Logger: quiet})
	defer server.Close()
	defer client.Close()
	ctx := context.Background()
	params := map[string]string{"text": "hello"}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := client.Call(ctx, "echo", params); err != nil {
			b.Fatal(err)
		}
	}
}
