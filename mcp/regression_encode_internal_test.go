package mcp

import (
	"strings"
	"testing"

	"github.com/agentwire/agentwire/jsonrpc"
)

// B. A large text result was encoded escape by escape into a growing
// buffer: a 4 MiB text of "<" (24 MiB encoded) cost 120 MiB of
// allocations, so a handful of concurrent echoes outgrew any memory bound.
// It is now encoded into room made for it at once.
func TestRegressionLargeTextResultEncodedInOneAllocation(t *testing.T) {
	for _, s := range []string{"", "a", "<>&", "\n\r\t\b\f\"\\", "\x01\x1f\x7f", "é", "\u2028\u2029", "\xff", "a\xffb", "日本語"} {
		if got, want := jsonrpc.EncodedLen(s), len(jsonrpc.AppendString(nil, s)); got != want {
			t.Errorf("EncodedLen(%q) = %d, AppendString writes %d", s, got, want)
		}
	}
	r := TextResult(strings.Repeat("<", 1<<20))
	// One allocation (two under the race detector); growing the buffer
	// escape by escape took dozens.
	if n := testing.AllocsPerRun(3, func() { r.AppendJSON(nil, nil) }); n > 2 {
		t.Errorf("encoding a 1 MiB text of \"<\" took %v allocations", n)
	}
}
