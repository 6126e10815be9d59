package bridge_test

import (
	"testing"

	"github.com/agentwire/agentwire/internal/wiretest"
	"github.com/agentwire/agentwire/mcp/internal/mcptest"
)

// TestMain serves the subprocess servers of internal/testserver and checks
// that no test leaves a goroutine behind.
func TestMain(m *testing.M) { mcptest.Main(m) }

// Every wire test of this package, run again over the message seam
// (rpc.NewMessages): the same raw lines, the same answers.
func TestWireTestsOverMessages(t *testing.T) { wiretest.RerunOverMessages(t) }
