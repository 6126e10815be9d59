package interop

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

var binary string // the agentwire command, built for these tests

// seedToolCount is how many tools `agentwire serve mcp` has: the five demonstration tools
// and the five conformance diagnostics.
const seedToolCount = 10

// seedHTTPToolCount is how many `agentwire serve mcp --http` offers: all
// but crash, which it leaves out unless given --demo-tools.
const seedHTTPToolCount = seedToolCount - 1

// TestMain installs the pinned npm peers (skipped when node_modules
// already matches the lock file) and builds agentwire.
func TestMain(m *testing.M) {
	if err := setup(); err != nil {
		fmt.Fprintln(os.Stderr, "interop setup:", err)
		os.Exit(1)
	}
	code := m.Run()
	if err := goleak.Find(); err != nil {
		fmt.Fprintln(os.Stderr, "goleak:", err)
		code = 1
	}
	os.RemoveAll(filepath.Dir(binary))
	os.Exit(code)
}

func setup() error {
	for _, tool := range []string{"node", "npm"} {
		if _, err := exec.LookPath(tool); err != nil {
			return fmt.Errorf("%s is needed for the interoperability tests: %w", tool, err)
		}
	}
	for _, dir := range []string{".", "conformance"} {
		if err := npmInstall(dir); err != nil {
			return err
		}
	}
	dir, err := os.MkdirTemp("", "agentwire-interop-")
	if err != nil {
		return err
	}
	binary = filepath.Join(dir, "agentwire")
	build := exec.Command(filepath.Join(runtime.GOROOT(), "bin", "go"), "build", "-o", binary, "../cmd/agentwire")
	build.Stderr = os.Stderr
	return build.Run()
}

// npmInstall installs dir's pinned packages unless node_modules already
// matches its lock file.
func npmInstall(dir string) error {
	lock, err := os.ReadFile(filepath.Join(dir, "package-lock.json"))
	if err != nil {
		return err
	}
	stamp := filepath.Join(dir, "node_modules", ".agentwire-lock")
	if installed, _ := os.ReadFile(stamp); bytes.Equal(lock, installed) {
		return nil
	}
	// `npm install --no-save` installs exactly what the lock file says
	// and leaves it untouched. Not `npm ci`: the inspector pulls in vite,
	// whose optional Windows-only dependency is no longer in the registry,
	// and npm ci refuses a lock that lacks it.
	cmd := exec.Command("npm", "install", "--no-save", "--no-audit", "--no-fund", "--loglevel=error")
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("npm install in %s: %w", dir, err)
	}
	return os.WriteFile(stamp, lock, 0o644)
}

func run(t *testing.T, timeout time.Duration, name string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := exec.Command(name, args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
	case <-time.After(timeout):
		cmd.Process.Kill()
		<-done
		t.Fatalf("%s %q did not finish within %v; stderr:\n%s", name, args, timeout, errb.String())
	}
	return out.String(), errb.String(), code
}

type peerSummary struct {
	OK              bool     `json:"ok"`
	Error           string   `json:"error"`
	Era             string   `json:"era"`
	ProtocolVersion *string  `json:"protocolVersion"`
	Server          string   `json:"server"`
	Tools           []string `json:"tools"`
	Echo            string   `json:"echo"`
	Slow            string   `json:"slow"`
	Progress        int      `json:"progress"`
	Cancelled       bool     `json:"cancelled"`
	Alive           bool     `json:"alive"`
	Listen          *bool    `json:"listen"`
}

// The official TypeScript clients drive `agentwire serve mcp`: v1 (legacy
// handshake), v2 pinned to legacy, and v2 in auto mode, which must land in
// the modern era. Each lists tools, echoes, gets progress, cancels a slow
// call and finds the server alive afterwards.
func TestTypeScriptClientsDriveServeMCP(t *testing.T) {
	cases := []struct {
		sdk, negotiate, era, version string
	}{
		{"v1", "legacy", "legacy", ""},
		{"v2", "legacy", "legacy", "2025-11-25"},
		{"v2", "auto", "modern", "2026-07-28"},
	}
	for _, tc := range cases {
		t.Run(tc.sdk+"-"+tc.negotiate, func(t *testing.T) {
			out, stderr, code := run(t, 60*time.Second, "node", "client.mjs", tc.sdk, tc.negotiate, "--", binary, "serve", "mcp")
			var s peerSummary
			if err := json.Unmarshal([]byte(strings.TrimSpace(out)), &s); err != nil || code != 0 || !s.OK {
				t.Fatalf("exit %d, summary %q (%v), stderr %s", code, out, err, stderr)
			}
			if s.Era != tc.era || (tc.version != "" && (s.ProtocolVersion == nil || *s.ProtocolVersion != tc.version)) {
				t.Errorf("era %s version %v", s.Era, s.ProtocolVersion)
			}
			if s.Server != "agentwire-seed" || len(s.Tools) != seedToolCount || s.Echo != "hello" || s.Slow != "report finished after 3 steps" {
				t.Errorf("summary %+v", s)
			}
			// The SDK clients are known to drop the last progress event when
			// it shares a read with the result: do not insist on all three.
			if s.Progress < 1 || !s.Cancelled || !s.Alive {
				t.Errorf("progress %d cancelled %v alive %v", s.Progress, s.Cancelled, s.Alive)
			}
		})
	}
}

