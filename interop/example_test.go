package interop

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// buildExample builds examples/server for the test.
func buildExample(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "example-server")
	build := exec.Command(filepath.Join(runtime.GOROOT(), "bin", "go"), "build", "-o", bin, "../examples/server")
	build.Stderr = os.Stderr
	if err := build.Run(); err != nil {
		t.Fatal(err)
	}
	return bin
}

// Issue acceptance: the server the guide builds (one tool, one resource,
// one prompt) serves the TypeScript v1 and v2 clients in both eras.
func TestExampleServerWithTypeScriptClients(t *testing.T) {
	server := buildExample(t)
	for _, tc := range []struct{ sdk, negotiate, era string }{
		{"v1", "legacy", "legacy"},
		{"v2", "legacy", "legacy"},
		{"v2", "auto", "modern"},
	} {
		t.Run(tc.sdk+"-"+tc.negotiate, func(t *testing.T) {
			out, stderr, code := run(t, 60*time.Second, "node", "example-client.mjs", tc.sdk, tc.negotiate, "--", server)
			var s struct {
				OK                        bool
				Era, Forecast, Stations   string
				Prompt, Error             string
				Tools, Resources, Prompts []string
			}
			if err := json.Unmarshal([]byte(strings.TrimSpace(out)), &s); err != nil || code != 0 || !s.OK {
				t.Fatalf("exit %d, summary %q (%v), stderr %s", code, out, err, stderr)
			}
			if s.Era != tc.era || s.Forecast != "Oslo: sunny for 2 day(s)" || s.Stations != "Oslo\nLima\nPerth" ||
				!strings.Contains(s.Prompt, "Lima") || len(s.Tools) != 1 || len(s.Resources) != 1 || len(s.Prompts) != 1 {
				t.Errorf("summary %+v", s)
			}
		})
	}
}

// Issue acceptance: the MCP Inspector CLI uses the example server in both
// eras: tools, the resource and the prompt.
func TestExampleServerWithInspector(t *testing.T) {
	server := buildExample(t)
	launcher := filepath.Join("node_modules", "@modelcontextprotocol", "inspector", "clients", "launcher", "build", "index.js")
	for _, era := range []string{"legacy", "modern"} {
		for _, tc := range []struct {
			args []string
			want string
		}{
			{[]string{"--method", "tools/call", "--tool-name", "forecast", "--tool-arg", "city=Perth"}, "Perth: sunny"},
			{[]string{"--method", "resources/read", "--uri", "weather://stations"}, `Oslo\nLima\nPerth`},
			{[]string{"--method", "prompts/get", "--prompt-name", "plan_trip", "--prompt-args", "city=Oslo"}, "Plan a day in Oslo"},
		} {
			t.Run(era+"-"+tc.args[1], func(t *testing.T) {
				args := append([]string{launcher, "--cli", server}, tc.args...)
				args = append(args, "--protocol-era", era)
				out, stderr, code := run(t, 60*time.Second, "node", args...)
				if code != 0 || !strings.Contains(out, tc.want) {
					t.Fatalf("exit %d, output %q, stderr %s", code, out, stderr)
				}
			})
		}
	}
}
