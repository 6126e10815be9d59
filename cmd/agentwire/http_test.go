//go:build unix

package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentwire/agentwire/mcp/host"
	"github.com/agentwire/agentwire/mcp/streamable"
)

// Bad combinations of the HTTP flags are usage errors (exit 2), never
// silently ignored.
func TestHTTPFlagsRefused(t *testing.T) {
	for _, args := range [][]string{
		{"serve", "mcp", "--http", "0", "--listen", "tcp:127.0.0.1:0"},
		{"serve", "mcp", "--http", "0", "--ignore-eof"},
		{"serve", "mcp", "--http", "0", "--legacy-silent"},
		{"serve", "mcp", "--token", "t"},
		{"serve", "mcp", "--allow-origin", "https://a.example"},
		{"serve", "mcp", "--http", "a:b:c"},
		{"call", "--url", "http://127.0.0.1:1/mcp", "--era", "none"},
		{"call", "--token", "t", "--", "agentwire", "serve", "mcp"},
		{"call", "--url", "http://127.0.0.1:1/mcp", "--connect", "tcp:127.0.0.1:1"},
		{"bridge"},
		{"bridge", "--http", "0"},
		{"bridge", "--", "agentwire", "serve", "mcp"},
	} {
		cmd := exec.Command(binary, args...)
		out, err := cmd.CombinedOutput()
		if err == nil || cmd.ProcessState.ExitCode() != 2 {
			t.Errorf("agentwire %q: %v %s", args, err, out)
		}
	}
}

var endpoint = regexp.MustCompile(`at (http://\S+)`)

// startServeHTTP runs `agentwire serve mcp --http ...` and returns its URL
// and a function that sends SIGTERM and returns the exit code.
func startServeHTTP(t *testing.T, args ...string) (string, func() int) {
	t.Helper()
	url, _, stop := startServeHTTPCmd(t, args...)
	return url, stop
}

// startServeHTTPCmd is startServeHTTP that also returns the process.
func startServeHTTPCmd(t *testing.T, args ...string) (string, *exec.Cmd, func() int) {
	t.Helper()
	cmd := exec.Command(binary, append([]string{"serve", "mcp", "--http"}, args...)...)
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(stderr)
	line, err := br.ReadString('\n')
	m := endpoint.FindStringSubmatch(line)
	if err != nil || m == nil {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("no endpoint line: %q %v", line, err)
	}
	go io.Copy(io.Discard, br)
	stopped := false
	stop := func() int {
		if stopped {
			return 0
		}
		stopped = true
		cmd.Process.Signal(syscall.SIGTERM)
		cmd.Wait()
		return cmd.ProcessState.ExitCode()
	}
	t.Cleanup(func() { stop() })
	return m[1], cmd, stop
}

// `serve mcp --http 0` binds 127.0.0.1, answers agentwire call --url in
// both eras, refuses foreign Host names (DNS rebinding) and, on SIGTERM,
// ends an open listen stream with its final result and exits 0.
func TestServeMCPOverHTTP(t *testing.T) {
	url, stop := startServeHTTP(t, "0")
	if !strings.HasPrefix(url, "http://127.0.0.1:") {
		t.Fatalf("bound to %s", url)
	}
	for _, era := range []string{"auto", "legacy"} {
		out, err := exec.Command(binary, "call", "--url", url, "--era", era, "--tool", "echo", "--args", `{"text":"hi"}`, "--report").CombinedOutput()
		if err != nil || !strings.Contains(string(out), `"text":"hi"`) {
			t.Fatalf("call --era %s: %v %s", era, err, out)
		}
		var rep callReport
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		json.Unmarshal([]byte(lines[len(lines)-1]), &rep)
		want := map[string]string{"auto": "modern", "legacy": "legacy"}[era]
		if rep.Era != want {
			t.Errorf("--era %s: report %+v", era, rep)
		}
	}
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
	req.Host = "rebound.example.com"
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("foreign Host: %d", resp.StatusCode)
	}

	sess, err := streamable.Connect(context.Background(), url, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	sub, err := sess.Listen(context.Background(), host.ListenFilter{ToolsListChanged: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if code := stop(); code != 0 {
		t.Errorf("exit %d after SIGTERM", code)
	}
	<-sub.Done()
	if err := sub.Err(); err != nil {
		t.Errorf("listen ended with %v, want the graceful final result", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("shutdown took %v with a listen stream open", d)
	}
}

// --token: requests without it get 401, and call --token gets through.
func TestServeMCPOverHTTPWithToken(t *testing.T) {
	url, _ := startServeHTTP(t, "127.0.0.1:0", "--token", "s3cret")
	out, err := exec.Command(binary, "call", "--url", url).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "401") {
		t.Errorf("without the token: %v %s", err, out)
	}
	if out, err := exec.Command(binary, "call", "--url", url, "--token", "s3cret").CombinedOutput(); err != nil {
		t.Errorf("with the token: %v %s", err, out)
	}
}
