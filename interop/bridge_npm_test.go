//go:build unix

package interop

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// npmServer is a stdio MCP server from npm put behind the bridge, and the
// tool the clients call on it.
type npmServer struct {
	name    string
	command []string
	tools   []string // some of the tools it must list
	tool    string
	args    map[string]string // string arguments only: the Inspector CLI passes key=value
	want    string            // in the tool's text
}

func npmServers(t *testing.T) []npmServer {
	pkg := func(name string) string {
		return filepath.Join("node_modules", "@modelcontextprotocol", name, "dist", "index.js")
	}
	// server-filesystem serves a temporary directory; only its read-only
	// tools are called.
	root := t.TempDir()
	if real, err := filepath.EvalSymlinks(root); err == nil {
		root = real
	}
	file := filepath.Join(root, "greeting.txt")
	if err := os.WriteFile(file, []byte("hello through the bridge\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// server-memory keeps its graph in a file of its own.
	memory := filepath.Join(t.TempDir(), "memory.jsonl")
	return []npmServer{
		{"server-filesystem", []string{"node", pkg("server-filesystem"), root},
			[]string{"read_text_file", "list_directory", "list_allowed_directories"},
			"read_text_file", map[string]string{"path": file}, "hello through the bridge"},
		{"server-memory", []string{"env", "MEMORY_FILE_PATH=" + memory, "node", pkg("server-memory")},
			[]string{"create_entities", "read_graph", "search_nodes"},
			"read_graph", nil, `"entities"`},
		{"server-everything", []string{"node", pkg("server-everything"), "stdio"},
			[]string{"echo", "get-sum"},
			"echo", map[string]string{"message": "hi from the bridge"}, "Echo: hi from the bridge"},
		// A dual-era server on the TypeScript SDK v2: the bridge forwards
		// 2026-07-28 requests as they are, and adds _meta to legacy ones.
		{"ts-sdk-v2-server", []string{"node", "server-v2.mjs"}, []string{"echo"},
			"echo", map[string]string{"text": "hi from the bridge"}, "hi from the bridge"},
	}
}

type toolsSummary struct {
	OK              bool     `json:"ok"`
	Error           string   `json:"error"`
	Era             string   `json:"era"`
	ProtocolVersion *string  `json:"protocolVersion"`
	Tools           []string `json:"tools"`
	IsError         bool     `json:"isError"`
	Text            string   `json:"text"`
}

// Issue acceptance: `agentwire bridge` in front of real TypeScript-SDK
// servers from npm (server-filesystem on a temporary directory,
// server-memory, server-everything, all legacy) and of a dual-era server on
// the TypeScript SDK v2. Requests without arguments
// (tools/list) used to reach them as "params": null, which they drop
// unanswered, so no client could list their tools. Now the TypeScript v1
// and v2 clients (v2 in the legacy era and in auto mode, which lands on
// 2026-07-28), the Inspector CLI in both eras and `agentwire call --url`
// list the tools and call one.
func TestBridgeInFrontOfNpmServers(t *testing.T) {
	launcher := filepath.Join("node_modules", "@modelcontextprotocol", "inspector", "clients", "launcher", "build", "index.js")
	for _, srv := range npmServers(t) {
		t.Run(srv.name, func(t *testing.T) {
			t.Parallel()
			url := startHTTP(t, append([]string{"bridge", "--http", "127.0.0.1:0", "--"}, srv.command...)...)
			args, _ := json.Marshal(srv.args)
			if srv.args == nil {
				args = []byte("{}")
			}
			checkTools := func(t *testing.T, tools []string) {
				t.Helper()
				for _, want := range srv.tools {
					if !slices.Contains(tools, want) {
						t.Errorf("tool %s not listed: %v", want, tools)
					}
				}
			}
			for _, tc := range []struct{ sdk, negotiate, era, version string }{
				{"v1", "legacy", "legacy", ""},
				{"v2", "legacy", "legacy", "2025-11-25"},
				{"v2", "auto", "modern", "2026-07-28"},
			} {
				t.Run(tc.sdk+"-"+tc.negotiate, func(t *testing.T) {
					out, stderr, code := run(t, 60*time.Second, "node", "tools-client.mjs", tc.sdk, tc.negotiate, url, srv.tool, string(args))
					var s toolsSummary
					if err := json.Unmarshal([]byte(strings.TrimSpace(out)), &s); err != nil || code != 0 || !s.OK {
						t.Fatalf("exit %d, summary %q (%v), stderr %s", code, out, err, stderr)
					}
					if s.Era != tc.era || (tc.version != "" && (s.ProtocolVersion == nil || *s.ProtocolVersion != tc.version)) {
						t.Errorf("era %s version %v", s.Era, s.ProtocolVersion)
					}
					checkTools(t, s.Tools)
					if s.IsError || !strings.Contains(s.Text, srv.want) {
						t.Errorf("%s: isError %v, text %q", srv.tool, s.IsError, s.Text)
					}
				})
			}
			for _, era := range []string{"legacy", "modern"} {
				t.Run("inspector-"+era, func(t *testing.T) {
					out, stderr, code := run(t, 60*time.Second, "node", launcher, "--cli", url, "--transport", "http",
						"--method", "tools/list", "--protocol-era", era)
					var list struct {
						Tools []struct{ Name string } `json:"tools"`
					}
					if err := json.Unmarshal([]byte(out), &list); err != nil || code != 0 {
						t.Fatalf("tools/list: exit %d, output %q (%v), stderr %s", code, out, err, stderr)
					}
					var names []string
					for _, tool := range list.Tools {
						names = append(names, tool.Name)
					}
					checkTools(t, names)
					call := []string{launcher, "--cli", url, "--transport", "http", "--method", "tools/call",
						"--tool-name", srv.tool, "--protocol-era", era}
					for k, v := range srv.args {
						call = append(call, "--tool-arg", k+"="+v)
					}
					out, stderr, code = run(t, 60*time.Second, "node", call...)
					var res struct {
						IsError bool                          `json:"isError"`
						Content []struct{ Type, Text string } `json:"content"`
					}
					if err := json.Unmarshal([]byte(out), &res); err != nil || code != 0 || res.IsError ||
						len(res.Content) == 0 || !strings.Contains(res.Content[0].Text, srv.want) {
						t.Fatalf("tools/call: exit %d, output %q (%v), stderr %s", code, out, err, stderr)
					}
				})
			}
			t.Run("agentwire-call", func(t *testing.T) {
				for _, era := range []string{"legacy", "auto"} {
					out, stderr, code := run(t, 60*time.Second, binary, "call", "--url", url, "--era", era, "--timeout", "15s")
					if code != 0 || !strings.Contains(out, `"name":"`+srv.tool+`"`) {
						t.Fatalf("tools/list (%s): exit %d: %.300s %s", era, code, out, stderr)
					}
					out, stderr, code = run(t, 60*time.Second, binary, "call", "--url", url, "--era", era, "--timeout", "15s",
						"--tool", srv.tool, "--args", string(args))
					if code != 0 || !strings.Contains(out, strings.ReplaceAll(srv.want, `"`, `\"`)) {
						t.Fatalf("tools/call (%s): exit %d: %.300s %s", era, code, out, stderr)
					}
				}
			})
		})
	}
}

// Issue acceptance: `serve mcp`'s echo, whose schema requires text, no
// longer runs on {}: the TypeScript clients, in both eras, get a tool
// result with isError that says what was wrong, directly and through the
// bridge.
func TestTypeScriptClientsSeeArgumentValidation(t *testing.T) {
	for _, target := range []struct {
		name string
		args []string
	}{
		{"serve", []string{"serve", "mcp", "--http", "127.0.0.1:0"}},
		{"bridge", []string{"bridge", "--http", "127.0.0.1:0", "--", binary, "serve", "mcp"}},
	} {
		t.Run(target.name, func(t *testing.T) {
			t.Parallel()
			url := startHTTP(t, target.args...)
			for _, c := range [][2]string{{"v1", "legacy"}, {"v2", "auto"}} {
				out, stderr, code := run(t, 60*time.Second, "node", "tools-client.mjs", c[0], c[1], url, "echo", `{}`)
				var s toolsSummary
				if err := json.Unmarshal([]byte(strings.TrimSpace(out)), &s); err != nil || code != 0 || !s.OK {
					t.Fatalf("%s: exit %d, summary %q (%v), stderr %s", c[0], code, out, err, stderr)
				}
				if !s.IsError || s.Text != `invalid arguments for echo: argument "text" is required but missing.` {
					t.Errorf("%s %s: isError %v, text %q", c[0], s.Era, s.IsError, s.Text)
				}
			}
		})
	}
}
