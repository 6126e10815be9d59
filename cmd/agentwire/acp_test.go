package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentwire/agentwire/acp"
	"github.com/agentwire/agentwire/internal/testserver"
)

// runACPCommand runs `agentwire acp ARGS -- AGENT` and returns stdout,
// stderr and the exit status. env, when set, is the environment (a
// testserver mode: the agent is then this test binary).
func runACPCommand(t *testing.T, env []string, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(binary, append([]string{"acp"}, args...)...)
	cmd.Env = env
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return out.String(), errb.String(), code
}

// demoAgent is the command line of agentwire's example agent.
func demoAgent() []string { return []string{"--", binary, "serve", "acp"} }

// modeAgent is this test binary as the agent of a testserver mode, and its
// environment.
func modeAgent(t *testing.T, mode string) ([]string, []string) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return []string{"--", self}, testserver.Command(mode)
}

// --prompt prints the agent's reply (and nothing else) on stdout, ended
// with a newline, and exits 0 on end_turn.
func TestACPPromptPrintsOnlyTheAgentsReply(t *testing.T) {
	t.Parallel()
	out, errs, code := runACPCommand(t, nil, append([]string{"--prompt", "hi", "--grace", "0.3s"}, demoAgent()...)...)
	if code != 0 || out != "hi\n" {
		t.Fatalf("exit %d, stdout %q; stderr %s", code, out, errs)
	}
	if !strings.Contains(errs, "agentwire-acp-example 1.0.0, ACP v1") {
		t.Errorf("no banner on stderr: %s", errs)
	}
	out, _, code = runACPCommand(t, nil, append([]string{"--prompt", "hi", "--quiet"}, demoAgent()...)...)
	if code != 0 || out != "hi\n" {
		t.Errorf("--quiet: exit %d, stdout %q", code, out)
	}
}

// The agent's chunks reach stdout in the order sent.
func TestACPPromptStreamsChunksInOrder(t *testing.T) {
	t.Parallel()
	out, errs, code := runACPCommand(t, nil, append([]string{"--prompt", "slow 3"}, demoAgent()...)...)
	want := "chunk 1 of 3 (mode ask)\nchunk 2 of 3 (mode ask)\nchunk 3 of 3 (mode ask)\n"
	if code != 0 || out != want {
		t.Fatalf("exit %d, stdout %q; stderr %s", code, out, errs)
	}
	// --mode is applied before the prompt.
	out, errs, code = runACPCommand(t, nil, append([]string{"--prompt", "slow 1", "--mode", "code"}, demoAgent()...)...)
	if code != 0 || out != "chunk 1 of 1 (mode code)\n" {
		t.Errorf("--mode code: exit %d, stdout %q; stderr %s", code, out, errs)
	}
}

// The permission question follows --permission; without a terminal the
// default refuses.
func TestACPPermissionFollowsThePolicy(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ flag, want string }{
		{"allow", "permission: allow\n"},
		{"deny", "permission: reject\n"},
		{"", "permission: reject\n"},
	} {
		t.Run(tc.flag, func(t *testing.T) {
			t.Parallel()
			args := []string{"--prompt", "permission"}
			if tc.flag != "" {
				args = append(args, "--permission", tc.flag)
			}
			out, errs, code := runACPCommand(t, nil, append(args, demoAgent()...)...)
			if code != 0 || out != tc.want {
				t.Errorf("exit %d, stdout %q, want %q; stderr %s", code, out, tc.want, errs)
			}
		})
	}
	// ask needs a terminal to ask on.
	_, errs, code := runACPCommand(t, nil, append([]string{"--prompt", "permission", "--permission", "ask"}, demoAgent()...)...)
	if code != exitUsage || !strings.Contains(errs, "needs stdin on a terminal") {
		t.Errorf("--permission ask without a terminal: exit %d; stderr %s", code, errs)
	}
}

