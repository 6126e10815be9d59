//go:build unix

package main

import (
	"strings"
	"testing"
)

// Issue 17: `agentwire call --task` runs a tool as a task and shows its
// status changes until it ends, in both designs; the result goes to
// stdout, a failed task's error too (exit 1).
func TestCallTaskShowsStatusUntilTheTaskEnds(t *testing.T) {
	for _, era := range []string{"modern", "legacy"} {
		t.Run(era, func(t *testing.T) {
			code, out, errText := runAgentwire(t, append([]string{"call", "--era", era, "--tool", "slow_compute",
				"--args", `{"seconds":0.3,"label":"cli"}`, "--task"}, fixtureServer()...)...)
			if code != 0 || !strings.Contains(out, `computed \"cli\" after 0.3s`) {
				t.Fatalf("exit %d\nstdout %s\nstderr %s", code, out, errText)
			}
			if !strings.Contains(errText, " started") || !strings.Contains(errText, ": completed") {
				t.Fatalf("no status changes on stderr:\n%s", errText)
			}
		})
	}
	code, out, errText := runAgentwire(t, append([]string{"call", "--tool", "protocol_error_job", "--task"}, fixtureServer()...)...)
	if code != 1 || !strings.Contains(out, `"code":-32603`) || !strings.Contains(errText, ": failed") {
		t.Fatalf("a failing task: exit %d\nstdout %s\nstderr %s", code, out, errText)
	}
	code, _, errText = runAgentwire(t, "call", "--task", "--", binary, "serve", "mcp")
	if code != 2 || !strings.Contains(errText, "--task runs a tool as a task: it needs --tool") {
		t.Fatalf("--task without --tool: exit %d %s", code, errText)
	}
}
