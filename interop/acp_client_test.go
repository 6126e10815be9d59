package interop

// agentwire's ACP client (acp/acpclient and `agentwire acp`) against
// agents it did not write: the TypeScript SDK's example agent (ported to
// the pinned SDK, acp-example-agent.mjs), a small agent on the same SDK
// that asks for files, terminals and MCP tools (acp-agent.mjs), and real
// agents from npm started offline (agents/package-lock.json:
// claude-agent-acp; agents/codex/package-lock.json: codex-acp, installed
// only when asked for, for its size).

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentwire/agentwire/acp"
	"github.com/agentwire/agentwire/acp/acpclient"
	"github.com/agentwire/agentwire/client"
	"github.com/agentwire/agentwire/mcp"
	"github.com/agentwire/agentwire/mcp/server"
	"github.com/agentwire/agentwire/process"
)

// acpReport is the part of `agentwire acp --report` these tests read.
type acpReport struct {
	Agent        string          `json:"agent"`
	AgentVersion string          `json:"agent_version"`
	StopReason   string          `json:"stop_reason"`
	ExitCode     int             `json:"exit_code"` // the agent's, after the shutdown ladder
	AuthMethods  json.RawMessage `json:"auth_methods"`
	Permissions  struct {
		Asked, Allowed, Rejected, Cancelled int
	} `json:"permissions"`
}

// acpRun is one run of `agentwire ARGS...` with env added to this
// process's environment (or, with clean, instead of it).
type acpRun struct {
	stdout, stderr string
	code           int
	elapsed        time.Duration
}

func runAgentwire(t *testing.T, timeout time.Duration, env []string, clean bool, args ...string) acpRun {
	t.Helper()
	cmd := exec.Command(binary, args...)
	if clean {
		cmd.Env = env
	} else {
		cmd.Env = append(os.Environ(), env...)
	}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	started := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var r acpRun
	select {
	case err := <-done:
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			r.code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
	case <-time.After(timeout):
		cmd.Process.Kill()
		<-done
		t.Fatalf("agentwire %q did not finish within %v; stdout:\n%s\nstderr:\n%s", args, timeout, out.String(), errb.String())
	}
	r.elapsed = time.Since(started)
	r.stdout, r.stderr = out.String(), errb.String()
	return r
}

// report finds --report's JSON line: the last line of stderr that is a
// JSON object.
func (r acpRun) report(t *testing.T) acpReport {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(r.stderr), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		var rep acpReport
		if strings.HasPrefix(lines[i], "{") && json.Unmarshal([]byte(lines[i]), &rep) == nil {
			return rep
		}
	}
	t.Fatalf("no --report line on stderr:\n%s", r.stderr)
	return acpReport{}
}

// The acceptance criterion: `agentwire acp --prompt hi -- <agent>` returns
// the TypeScript SDK example agent's reply. The example asks permission
// for its edit; without a terminal the default policy refuses it, and the
// agent takes its "skip" branch. With --permission allow it takes the
// other.
func TestAgentwireACPPromptAgainstTypeScriptExampleAgent(t *testing.T) {
	const first = "I'll help you with that. Let me start by reading some files to understand the current situation."
	const second = " Now I understand the project structure. I need to make some changes to improve it."
	cases := []struct {
		name, permission, reply string
		allowed, rejected       int
	}{
		{"default policy denies", "", " I understand you prefer not to make that change. I'll skip the configuration update.", 0, 1},
		{"permission allow", "allow", " Perfect! I've successfully updated the configuration. The changes have been applied.", 1, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			args := []string{"acp", "--prompt", "hi", "--report"}
			if tc.permission != "" {
				args = append(args, "--permission", tc.permission)
			}
			args = append(args, "--", "node", "acp-example-agent.mjs")
			r := runAgentwire(t, 60*time.Second, []string{"ACP_EXAMPLE_DELAY_MS=20"}, false, args...)
			rep := r.report(t)
			if r.code != 0 || r.stdout != first+second+tc.reply+"\n" {
				t.Fatalf("exit %d, stdout %q; stderr:\n%s", r.code, r.stdout, r.stderr)
			}
			if rep.StopReason != "end_turn" || rep.ExitCode != 0 || rep.Permissions.Asked != 1 ||
				rep.Permissions.Allowed != tc.allowed || rep.Permissions.Rejected != tc.rejected {
				t.Errorf("report %+v", rep)
			}
		})
	}
}