// An agent that requires authentication: exit 3, its methods listed with
// the --auth hint; with --auth the turn runs.
func TestACPAuthRequiredExits3ListingTheMethods(t *testing.T) {
	t.Parallel()
	agent, env := modeAgent(t, "acp-auth-required")
	out, errs, code := runACPCommand(t, env, append([]string{"--prompt", "hi", "--grace", "0.3s"}, agent...)...)
	if code != exitACPAuth || out != "" {
		t.Fatalf("exit %d, stdout %q; stderr %s", code, out, errs)
	}
	for _, want := range []string{"requires authentication", "agent-login  Log in (agent)", "api-key  API key (env_var)",
		"set AGENT_API_KEY", "--auth agent-login"} {
		if !strings.Contains(errs, want) {
			t.Errorf("stderr lacks %q: %s", want, errs)
		}
	}
	out, errs, code = runACPCommand(t, env, append([]string{"--prompt", "hi", "--auth", "agent-login", "--grace", "0.3s"}, agent...)...)
	if code != 0 || out != "hi\n" {
		t.Errorf("--auth agent-login: exit %d, stdout %q; stderr %s", code, out, errs)
	}
	// A method of a type the client cannot run is explained, not sent.
	_, errs, code = runACPCommand(t, env, append([]string{"--prompt", "hi", "--auth", "api-key", "--grace", "0.3s"}, agent...)...)
	if code != exitACPAuth || !strings.Contains(errs, `type "env_var"`) {
		t.Errorf("--auth api-key: exit %d; stderr %s", code, errs)
	}
}

// --timeout shorter than the turn cancels it (session/cancel): the agent
// answers "cancelled", exit 7.
func TestACPTimeoutCancelsTheTurnExit7(t *testing.T) {
	t.Parallel()
	// slow 40 takes 2 s; the turn is cancelled after 300 ms.
	out, errs, code := runACPCommand(t, nil, append([]string{"--prompt", "slow 40", "--timeout", "300ms", "--report"}, demoAgent()...)...)
	if code != exitACPCancelled {
		t.Fatalf("exit %d, want 7; stdout %q; stderr %s", code, out, errs)
	}
	if strings.Contains(out, "chunk 40 of 40") {
		t.Errorf("the turn ran to its end: %q", out)
	}
	if rep := lastReport(t, errs); rep.StopReason != string(acp.Cancelled) {
		t.Errorf("report stop_reason %q", rep.StopReason)
	}
}

// lastReport parses the --report line of stderr.
func lastReport(t *testing.T, stderr string) acpReport {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(stderr), "\n")
	var rep acpReport
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &rep); err != nil {
		t.Fatalf("no report on stderr's last line: %v\n%s", err, stderr)
	}
	return rep
}

// --report writes one JSON line with the run's facts.
func TestACPReportHasTheRunsFields(t *testing.T) {
	t.Parallel()
	out, errs, code := runACPCommand(t, nil, append([]string{"--prompt", "permission", "--report", "--grace", "0.3s"}, demoAgent()...)...)
	if code != 0 || out != "permission: reject\n" {
		t.Fatalf("exit %d, stdout %q; stderr %s", code, out, errs)
	}
	rep := lastReport(t, errs)
	if rep.Agent != "agentwire-acp-example" || rep.AgentVersion != "1.0.0" || rep.ProtocolVersion != 1 {
		t.Errorf("agent %q %q v%d", rep.Agent, rep.AgentVersion, rep.ProtocolVersion)
	}
	if rep.SessionID == "" || rep.StopReason != "end_turn" || rep.Shutdown != "exited" || rep.ExitCode != 0 {
		t.Errorf("session %q stop %q shutdown %q exit %d", rep.SessionID, rep.StopReason, rep.Shutdown, rep.ExitCode)
	}
	if rep.Updates[acp.UpdateAgentMessageChunk] != 1 {
		t.Errorf("updates %v", rep.Updates)
	}
	if p := rep.Permissions; p.Asked != 1 || p.Rejected != 1 || p.Allowed != 0 {
		t.Errorf("permissions %+v", p)
	}
	if rep.AuthMethods == nil || rep.StdoutViolations != 0 {
		t.Errorf("auth methods %v, violations %d", rep.AuthMethods, rep.StdoutViolations)
	}
	// Every field of G.3 is present, snake_case.
	var raw map[string]json.RawMessage
	json.Unmarshal([]byte(strings.TrimSpace(errs)[strings.LastIndex(strings.TrimSpace(errs), "\n")+1:]), &raw)
	for _, k := range []string{"agent", "agent_version", "protocol_version", "auth_methods", "session_id", "stop_reason",
		"initialize_ms", "turn_ms", "updates", "permissions", "fs", "terminals", "shutdown", "shutdown_ms",
		"stdout_violations", "late_responses", "restarts", "exit_code", "stderr_tail"} {
		if _, ok := raw[k]; !ok {
			t.Errorf("report lacks %q", k)
		}
	}
}

