package acpclient_test

import (
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/agentwire/agentwire/acp"
	"github.com/agentwire/agentwire/internal/testserver"
	"go.uber.org/goleak"
)

// agentEnv makes the test binary an ACP agent (a subprocess for the tests
// of process management): its value is the mode.
const agentEnv = "ACPCLIENT_TEST_AGENT"

func TestMain(m *testing.M) {
	testserver.Run()
	if mode := os.Getenv(agentEnv); mode != "" {
		os.Exit(serveAgent(mode))
	}
	goleak.VerifyTestMain(m)
}

// serveAgent runs chunkAgent on stdio. Modes: "plain"; "polluted" writes a
// stray line on stdout first; "crashy" dies with exit status 3 and a line
// on stderr when prompted "crash".
func serveAgent(mode string) int {
	a := chunkAgent()
	switch mode {
	case "polluted":
		fmt.Println("agent booting (debug)")
	case "crashy":
		inner := a.Prompt
		a.Prompt = func(ctx context.Context, t *acp.Turn) (acp.StopReason, error) {
			if t.Prompt[0].Text == "crash" {
				t.MessageChunk("about to fail")
				fmt.Fprintln(os.Stderr, "fatal: the model backend went away")
				os.Exit(3)
			}
			return inner(ctx, t)
		}
	}
	c, err := acp.ServeStdio(a, nil, nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	c.Wait()
	return 0
}