// tsAgent starts acp-agent.mjs with agentwire's client: files confined to
// the session's roots (the default), terminals on, updates collected.
type tsAgent struct {
	conn *acpclient.Conn
	sess *acpclient.Session

	mu     sync.Mutex
	text   strings.Builder
	chunks chan string
}

func startTSAgent(t *testing.T, root string, provide []acpclient.ProvidedMCP) *tsAgent {
	t.Helper()
	a := &tsAgent{chunks: make(chan string, 256)}
	updates := acpclient.UpdateFunc(func(_ context.Context, u *acpclient.Update) error {
		if u.Kind == "agent_message_chunk" {
			a.mu.Lock()
			a.text.WriteString(u.Text())
			a.mu.Unlock()
			select {
			case a.chunks <- u.Text():
			default:
			}
		}
		return nil
	})
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	conn, err := acpclient.Start(ctx, process.Command{Path: "node", Args: []string{"acp-agent.mjs"}}, &acpclient.Options{
		Terminals: &acpclient.TerminalOptions{KillGrace: 300 * time.Millisecond},
		Updates:   updates,
		Logger:    slog.New(slog.DiscardHandler), // the refusals are expected
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	a.conn = conn
	a.sess, err = conn.NewSession(ctx, acpclient.SessionConfig{Cwd: root, ProvideMCP: provide})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// ask sends one prompt and decodes the agent's JSON reply.
func (a *tsAgent) ask(t *testing.T, prompt string) map[string]any {
	t.Helper()
	a.mu.Lock()
	a.text.Reset()
	a.mu.Unlock()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	stop, err := a.sess.Prompt(ctx, acp.TextBlock(prompt))
	if err != nil || stop != acp.EndTurn {
		t.Fatalf("%q: stop %q, %v", prompt, stop, err)
	}
	a.mu.Lock()
	reply := a.text.String()
	a.mu.Unlock()
	var m map[string]any
	if err := json.Unmarshal([]byte(reply), &m); err != nil {
		t.Fatalf("%q: reply %q is not one JSON object: %v", prompt, reply, err)
	}
	return m
}

// refused reports whether a reply is a JSON-RPC error from the client.
func refused(m map[string]any) (code float64, ok bool) {
	e, ok := m["error"].(map[string]any)
	if !ok {
		return 0, false
	}
	code, ok = e["code"].(float64)
	return code, ok
}

// The TypeScript SDK's agent API (ctx.client readTextFile, writeTextFile,
// createTerminal, MCP over ACP) against agentwire's client: reads and
// writes inside the session's root work, every way out of it is refused
// with a JSON-RPC error (and the outside file stays unread and unwritten),
// terminals run real commands and their kill reaches them, the client's
// own MCP server answers tools/call, and session/cancel ends a turn with
// "cancelled".
func TestACPClientAgainstTypeScriptAgent(t *testing.T) {
	root, outside := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(root, "inside.txt"), []byte("inside\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	secret := filepath.Join(outside, "secret.txt")
	if err := os.WriteFile(secret, []byte("SECRET\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(secret, filepath.Join(root, "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(root, "dir")); err != nil {
		t.Fatal(err)
	}
	tools := server.New(mcp.Implementation{Name: "client-tools", Version: "1"}, nil)
	type echoIn struct {
		Text string `json:"text"`
	}
	server.AddTool(tools, mcp.Tool{Name: "echo", Description: "Echoes text."}, func(_ context.Context, _ *server.ToolRequest, in echoIn) (*mcp.ToolResult, error) {
		return mcp.TextResult("echo: " + in.Text), nil
	})
	a := startTSAgent(t, root, []acpclient.ProvidedMCP{{Name: "tools", Server: tools}})

	t.Run("the client declares files and terminals", func(t *testing.T) {
		caps, _ := json.Marshal(a.ask(t, "caps")["clientCapabilities"])
		var c struct {
			FS struct {
				ReadTextFile, WriteTextFile bool
			} `json:"fs"`
			Terminal bool `json:"terminal"`
		}
		if json.Unmarshal(caps, &c) != nil || !c.FS.ReadTextFile || !c.FS.WriteTextFile || !c.Terminal {
			t.Fatalf("clientCapabilities %s", caps)
		}
	})

	t.Run("a read inside the root works", func(t *testing.T) {
		if m := a.ask(t, "read "+filepath.Join(root, "inside.txt")); m["content"] != "inside\n" {
			t.Fatalf("reply %v", m)
		}
	})

	t.Run("a write inside the root creates the file", func(t *testing.T) {
		path := filepath.Join(root, "sub", "new.txt")
		if m := a.ask(t, "write "+path+" hello there"); m["written"] != path {
			t.Fatalf("reply %v", m)
		}
		if b, err := os.ReadFile(path); err != nil || string(b) != "hello there" {
			t.Fatalf("file %q, %v", b, err)
		}
	})

	for _, tc := range []struct{ name, prompt string }{
		{"an absolute path outside", "read " + secret},
		{"dot-dot out of the root", "read " + filepath.Join(root, "..", filepath.Base(outside), "secret.txt")},
		{"a symlink to an outside file", "read " + filepath.Join(root, "link")},
		{"a symlink to an outside directory", "read " + filepath.Join(root, "dir", "secret.txt")},
		{"a relative path", "read inside.txt"},
		{"a write outside", "write " + filepath.Join(outside, "planted.txt") + " x"},
		{"a write through a symlinked directory", "write " + filepath.Join(root, "dir", "planted.txt") + " x"},
	} {
		t.Run("refused: "+tc.name, func(t *testing.T) {
			m := a.ask(t, tc.prompt)
			if _, ok := refused(m); !ok {
				t.Fatalf("reply %v: not refused with a JSON-RPC error", m)
			}
			if b, _ := json.Marshal(m); strings.Contains(string(b), "SECRET") {
				t.Fatalf("the outside file leaked: %s", b)
			}
			if _, err := os.Stat(filepath.Join(outside, "planted.txt")); err == nil {
				t.Fatal("a file was written outside the root")
			}
		})
	}

	t.Run("a terminal runs echo hi", func(t *testing.T) {
		m := a.ask(t, "run echo hi")
		exit, _ := m["exitStatus"].(map[string]any)
		if m["output"] != "hi\n" || m["truncated"] != false || exit == nil || exit["exitCode"] != float64(0) {
			t.Fatalf("reply %v", m)
		}
		if id, _ := m["terminalId"].(string); id == "" {
			t.Fatalf("reply %v: no terminalId", m)
		} else if _, live := a.conn.Terminal(id); live {
			t.Errorf("terminal %s still known after terminal/release", id)
		}
	})

	t.Run("terminal/kill ends a command", func(t *testing.T) {
		started := time.Now()
		m := a.ask(t, "kill sleep 600")
		exit, _ := m["exitStatus"].(map[string]any)
		if exit == nil || exit["exitCode"] != nil || exit["signal"] == nil {
			t.Fatalf("reply %v", m)
		}
		if d := time.Since(started); d > 10*time.Second {
			t.Errorf("kill took %v", d)
		}
	})

	t.Run("the client's MCP server answers the agent's tools/call", func(t *testing.T) {
		m := a.ask(t, `mcp tools echo {"text":"over acp"}`)
		b, _ := json.Marshal(m)
		if !strings.Contains(string(b), `"text":"echo: over acp"`) {
			t.Fatalf("reply %s", b)
		}
	})

	t.Run("session/cancel mid-turn ends it cancelled", func(t *testing.T) {
		for len(a.chunks) > 0 {
			<-a.chunks
		}
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		defer cancel()
		type result struct {
			stop acp.StopReason
			err  error
		}
		done := make(chan result, 1)
		go func() {
			stop, err := a.sess.Prompt(ctx, acp.TextBlock("slow 200"))
			done <- result{stop, err}
		}()
		select {
		case <-a.chunks:
		case <-time.After(10 * time.Second):
			t.Fatal("no tick within 10s")
		}
		if err := a.sess.Cancel(ctx); err != nil {
			t.Fatal(err)
		}
		r := <-done
		if r.err != nil || r.stop != acp.Cancelled {
			t.Fatalf("stop %q, %v", r.stop, r.err)
		}
	})
}

// The npm agents' installs, made once per test binary.
var (
	claudeInstall = sync.OnceValue(func() error { return npmInstall("agents") })
	codexInstall  = sync.OnceValue(func() error { return npmInstall(filepath.Join("agents", "codex")) })
)

// offlineEnv is the whole environment of a real agent under test: a fresh
// HOME (no login, no settings, no API key) and PATH, nothing else. Nothing
// inherited: an API key would make the agent try the network, and other
// variables change what it does (claude-agent-acp's session/new fails
// where IS_SANDBOX is set).
func offlineEnv(t *testing.T) []string {
	return []string{"HOME=" + t.TempDir(), "PATH=" + os.Getenv("PATH")}
}

// claude-agent-acp 0.23.1 without a login, in an environment of only HOME
// (fresh) and PATH: initialize answers with its name, version and
// capabilities, and no auth method unless the client can run one on a
// terminal (then claude-login, type terminal); session/new works, and the
// first prompt is refused with -32000 "Authentication required", which
// the client surfaces as an *AuthRequiredError. `agentwire acp --prompt`
// reports it and exits 3, well within its timeouts.
func TestRealAgentClaudeACPOffline(t *testing.T) {
	if err := claudeInstall(); err != nil {
		t.Fatal(err)
	}
	entry, err := filepath.Abs(filepath.Join("agents", "node_modules", "@zed-industries", "claude-agent-acp", "dist", "index.js"))
	if err != nil {
		t.Fatal(err)
	}
	for _, terminalAuth := range []bool{false, true} {
		name := "initialize, session/new, an unauthenticated prompt"
		if terminalAuth {
			name += ", with auth.terminal"
		}
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
			defer cancel()
			conn, err := acpclient.Start(ctx, process.Command{Path: "node", Args: []string{entry}, Env: offlineEnv(t), Dir: t.TempDir()},
				&acpclient.Options{TerminalAuth: terminalAuth})
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			info, caps := conn.AgentInfo(), conn.AgentCapabilities()
			if info.Name != "@zed-industries/claude-agent-acp" || info.Version != "0.23.1" || !caps.LoadSession || conn.ProtocolVersion() != 1 {
				t.Fatalf("agentInfo %+v, loadSession %v, protocol %d", info, caps.LoadSession, conn.ProtocolVersion())
			}
			methods := conn.AuthMethods()
			if !terminalAuth && len(methods) != 0 {
				t.Errorf("auth methods %+v without auth.terminal", methods)
			}
			if terminalAuth && (len(methods) != 1 || methods[0].ID != "claude-login" || methods[0].Type != "terminal") {
				t.Errorf("auth methods %+v with auth.terminal", methods)
			}
			sess, err := conn.NewSession(ctx, acpclient.SessionConfig{Cwd: t.TempDir()})
			if err != nil {
				t.Fatalf("session/new: %v", err)
			}
			stop, err := sess.Prompt(ctx, acp.TextBlock("hi"))
			var auth *acpclient.AuthRequiredError
			if !errors.Is(err, acpclient.ErrAuthRequired) || !errors.As(err, &auth) || len(auth.Methods) != len(methods) {
				t.Fatalf("prompt: stop %q, %v", stop, err)
			}
		})
	}
	t.Run("acp --prompt exits 3, bounded", func(t *testing.T) {
		r := runAgentwire(t, 90*time.Second, offlineEnv(t), true,
			"acp", "--prompt", "hi", "--report", "--connect-timeout", "30s", "--timeout", "30s", "--grace", "1s", "--cwd", t.TempDir(), "--", "node", entry)
		if r.code != 3 {
			t.Fatalf("exit %d after %v; stdout %q, stderr:\n%s", r.code, r.elapsed, r.stdout, r.stderr)
		}
		if rep := r.report(t); rep.Agent != "@zed-industries/claude-agent-acp" || rep.AgentVersion != "0.23.1" || string(rep.AuthMethods) != "[]" {
			t.Errorf("report %+v", rep)
		}
	})
}

// codex-acp 0.16.0 without credentials: initialize lists its three auth
// methods (chatgpt, and the env_var methods codex-api-key and
// openai-api-key, a type outside the stable schema that must survive
// decoding), session/new answers -32000 "Authentication required", which
// the client surfaces as an *AuthRequiredError carrying them, and
// `agentwire acp --prompt` exits 3. Its npm package brings a 220 MB binary:
// the test runs when it is installed already or AGENTWIRE_INTEROP_HEAVY=1
// asks for the install.
func TestRealAgentCodexACPOffline(t *testing.T) {
	lock, err := os.ReadFile(filepath.Join("agents", "codex", "package-lock.json"))
	if err != nil {
		t.Fatal(err)
	}
	stamp, _ := os.ReadFile(filepath.Join("agents", "codex", "node_modules", ".agentwire-lock"))
	if !bytes.Equal(lock, stamp) && os.Getenv("AGENTWIRE_INTEROP_HEAVY") != "1" {
		t.Skip("codex-acp (220 MB) is not installed; AGENTWIRE_INTEROP_HEAVY=1 installs it")
	}
	if err := codexInstall(); err != nil {
		t.Fatal(err)
	}
	entry, err := filepath.Abs(filepath.Join("agents", "codex", "node_modules", "@zed-industries", "codex-acp", "bin", "codex-acp.js"))
	if err != nil {
		t.Fatal(err)
	}
	t.Run("initialize and session/new", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
		defer cancel()
		conn, err := acpclient.Start(ctx, process.Command{Path: "node", Args: []string{entry}, Env: offlineEnv(t), Dir: t.TempDir()},
			// codex-acp ignores EOF: a short ladder keeps Close quick.
			&acpclient.Options{Transport: &client.Options{Process: &process.Options{Grace: 500 * time.Millisecond}}})
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		if info := conn.AgentInfo(); info.Name != "codex-acp" || info.Version != "0.16.0" {
			t.Fatalf("agentInfo %+v", info)
		}
		var ids []string
		for _, m := range conn.AuthMethods() {
			ids = append(ids, m.ID+":"+m.Type)
		}
		if got := strings.Join(ids, " "); got != "chatgpt: codex-api-key:env_var openai-api-key:env_var" {
			t.Fatalf("auth methods %s", got)
		}
		_, err = conn.NewSession(ctx, acpclient.SessionConfig{Cwd: t.TempDir()})
		var auth *acpclient.AuthRequiredError
		if !errors.Is(err, acpclient.ErrAuthRequired) || !errors.As(err, &auth) || len(auth.Methods) != 3 {
			t.Fatalf("session/new: %v", err)
		}
	})
	t.Run("acp --prompt exits 3", func(t *testing.T) {
		r := runAgentwire(t, 90*time.Second, offlineEnv(t), true,
			"acp", "--prompt", "hi", "--report", "--connect-timeout", "30s", "--timeout", "30s", "--grace", "1s", "--cwd", t.TempDir(), "--", "node", entry)
		if r.code != 3 {
			t.Fatalf("exit %d after %v; stdout %q, stderr:\n%s", r.code, r.elapsed, r.stdout, r.stderr)
		}
		for _, id := range []string{"chatgpt", "codex-api-key", "openai-api-key"} {
			if !strings.Contains(r.stderr, id) {
				t.Errorf("stderr does not name the auth method %s:\n%s", id, r.stderr)
			}
		}
	})
}

// check --acp against the TypeScript SDK's example agent: its verdicts are
// pinned, the warnings included (it ignores $/cancel_request, exits at EOF
// without answering the prompt in flight, and answers a bogus session with
// -32603).
func TestCheckACPAgainstTypeScriptExampleAgent(t *testing.T) {
	rep, code := runCheck(t, []string{"ACP_EXAMPLE_DELAY_MS=200"}, "--acp", "--", "node", "acp-example-agent.mjs")
	want := map[string]string{
		"initialize":            "pass",
		"unknown method":        "pass",
		"not JSON":              "pass",
		"batch":                 "pass",
		"session/new":           "pass",
		"unknown session":       "warn",
		"prompt":                "pass",
		"control during prompt": "pass",
		"cancel":                "pass",
		"$/cancel_request":      "warn",
		"undeclared methods":    "pass",
		"EOF behaviour":         "warn",
		"stdout hygiene":        "pass",
		"shutdown":              "pass",
	}
	for name, result := range want {
		if got, ev := rep.row(name); got != result {
			t.Errorf("%s: %s (%s), want %s", name, got, ev, result)
		}
	}
	if code != 0 {
		t.Errorf("exit %d with only warnings", code)
	}
}