// A polluting agent's stray stdout line is counted, not fatal.
func TestACPPollutingAgentIsCountedNotFatal(t *testing.T) {
	t.Parallel()
	agent, env := modeAgent(t, "acp-pollutes")
	out, errs, code := runACPCommand(t, env, append([]string{"--prompt", "hi", "--report", "--grace", "0.3s"}, agent...)...)
	if code != 0 || out != "hi\n" {
		t.Fatalf("exit %d, stdout %q; stderr %s", code, out, errs)
	}
	if rep := lastReport(t, errs); rep.StdoutViolations != 1 {
		t.Errorf("stdout_violations %d, want 1", rep.StdoutViolations)
	}
}

// Usage errors exit 2 with the synopsis; --help lists the exit statuses.
func TestACPUsageErrors(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{},
		{"--prompt", "hi", "--prompt-file", "f", "--", "x"},
		{"--load", "a", "--resume", "b", "--", "x"},
		{"--permission", "maybe", "--", "x"},
		{"--config", "novalue", "--", "x"},
		{"--cwd", "/nonexistent/agentwire", "--", "x"},
	} {
		_, errs, code := runACPCommand(t, nil, args...)
		if code != exitUsage || !strings.Contains(errs, "usage: agentwire acp") {
			t.Errorf("%q: exit %d; stderr %s", args, code, errs)
		}
	}
	out, _, code := runACPCommand(t, nil, "--help")
	if code != 0 || !strings.Contains(out, "3 the agent requires authentication") || !strings.Contains(out, "-permission") {
		t.Errorf("--help: exit %d; %s", code, out)
	}
	// An agent that cannot be started is a transport failure.
	_, errs, code := runACPCommand(t, nil, "--prompt", "hi", "--", "/nonexistent/agentwire-no-such-agent")
	if code != exitTransport {
		t.Errorf("missing agent: exit %d; stderr %s", code, errs)
	}
}

// Each stop reason has its exit status.
func TestACPStopReasonsMapToExitStatuses(t *testing.T) {
	for reason, want := range map[acp.StopReason]int{acp.EndTurn: 0, acp.MaxTokens: 4, acp.MaxTurnRequests: 5,
		acp.Refusal: 6, acp.Cancelled: 7, "something_new": 8} {
		if got := stopStatus(reason); got != want {
			t.Errorf("%s: %d, want %d", reason, got, want)
		}
	}
}

// --connect talks to an agent listening on a socket instead of starting one.
func TestACPConnectTalksToAListeningAgent(t *testing.T) {
	t.Parallel()
	sock := filepath.Join(t.TempDir(), "agent.sock")
	srv := exec.Command(binary, "serve", "acp", "--listen", "unix:"+sock)
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		srv.Process.Signal(syscall.SIGTERM)
		srv.Wait()
	}()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if _, err := os.Stat(sock); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the agent did not listen")
		}
	}
	out, errs, code := runACPCommand(t, nil, "--prompt", "hi", "--connect", "unix:"+sock)
	if code != 0 || out != "hi\n" {
		t.Errorf("exit %d, stdout %q; stderr %s", code, out, errs)
	}
}
