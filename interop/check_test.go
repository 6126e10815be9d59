//go:build unix

package interop

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// checkReport is what `agentwire check --json` prints.
type checkReport struct {
	Passed bool `json:"passed"`
	Checks []struct {
		Check, Result, Evidence string
	} `json:"checks"`
}

func (r checkReport) row(name string) (result, evidence string) {
	for _, c := range r.Checks {
		if c.Check == name {
			return c.Result, c.Evidence
		}
	}
	return "", ""
}

func runCheck(t *testing.T, env []string, args ...string) (checkReport, int) {
	t.Helper()
	cmd := exec.Command(binary, append([]string{"check", "--json", "--grace", "2s"}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.Output()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	var rep checkReport
	if err := json.Unmarshal(out, &rep); err != nil {
		t.Fatalf("check printed %q: %v", out, err)
	}
	return rep, code
}

// checkNpmEntry is the entry point of an installed npm server, or a skip when
// the package is not installed.
func checkNpmEntry(t *testing.T, pkg string) string {
	t.Helper()
	path := filepath.Join("node_modules", "@modelcontextprotocol", pkg, "dist", "index.js")
	if _, err := os.Stat(path); err != nil {
		t.Skipf("%s is not installed (add it to package.json): %v", pkg, err)
	}
	return path
}

// snapshot is every file under dir with its mode, time and content.
func snapshot(t *testing.T, dir string) string {
	t.Helper()
	var b strings.Builder
	filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, _ := d.Info()
		sum := ""
		if d.Type().IsRegular() {
			data, _ := os.ReadFile(path)
			sum = fmt.Sprintf("%x", sha256.Sum256(data))
		}
		fmt.Fprintf(&b, "%s %v %d %s\n", path, info.Mode(), info.ModTime().UnixNano(), sum)
		return nil
	})
	return b.String()
}

// `check --call-tools` against server-filesystem and server-memory calls
// their read-only tools and none of the others: nothing is written, moved,
// edited or deleted (the defect: it used to call them all).
func TestCheckCallToolsLeavesRealServersAlone(t *testing.T) {
	t.Run("server-filesystem", func(t *testing.T) {
		server := checkNpmEntry(t, "server-filesystem")
		dir := t.TempDir()
		os.WriteFile(filepath.Join(dir, "agentwire"), []byte("keep me\n"), 0o644)
		os.Mkdir(filepath.Join(dir, "sub"), 0o755)
		before := snapshot(t, dir)
		rep, code := runCheck(t, nil, "--call-tools", "--", "node", server, dir)
		if after := snapshot(t, dir); after != before {
			t.Errorf("the directory changed:\n%s\nbecame\n%s", before, after)
		}
		result, ev := rep.row("call tools")
		for _, tool := range []string{"write_file", "edit_file", "create_directory", "move_file"} {
			if r, _ := rep.row("tool " + tool); r != "" || !strings.Contains(ev, tool) {
				t.Errorf("%s: row %q; summary %s %s", tool, r, result, ev)
			}
		}
		if r, _ := rep.row("tool read_text_file"); r != "pass" || code != 0 {
			t.Errorf("exit %d, read_text_file %q, report %+v", code, r, rep)
		}
	})
	t.Run("server-memory", func(t *testing.T) {
		server := checkNpmEntry(t, "server-memory")
		file := filepath.Join(t.TempDir(), "memory.jsonl")
		graph := `{"type":"entity","name":"agentwire","entityType":"project","observations":["keep me"]}` + "\n"
		os.WriteFile(file, []byte(graph), 0o644)
		rep, code := runCheck(t, []string{"MEMORY_FILE_PATH=" + file}, "--call-tools", "--", "node", server)
		if got, _ := os.ReadFile(file); string(got) != graph {
			t.Errorf("the memory file changed: %q", got)
		}
		_, ev := rep.row("call tools")
		for _, tool := range []string{"create_entities", "delete_entities", "delete_observations", "delete_relations"} {
			if r, _ := rep.row("tool " + tool); r != "" || !strings.Contains(ev, tool) {
				t.Errorf("%s: row %q; summary %s", tool, r, ev)
			}
		}
		if r, _ := rep.row("tool read_graph"); r != "pass" || code != 0 {
			t.Errorf("exit %d, read_graph %q, report %+v", code, r, rep)
		}
	})
}

// `check --url` against server-everything's Streamable HTTP mode (a
// legacy server with sessions): the rows that apply have verdicts, the
// 2026-07-28 ones are "not run", and the Origin verdict matches the
// status it quotes.
func TestCheckURLAgainstServerEverything(t *testing.T) {
	server := checkNpmEntry(t, "server-everything")
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	cmd := exec.Command("node", server, "streamableHttp")
	cmd.Env = append(os.Environ(), fmt.Sprintf("PORT=%d", port))
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Signal(syscall.SIGTERM); cmd.Wait() })
	url := fmt.Sprintf("http://127.0.0.1:%d/mcp", port)
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port)); err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("server-everything did not listen")
		}
	}
	rep, _ := runCheck(t, nil, "--url", url)
	want := map[string]string{"era": "pass", "status codes": "pass", "header mirroring": "not run", "disconnect": "not run", "listen": "not run"}
	for k, v := range want {
		if r, ev := rep.row(k); r != v {
			t.Errorf("%s = %q (%s), want %q", k, r, ev, v)
		}
	}
	if _, ev := rep.row("era"); !strings.Contains(ev, "legacy") {
		t.Errorf("era: %s", ev)
	}
	switch r, ev := rep.row("origin"); {
	case r == "pass" && strings.Contains(ev, ": 403"):
	case r == "fail" && strings.Contains(ev, ": 200"):
	default:
		t.Errorf("origin %s: %s", r, ev)
	}
}
