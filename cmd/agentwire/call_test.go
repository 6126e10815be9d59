//go:build unix

package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentwire/agentwire/internal/testserver"
)

type callResult struct {
	code   int
	stdout string
	stderr string
	report callReport
	took   time.Duration
}

// agentwireCall runs the built `agentwire call` against this test binary
// re-executed as a server in mode.
func agentwireCall(t *testing.T, mode string, args ...string) callResult {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	// These servers speak plain JSON-RPC: no MCP handshake.
	cmd := exec.Command(binary, append(append([]string{"call", "--era", "none"}, args...), "--", self)...)
	cmd.Env = testserver.Command(mode)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	start := time.Now()
	err = cmd.Run()
	r := callResult{stdout: out.String(), stderr: errb.String(), took: time.Since(start)}
	if ee, ok := err.(*exec.ExitError); ok {
		r.code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	if i := strings.LastIndex(strings.TrimSpace(r.stderr), "\n{"); i >= 0 || strings.HasPrefix(r.stderr, "{") {
		line := strings.TrimSpace(r.stderr[i+1:])
		json.Unmarshal([]byte(line), &r.report)
	}
	return r
}

// Acceptance: with --grace 0.3s the report says exited (well under 0.3 s),
// terminated (about 0.3 s) or killed (about 0.6 s).
func TestCallShutdownLadder(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("POSIX ladder")
	}
	cases := []struct {
		mode     string
		outcome  string
		min, max int64 // ms
	}{
		// The outcome is what matters; the bounds only say that no
		// step waited longer than it must (one grace is 300 ms), with
		// room for a loaded machine.
		{"echo", "exited", 0, 299},
		{"ignore-eof", "terminated", 300, 599},
		{"ignore-term", "killed", 600, 1200},
	}
	for _, tc := range cases {
		t.Run(tc.mode, func(t *testing.T) {
			r := agentwireCall(t, tc.mode, "--grace", "0.3s", "--report", "--method", "echo", "--params", `{"x":1}`)
			if r.code != 0 || strings.TrimSpace(r.stdout) != `{"x":1}` {
				t.Fatalf("exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
			}
			if r.report.Shutdown != tc.outcome || r.report.ShutdownMS < tc.min || r.report.ShutdownMS > tc.max {
				t.Fatalf("report %+v, want %s in [%d, %d] ms", r.report, tc.outcome, tc.min, tc.max)
			}
		})
	}
}

// Acceptance: no process of the server's group is left afterwards.
func TestCallLeavesNoProcessBehind(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("checks /proc")
	}
	r := agentwireCall(t, "grandchild", "--grace", "0.3s", "--report", "--method", "echo")
	var pid int
	if _, err := fmt.Sscanf(r.report.StderrTail, "grandchild %d", &pid); err != nil {
		t.Fatalf("no grandchild pid in %+v (stderr %q)", r.report, r.stderr)
	}
	for i := 0; i < 100; i++ {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil || strings.Fields(string(b))[2] == "Z" {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	syscall.Kill(pid, syscall.SIGKILL)
	t.Fatalf("grandchild %d is still running", pid)
}

// Acceptance: a DEBUG line on stdout before the reply: the call succeeds and
// the report counts 1 violation.
func TestCallCountsStdoutPollution(t *testing.T) {
	r := agentwireCall(t, "polluted", "--report", "--method", "echo", "--params", `[1]`)
	if r.code != 0 || strings.TrimSpace(r.stdout) != "[1]" || r.report.StdoutViolations != 1 {
		t.Fatalf("exit %d, stdout %q, report %+v", r.code, r.stdout, r.report)
	}
}

// Acceptance: a server that exits in the middle of a call: exit 2 within a
// second, with the exit status and the stderr tail in the message.
func TestCallServerCrash(t *testing.T) {
	r := agentwireCall(t, "crash", "--method", "crash", "--report")
	if r.code != 2 || r.took > 1500*time.Millisecond {
		t.Fatalf("exit %d after %v", r.code, r.took)
	}
	for _, want := range []string{"exit status 3", "fatal: crashing on purpose"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("stderr lacks %q: %s", want, r.stderr)
		}
	}
	if r.report.ExitCode != 3 || r.report.Shutdown != "exited" {
		t.Errorf("report %+v", r.report)
	}
}

func TestCallExitCodes(t *testing.T) {
	if r := agentwireCall(t, "echo", "--method", "fail", "--params", `{"code":-32001,"message":"no"}`); r.code != 1 ||
		strings.TrimSpace(r.stdout) != `{"code":-32001,"message":"no"}` {
		t.Errorf("JSON-RPC error: exit %d, stdout %q", r.code, r.stdout)
	}
	if r := agentwireCall(t, "echo", "--method", "sleep", "--params", `{"ms":10000}`, "--timeout", "100ms"); r.code != 2 ||
		!strings.Contains(r.stderr, "no response") {
		t.Errorf("timeout: exit %d, stderr %q", r.code, r.stderr)
	}
	if r := agentwireCall(t, "echo", "--params", `{bad`); r.code != 2 {
		t.Errorf("bad params: exit %d", r.code)
	}
	cmd := exec.Command(binary, "call", "--era", "none", "--", "/nonexistent/server")
	if err := cmd.Run(); err == nil || cmd.ProcessState.ExitCode() != 2 {
		t.Errorf("missing server: %v", err)
	}
}

// mcpCall runs `agentwire call` against `agentwire serve mcp` with flags.
func mcpCall(t *testing.T, callArgs []string, serveArgs ...string) callResult {
	t.Helper()
	args := append([]string{"call", "--report"}, callArgs...)
	args = append(append(args, "--", binary, "serve", "mcp"), serveArgs...)
	cmd := exec.Command(binary, args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	start := time.Now()
	err := cmd.Run()
	r := callResult{stdout: out.String(), stderr: errb.String(), took: time.Since(start)}
	if ee, ok := err.(*exec.ExitError); ok {
		r.code = ee.ExitCode()
	}
	lines := strings.Split(strings.TrimSpace(r.stderr), "\n")
	json.Unmarshal([]byte(lines[len(lines)-1]), &r.report)
	return r
}

// call negotiates by default and reports what it found (guarantee E2): modern
// against a dual server, legacy (probe error) against a legacy one, and a
// fallback after the probe timeout against a silent one.
func TestCallNegotiates(t *testing.T) {
	cases := []struct {
		name      string
		call      []string
		serve     []string
		era       string
		probe     string
		version   string
		minMS     int64
		maxMS     int64
		wantInOut string
	}{
		{"dual", []string{"--tool", "echo", "--args", `{"text":"hi"}`}, nil, "modern", "result", "2026-07-28", 0, 2000, `"text":"hi"`},
		{"legacy", nil, []string{"--era", "legacy"}, "legacy", "error", "2025-11-25", 0, 2000, `"name":"slow_report"`},
		{"silent legacy", []string{"--probe-timeout", "0.5s"}, []string{"--era", "legacy", "--legacy-silent"}, "legacy", "timeout", "2025-11-25", 500, 2500, `"tools"`},
		{"forced legacy", []string{"--era", "legacy"}, nil, "legacy", "none", "2025-11-25", 0, 2000, `"tools"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := mcpCall(t, tc.call, tc.serve...)
			if r.code != 0 || !strings.Contains(r.stdout, tc.wantInOut) {
				t.Fatalf("exit %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
			}
			rep := r.report
			if rep.Era != tc.era || rep.Probe != tc.probe || rep.ProtocolVersion != tc.version ||
				rep.ConnectMS < tc.minMS || rep.ConnectMS > tc.maxMS || rep.Shutdown != "exited" {
				t.Fatalf("report %+v", rep)
			}
		})
	}
	// --era modern against a legacy server is a transport-level failure.
	if r := mcpCall(t, []string{"--era", "modern"}, "--era", "legacy"); r.code != 2 {
		t.Errorf("modern against legacy: exit %d, stderr %q", r.code, r.stderr)
	}
}

// The chatty tool without the stdout guard pollutes stdout: the call still
// succeeds and the report counts the line.
func TestCallChattyWithoutGuard(t *testing.T) {
	r := mcpCall(t, []string{"--tool", "chatty"}, "--no-stdout-guard")
	if r.code != 0 || r.report.StdoutViolations != 1 {
		t.Fatalf("exit %d report %+v", r.code, r.report)
	}
	r = mcpCall(t, []string{"--tool", "chatty"})
	if r.code != 0 || r.report.StdoutViolations != 0 || !strings.Contains(r.report.StderrTail, "DEBUG: looking things up...") {
		t.Fatalf("guarded: exit %d report %+v", r.code, r.report)
	}
}

// T1: serve --listen and call --connect, over a Unix socket and
// TCP, with the unchanged framing; the server stops on SIGTERM and removes
// its socket.
func TestListenAndConnect(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "aw.sock")
	for _, tc := range []struct {
		name, addr string
		serve      []string
		call       []string
		want       string
	}{
		{"mcp over unix", "unix:" + sock, []string{"mcp"}, []string{"--tool", "echo", "--args", `{"text":"via unix"}`}, `"text":"via unix"`},
		{"echo over tcp", "tcp:" + freePort(t), []string{"echo"}, []string{"--era", "none", "--method", "echo", "--params", `[1,2]`}, `[1,2]`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := exec.Command(binary, append(append([]string{"serve"}, tc.serve...), "--listen", tc.addr)...)
			if err := srv.Start(); err != nil {
				t.Fatal(err)
			}
			defer srv.Process.Kill()
			var out []byte
			var err error
			for i := 0; i < 50; i++ { // until it listens
				out, err = exec.Command(binary, append([]string{"call", "--connect", tc.addr}, tc.call...)...).Output()
				if err == nil {
					break
				}
				time.Sleep(50 * time.Millisecond)
			}
			if err != nil || !strings.Contains(string(out), tc.want) {
				t.Fatalf("call: %v, %s", err, out)
			}
			srv.Process.Signal(syscall.SIGTERM)
			if err := srv.Wait(); err != nil {
				t.Errorf("server exit: %v", err)
			}
			if strings.HasPrefix(tc.addr, "unix:") {
				if _, err := os.Stat(sock); err == nil {
					t.Error("socket file left behind")
				}
			}
		})
	}
}

// freePort returns a loopback address whose port was free a moment ago.
func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// stdio-only behaviours of serve mcp are refused with --listen rather than
// silently ignored.
func TestListenRejectsStdioOnlyFlags(t *testing.T) {
	for _, flag := range []string{"--ignore-eof", "--ignore-sigterm", "--no-stdout-guard"} {
		cmd := exec.Command(binary, "serve", "mcp", "--listen", "tcp:127.0.0.1:0", flag)
		if err := cmd.Run(); err == nil || cmd.ProcessState.ExitCode() != 2 {
			t.Errorf("serve mcp --listen %s: %v", flag, err)
		}
	}
	cmd := exec.Command(binary, "serve", "mcp", "--listen", "tcp:127.0.0.1:0", "--era", "bogus")
	if err := cmd.Run(); err == nil || cmd.ProcessState.ExitCode() != 2 {
		t.Errorf("serve mcp --listen --era bogus: %v", err)
	}
}
