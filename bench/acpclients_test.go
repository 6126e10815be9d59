package main

import (
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/agentwire/agentwire/acp"
	"github.com/agentwire/agentwire/rpc"
)

// Both ACP clients complete prompts against agentwire's agent, in this
// process and in a subprocess, with every chunk counted.
func TestACPClientsCompletePromptsWithEveryChunk(t *testing.T) {
	for _, c := range acpClients {
		for _, place := range places {
			s, err := measureACPClient(c, place, acpClientAgent, 100*time.Millisecond)
			if err != nil {
				t.Fatalf("%s %s: %v", c.name, place, err)
			}
			if s.prompts == 0 || s.cpu <= 0 || s.allocs <= 0 {
				t.Errorf("%s %s: %+v", c.name, place, s)
			}
		}
	}
}

// chunkAgent answers every prompt with n message chunks of text.
func chunkAgent(n int, text string) server {
	return server{name: "chunks", work: wACP, serve: func(r io.ReadCloser, w io.WriteCloser) error {
		agent := &acp.Agent{
			Info: acp.Implementation{Name: "bench", Version: "1"},
			Prompt: func(_ context.Context, turn *acp.Turn) (acp.StopReason, error) {
				for range n {
					if err := turn.MessageChunk(text); err != nil {
						return "", err
					}
				}
				return acp.EndTurn, nil
			},
		}
		h, o := acp.ConnOptions(agent, nil, nil)
		return rpc.New(r, w, h, o).Wait()
	}}
}

// A prompt answered with fewer chunks than the workload's 10, or with
// chunks of other text, fails the measurement instead of being counted.
func TestACPClientRowFailsWhenAPromptMissesChunks(t *testing.T) {
	for _, tc := range []struct {
		name  string
		agent server
		want  string
	}{
		{"nine chunks", chunkAgent(acpUpdates-1, acpChunkText), "after 9 of its 10 chunks"},
		{"other text", chunkAgent(acpUpdates, "other"), "(10 other updates)"},
	} {
		for _, c := range acpClients {
			_, err := measureACPClient(c, "in-process", tc.agent, 20*time.Millisecond)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%s, %s: err = %v, want one containing %q", tc.name, c.name, err, tc.want)
			}
		}
	}
}

// BenchmarkACPClients runs each client against the agent in a subprocess,
// so that a -cpuprofile or -memprofile of it is the client's alone:
//
//	go test -run '^$' -bench 'ACPClients/agentwire' -cpuprofile cpu.out
func BenchmarkACPClients(b *testing.B) {
	for _, c := range acpClients {
		b.Run(c.name, func(b *testing.B) {
			var prompts int
			var elapsed time.Duration
			var cpu, allocs float64
			for b.Loop() {
				s, err := measureACPClient(c, "subprocess", acpClientAgent, time.Second)
				if err != nil {
					b.Fatal(err)
				}
				prompts += s.prompts
				elapsed += s.elapsed
				cpu += s.cpu
				allocs += s.allocs * float64(s.prompts)
			}
			b.ReportMetric(float64(prompts)/elapsed.Seconds(), "prompts/s")
			b.ReportMetric(cpu/float64(prompts)*1e6, "cpu-µs/prompt")
			b.ReportMetric(allocs/float64(prompts), "allocs/prompt")
		})
	}
}