// The MCP Inspector CLI lists the tools of `agentwire serve mcp` in both
// eras.
func TestInspectorListsTools(t *testing.T) {
	launcher := filepath.Join("node_modules", "@modelcontextprotocol", "inspector", "clients", "launcher", "build", "index.js")
	for _, era := range []string{"legacy", "modern"} {
		t.Run(era, func(t *testing.T) {
			out, stderr, code := run(t, 60*time.Second, "node", launcher, "--cli", binary, "serve", "mcp",
				"--method", "tools/list", "--protocol-era", era)
			var r struct {
				Tools []struct{ Name string } `json:"tools"`
			}
			if err := json.Unmarshal([]byte(out), &r); err != nil || code != 0 || len(r.Tools) != seedToolCount {
				t.Fatalf("exit %d, output %q (%v), stderr %s", code, out, err, stderr)
			}
		})
	}
}

type report struct {
	Era             string `json:"era"`
	ProtocolVersion string `json:"protocol_version"`
	Probe           string `json:"probe"`
	Shutdown        string `json:"shutdown"`
}

// agentwire's negotiating client against the TypeScript servers: v1 falls
// back to legacy (the probe gets -32601), v2 is modern, server-everything is
// legacy.
func TestAgentwireCallAgainstTypeScriptServers(t *testing.T) {
	everything := filepath.Join("node_modules", "@modelcontextprotocol", "server-everything", "dist", "index.js")
	cases := []struct {
		name  string
		args  []string
		call  []string
		era   string
		probe string
		want  string
	}{
		{"ts v1", []string{"node", "server-v1.mjs"}, []string{"--tool", "echo", "--args", `{"text":"hi"}`}, "legacy", "error", `"text":"hi"`},
		{"ts v2", []string{"node", "server-v2.mjs"}, []string{"--tool", "echo", "--args", `{"text":"hi"}`}, "modern", "result", `"text":"hi"`},
		{"server-everything", []string{"node", everything, "stdio"}, nil, "legacy", "error", `"name":"echo"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			args := append(append([]string{"call", "--report", "--grace", "2s"}, tc.call...), "--")
			out, stderr, code := run(t, 60*time.Second, binary, append(args, tc.args...)...)
			lines := strings.Split(strings.TrimSpace(stderr), "\n")
			var r report
			json.Unmarshal([]byte(lines[len(lines)-1]), &r)
			if code != 0 || !strings.Contains(out, tc.want) || r.Era != tc.era || r.Probe != tc.probe {
				t.Fatalf("exit %d, stdout %.300q, report %+v, stderr %s", code, out, r, stderr)
			}
		})
	}
}

// The official TypeScript ACP client (@agentclientprotocol/sdk) spawns
// `agentwire serve acp`: a permission round trip, then a slow prompt during
// which the mode changes at once, a second prompt is refused with -32000,
// and a session/cancel makes the turn answer "cancelled" (guarantee A5).
func TestTypeScriptACPClient(t *testing.T) {
	out, stderr, code := run(t, 60*time.Second, "node", "acp-client.mjs", "--", binary, "serve", "acp")
	var s struct {
		OK              bool   `json:"ok"`
		Error           string `json:"error"`
		ProtocolVersion int    `json:"protocolVersion"`
		PermissionAsked bool   `json:"permissionAsked"`
		PermissionStop  string `json:"permissionStop"`
		SetModeMS       int    `json:"setModeMs"`
		SecondPrompt    any    `json:"secondPrompt"`
		SlowStop        string `json:"slowStop"`
		Updates         int    `json:"updates"`
		AgentExit       int    `json:"agentExit"`
	}
	if err := json.Unmarshal([]byte(strings.TrimSpace(out)), &s); err != nil || code != 0 || !s.OK {
		t.Fatalf("exit %d, summary %q (%v), stderr %s", code, out, err, stderr)
	}
	if s.ProtocolVersion != 1 || !s.PermissionAsked || s.PermissionStop != "end_turn" || s.SlowStop != "cancelled" ||
		s.SecondPrompt != float64(-32000) || s.SetModeMS > 1000 || s.Updates < 2 || s.AgentExit != 0 {
		t.Errorf("summary %+v", s)
	}
}

// `agentwire check` against other people's servers pins what they do: the
// TypeScript SDK servers and server-everything pass everything but send no
// -32700 for a line that is not JSON (a warning; they keep serving).
func TestCheckAgainstTypeScriptServers(t *testing.T) {
	everything := filepath.Join("node_modules", "@modelcontextprotocol", "server-everything", "dist", "index.js")
	for _, server := range [][]string{{"node", "server-v1.mjs"}, {"node", "server-v2.mjs"}, {"node", everything, "stdio"}} {
		t.Run(filepath.Base(server[1]), func(t *testing.T) {
			out, stderr, code := run(t, 90*time.Second, binary, append([]string{"check", "--json", "--grace", "2s", "--"}, server...)...)
			var rep struct {
				Passed bool `json:"passed"`
				Checks []struct {
					Check, Result string
				} `json:"checks"`
			}
			if err := json.Unmarshal([]byte(out), &rep); err != nil || code != 0 || !rep.Passed {
				t.Fatalf("exit %d, %q (%v), stderr %s", code, out, err, stderr)
			}
			for _, c := range rep.Checks {
				want := "pass"
				if c.Check == "not JSON" {
					want = "warn"
				}
				if c.Result != want {
					t.Errorf("%s = %s, want %s", c.Check, c.Result, want)
				}
			}
		})
	}
}
