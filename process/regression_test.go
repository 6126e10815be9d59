//go:build linux

package process_test

import (
	"os"
	"runtime/debug"
	"testing"
	"time"

	"github.com/agentwire/agentwire/process"
)

func fdCount() int {
	es, _ := os.ReadDir("/proc/self/fd")
	return len(es)
}

// Regression (found in review): the stderr read end was never closed, so
// every Start/Shutdown leaked a file descriptor until a finalizer ran.
func TestRegressionNoFileDescriptorLeak(t *testing.T) {
	old := debug.SetGCPercent(-1)
	defer debug.SetGCPercent(old)
	before := fdCount()
	for range 30 {
		p, err := process.Start(process.Command{Path: "/bin/true"}, &process.Options{Grace: 100 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		p.Shutdown()
		p.ExitError()
	}
	if after := fdCount(); after > before+2 {
		t.Fatalf("fds: %d before, %d after 30 Start/Shutdown cycles", before, after)
	}
}
