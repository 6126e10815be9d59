package acp_test

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"testing"

	"github.com/agentwire/agentwire/acp"
	"github.com/agentwire/agentwire/internal/wiretest"
	"github.com/agentwire/agentwire/rpc"
)

// BenchmarkPromptAllocs measures the agent side of one prompt turn, end to
// end: the prompt line read, admitted and dispatched, the turn's updates
// encoded and written, the response written. The client is a raw line
// writer and reader that allocates nothing, so allocs/op is the agent's.
// The bench module's ACP row answers with 10 chunks; "1chunk" is the plain
// prompt.
func BenchmarkPromptAllocs(b *testing.B) {
	for _, n := range []int{1, 10} {
		name := "1chunk"
		if n == 10 {
			name = "10chunks"
		}
		b.Run(name, func(b *testing.B) { benchPrompt(b, n) })
	}
}

func benchPrompt(b *testing.B, chunks int) {
	agent := &acp.Agent{
		Info: acp.Implementation{Name: "bench", Version: "1"},
		Prompt: func(_ context.Context, t *acp.Turn) (acp.StopReason, error) {
			for range chunks {
				if err := t.MessageChunk("chunk"); err != nil {
					return "", err
				}
			}
			return acp.EndTurn, nil
		},
	}
	h, o := acp.ConnOptions(agent, &acp.Options{Logger: wiretest.Quiet}, &rpc.Options{Logger: wiretest.Quiet})
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	conn := rpc.New(inR, outW, h, o)
	out := bufio.NewReaderSize(outR, 64<<10)
	// roundTrip writes one request and reads up to its response, which is
	// the only line with "result" or "error" at the top level.
	roundTrip := func(line []byte) {
		if _, err := inW.Write(line); err != nil {
			b.Fatal(err)
		}
		for {
			l, err := out.ReadSlice('\n')
			if err != nil {
				b.Fatal(err)
			}
			if bytes.HasPrefix(l, []byte(`{"jsonrpc":"2.0","id":`)) {
				if bytes.Contains(l, []byte(`"error"`)) {
					b.Fatalf("%s", l)
				}
				return
			}
		}
	}
	roundTrip([]byte(initLine + "\n"))
	roundTrip([]byte(newSession(1) + "\n"))
	line := []byte(prompt(1, "sess-1", "hi") + "\n")
	b.ReportAllocs()
	for b.Loop() {
		roundTrip(line)
	}
	b.StopTimer()
	inW.Close()
	go io.Copy(io.Discard, outR)
	conn.Wait()
}

// The agent side of a prompt answered with 10 chunks (the bench module's
// ACP row) stays within 40 allocations; it was 91 before the prompt's
// params were read without encoding/json, the turn had one context and
// results were pre-encoded.
func TestPromptStaysWithinAllocationBudget(t *testing.T) {
	if testing.Short() {
		t.Skip("-short")
	}
	r := testing.Benchmark(func(b *testing.B) { benchPrompt(b, 10) })
	if n := r.AllocsPerOp(); n > 40 {
		t.Fatalf("%d allocations per prompt of 10 chunks, want at most 40", n)
	}
}
