package streamable_test

import (
	"testing"

	"github.com/agentwire/agentwire/mcp/internal/mcptest"
)

// TestMain serves the subprocess servers of internal/testserver and checks
// that no test leaves a goroutine behind.
func TestMain(m *testing.M) { mcptest.Main(m) }
