package gopeers_test

// ACP against github.com/coder/acp-go-sdk v0.13.0, both ways: its client
// (ClientSideConnection) driving `agentwire serve acp`, and agentwire's
// client (acp/acpclient) driving an agent built on its AgentSideConnection,
// in this test binary and as its example program.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentwire/agentwire/acp"
	"github.com/agentwire/agentwire/acp/acpclient"
	"github.com/agentwire/agentwire/mcp"
	"github.com/agentwire/agentwire/mcp/server"
	acpsdk "github.com/coder/acp-go-sdk"
)

// sdkClient is the acp-go-sdk Client of the tests: it records the text of
// every agent_message_chunk in the order the SDK hands them over, and
// answers permission requests with choose. The file and terminal methods
// are not declared in its capabilities; the SDK still needs them.
type sdkClient struct {
	mu     sync.Mutex
	chunks []string
	notify chan string // each chunk, for tests that wait for one (buffered)
	choose func(acpsdk.RequestPermissionRequest) acpsdk.RequestPermissionOutcome
	asked  int
}

func newSDKClient() *sdkClient { return &sdkClient{notify: make(chan string, 1024)} }

func (c *sdkClient) SessionUpdate(_ context.Context, n acpsdk.SessionNotification) error {
	if m := n.Update.AgentMessageChunk; m != nil && m.Content.Text != nil {
		c.mu.Lock()
		c.chunks = append(c.chunks, m.Content.Text.Text)
		c.mu.Unlock()
		select {
		case c.notify <- m.Content.Text.Text:
		default:
		}
	}
	return nil
}

func (c *sdkClient) text() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.chunks...)
}

func (c *sdkClient) reset() {
	c.mu.Lock()
	c.chunks = nil
	c.mu.Unlock()
	for len(c.notify) > 0 {
		<-c.notify
	}
}

func (c *sdkClient) RequestPermission(_ context.Context, p acpsdk.RequestPermissionRequest) (acpsdk.RequestPermissionResponse, error) {
	c.mu.Lock()
	c.asked++
	choose := c.choose
	c.mu.Unlock()
	if choose == nil {
		return acpsdk.RequestPermissionResponse{Outcome: acpsdk.NewRequestPermissionOutcomeCancelled()}, nil
	}
	return acpsdk.RequestPermissionResponse{Outcome: choose(p)}, nil
}

func (c *sdkClient) ReadTextFile(context.Context, acpsdk.ReadTextFileRequest) (acpsdk.ReadTextFileResponse, error) {
	return acpsdk.ReadTextFileResponse{}, acpsdk.NewMethodNotFound(acpsdk.ClientMethodFsReadTextFile)
}

func (c *sdkClient) WriteTextFile(context.Context, acpsdk.WriteTextFileRequest) (acpsdk.WriteTextFileResponse, error) {
	return acpsdk.WriteTextFileResponse{}, acpsdk.NewMethodNotFound(acpsdk.ClientMethodFsWriteTextFile)
}

func (c *sdkClient) CreateTerminal(context.Context, acpsdk.CreateTerminalRequest) (acpsdk.CreateTerminalResponse, error) {
	return acpsdk.CreateTerminalResponse{}, acpsdk.NewMethodNotFound(acpsdk.ClientMethodTerminalCreate)
}

func (c *sdkClient) KillTerminal(context.Context, acpsdk.KillTerminalRequest) (acpsdk.KillTerminalResponse, error) {
	return acpsdk.KillTerminalResponse{}, acpsdk.NewMethodNotFound(acpsdk.ClientMethodTerminalKill)
}

func (c *sdkClient) TerminalOutput(context.Context, acpsdk.TerminalOutputRequest) (acpsdk.TerminalOutputResponse, error) {
	return acpsdk.TerminalOutputResponse{}, acpsdk.NewMethodNotFound(acpsdk.ClientMethodTerminalOutput)
}

func (c *sdkClient) ReleaseTerminal(context.Context, acpsdk.ReleaseTerminalRequest) (acpsdk.ReleaseTerminalResponse, error) {
	return acpsdk.ReleaseTerminalResponse{}, acpsdk.NewMethodNotFound(acpsdk.ClientMethodTerminalRelease)
}

func (c *sdkClient) WaitForTerminalExit(context.Context, acpsdk.WaitForTerminalExitRequest) (acpsdk.WaitForTerminalExitResponse, error) {
	return acpsdk.WaitForTerminalExitResponse{}, acpsdk.NewMethodNotFound(acpsdk.ClientMethodTerminalWaitForExit)
}

// waitChunk returns the next chunk the client received, failing after 10 s.
func (c *sdkClient) waitChunk(t *testing.T) string {
	t.Helper()
	select {
	case s := <-c.notify:
		return s
	case <-time.After(10 * time.Second):
		t.Fatal("no agent_message_chunk within 10s")
		return ""
	}
}

// serveACP starts `agentwire serve acp` and connects acp-go-sdk's client to
// its stdin and stdout. The cleanup closes stdin and insists that the
// agent exits 0 at EOF.
func serveACP(t *testing.T, c *sdkClient) *acpsdk.ClientSideConnection {
	t.Helper()
	cmd := exec.Command(needAgentwire(t), "serve", "acp")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	conn := acpsdk.NewClientSideConnection(c, stdin, stdout)
	conn.SetLogger(quiet)
	t.Cleanup(func() {
		stdin.Close()
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("serve acp exited with %v at EOF; stderr:\n%s", err, stderr.String())
			}
		case <-time.After(15 * time.Second):
			cmd.Process.Kill()
			<-done
			t.Errorf("serve acp still running 15s after EOF; stderr:\n%s", stderr.String())
		}
		<-conn.Done()
	})
	return conn
}

// acp-go-sdk's client drives agentwire's agent: initialize, session/new
// with the agent's modes, a streamed prompt whose chunks arrive in order,
// a mode change answered while a prompt runs (and seen by the rest of
// that turn), session/cancel answered "cancelled", and permission
// requests answered by the SDK client.
func TestACPGoSDKClientAgainstAgentwireAgent(t *testing.T) {
	c := newSDKClient()
	conn := serveACP(t, c)
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()

	init, err := conn.Initialize(ctx, acpsdk.InitializeRequest{ProtocolVersion: acpsdk.ProtocolVersionNumber})
	if err != nil {
		t.Fatal(err)
	}
	if init.ProtocolVersion != acpsdk.ProtocolVersionNumber || init.AgentInfo == nil || init.AgentInfo.Name != "agentwire-acp-example" {
		t.Fatalf("initialize: %+v", init)
	}
	sess, err := conn.NewSession(ctx, acpsdk.NewSessionRequest{Cwd: t.TempDir(), McpServers: []acpsdk.McpServer{}})
	if err != nil {
		t.Fatal(err)
	}
	if sess.Modes == nil || sess.Modes.CurrentModeId != "ask" || len(sess.Modes.AvailableModes) != 2 {
		t.Fatalf("session/new modes: %+v", sess.Modes)
	}
	prompt := func(ctx context.Context, text string) (acpsdk.PromptResponse, error) {
		return conn.Prompt(ctx, acpsdk.PromptRequest{SessionId: sess.SessionId, Prompt: []acpsdk.ContentBlock{acpsdk.TextBlock(text)}})
	}

	t.Run("chunks arrive in order before the prompt returns", func(t *testing.T) {
		c.reset()
		res, err := prompt(ctx, "slow 5")
		if err != nil || res.StopReason != acpsdk.StopReasonEndTurn {
			t.Fatalf("slow 5: %+v, %v", res, err)
		}
		var want []string
		for i := 1; i <= 5; i++ {
			want = append(want, fmt.Sprintf("chunk %d of 5 (mode ask)\n", i))
		}
		if got := c.text(); strings.Join(got, "") != strings.Join(want, "") {
			t.Fatalf("chunks %q, want %q", got, want)
		}
	})

	t.Run("set_mode is answered during a prompt, and the turn sees the new mode", func(t *testing.T) {
		c.reset()
		type result struct {
			res acpsdk.PromptResponse
			err error
		}
		done := make(chan result, 1)
		go func() {
			res, err := prompt(ctx, "slow 20")
			done <- result{res, err}
		}()
		c.waitChunk(t)
		started := time.Now()
		if _, err := conn.SetSessionMode(ctx, acpsdk.SetSessionModeRequest{SessionId: sess.SessionId, ModeId: "code"}); err != nil {
			t.Fatal(err)
		}
		elapsed := time.Since(started)
		select {
		case r := <-done:
			t.Fatalf("the prompt ended (%+v, %v) before set_mode was answered: set_mode waited behind it", r.res, r.err)
		default:
		}
		if elapsed > time.Second {
			t.Errorf("set_mode took %v during a prompt", elapsed)
		}
		r := <-done
		if r.err != nil || r.res.StopReason != acpsdk.StopReasonEndTurn {
			t.Fatalf("slow 20: %+v, %v", r.res, r.err)
		}
		got := c.text()
		if len(got) != 20 || !strings.Contains(got[19], "chunk 20 of 20 (mode code)") {
			t.Fatalf("chunks %q", got)
		}
	})

	t.Run("session/cancel ends the turn with cancelled", func(t *testing.T) {
		c.reset()
		done := make(chan acpsdk.PromptResponse, 1)
		errs := make(chan error, 1)
		go func() {
			res, err := prompt(ctx, "slow 200")
			done <- res
			errs <- err
		}()
		c.waitChunk(t)
		if err := conn.Cancel(ctx, acpsdk.CancelNotification{SessionId: sess.SessionId}); err != nil {
			t.Fatal(err)
		}
		select {
		case res := <-done:
			if err := <-errs; err != nil || res.StopReason != acpsdk.StopReasonCancelled {
				t.Fatalf("cancelled prompt: %+v, %v", res, err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("the prompt did not end within 5s of session/cancel")
		}
		if n := len(c.text()); n >= 200 {
			t.Errorf("all %d chunks arrived despite the cancel", n)
		}
	})

	for _, choice := range []string{"allow", "reject"} {
		t.Run("the client's permission answer "+choice+" reaches the agent", func(t *testing.T) {
			c.reset()
			c.mu.Lock()
			c.asked = 0
			c.choose = func(p acpsdk.RequestPermissionRequest) acpsdk.RequestPermissionOutcome {
				for _, o := range p.Options {
					if string(o.OptionId) == choice {
						return acpsdk.NewRequestPermissionOutcomeSelected(o.OptionId)
					}
				}
				return acpsdk.NewRequestPermissionOutcomeCancelled()
			}
			c.mu.Unlock()
			res, err := prompt(ctx, "permission")
			if err != nil || res.StopReason != acpsdk.StopReasonEndTurn {
				t.Fatalf("permission: %+v, %v", res, err)
			}
			c.mu.Lock()
			asked := c.asked
			c.mu.Unlock()
			if got := strings.Join(c.text(), ""); asked != 1 || got != "permission: "+choice {
				t.Fatalf("asked %d times, reply %q", asked, got)
			}
		})
	}
}

// sdkAgentConn connects agentwire's client (acpclient.New over in-memory
// pipes) to an sdkAgent on acp-go-sdk's AgentSideConnection. The client
// serves files from root (the default, confined file system), runs
// terminals, and hands every update to updates.
func sdkAgentConn(t *testing.T, root string, updates acpclient.UpdateHandler) (*acpclient.Conn, *acpclient.Session, *sdkAgent) {
	t.Helper()
	toAgentR, toAgentW := io.Pipe()
	toClientR, toClientW := io.Pipe()
	ag := &sdkAgent{}
	asc := acpsdk.NewAgentSideConnection(ag, toClientW, toAgentR)
	asc.SetLogger(quiet)
	ag.conn = asc
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	conn, err := acpclient.New(ctx, toClientR, toAgentW, &acpclient.Options{
		Terminals: &acpclient.TerminalOptions{KillGrace: 300 * time.Millisecond},
		Updates:   updates,
		Logger:    quiet,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		conn.Close()
		toAgentW.Close()
		toClientR.Close()
		select {
		case <-asc.Done():
		case <-time.After(10 * time.Second):
			t.Error("acp-go-sdk's agent connection still open 10s after the client closed")
		}
		toClientW.Close()
		toAgentR.Close()
	})
	sess, err := conn.NewSession(ctx, acpclient.SessionConfig{Cwd: root})
	if err != nil {
		t.Fatal(err)
	}
	return conn, sess, ag
}

// agentwire's client drives an agent built on acp-go-sdk: 1000 chunks
// arrive in order, all before Prompt returns; the agent's permission
// request is answered with its reject option under the default policy; a
// read inside the session's root works and one outside is refused; its
// terminal calls run real commands on agentwire's terminal runtime; and a
// cancelled turn comes back "cancelled".
func TestAgentwireClientAgainstACPGoSDKAgent(t *testing.T) {
	root, outside := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(root, "inside.txt"), []byte("inside\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	secret := filepath.Join(outside, "secret.txt")
	if err := os.WriteFile(secret, []byte("SECRET\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var chunks []string
	started := make(chan struct{}, 1)
	updates := acpclient.UpdateFunc(func(_ context.Context, u *acpclient.Update) error {
		if u.Kind == "agent_message_chunk" {
			mu.Lock()
			chunks = append(chunks, u.Text())
			mu.Unlock()
			select {
			case started <- struct{}{}:
			default:
			}
		}
		return nil
	})
	take := func() []string {
		mu.Lock()
		defer mu.Unlock()
		c := chunks
		chunks = nil
		return c
	}
	conn, sess, ag := sdkAgentConn(t, root, updates)
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	if info := conn.AgentInfo(); info.Name != "acp-go-sdk-agent" {
		t.Fatalf("agentInfo %+v", info)
	}
	if caps := ag.clientCapabilities(); !caps.Fs.ReadTextFile || !caps.Fs.WriteTextFile || !caps.Terminal {
		t.Fatalf("the client declared %+v", caps)
	}
	ask := func(t *testing.T, prompt string) map[string]any {
		t.Helper()
		take()
		stop, err := sess.Prompt(ctx, acp.TextBlock(prompt))
		if err != nil || stop != acp.EndTurn {
			t.Fatalf("%q: stop %q, %v", prompt, stop, err)
		}
		reply := strings.Join(take(), "")
		t.Logf("%s -> %s", prompt, reply)
		var m map[string]any
		if err := json.Unmarshal([]byte(reply), &m); err != nil {
			t.Fatalf("%q: reply %q: %v", prompt, reply, err)
		}
		return m
	}

	t.Run("1000 chunks arrive in order before Prompt returns", func(t *testing.T) {
		take()
		stop, err := sess.Prompt(ctx, acp.TextBlock("chunks 1000"))
		if err != nil || stop != acp.EndTurn {
			t.Fatalf("stop %q, %v", stop, err)
		}
		got := take()
		if len(got) != 1000 {
			t.Fatalf("%d chunks, want 1000", len(got))
		}
		for i, c := range got {
			if c != fmt.Sprintf("%d\n", i+1) {
				t.Fatalf("chunk %d is %q: out of order", i+1, c)
			}
		}
	})

	t.Run("the default policy answers the reject option", func(t *testing.T) {
		if m := ask(t, "permission"); m["outcome"] != "reject" {
			t.Fatalf("reply %v", m)
		}
	})

	t.Run("a read inside the root works", func(t *testing.T) {
		if m := ask(t, "read "+filepath.Join(root, "inside.txt")); m["content"] != "inside\n" {
			t.Fatalf("reply %v", m)
		}
	})

	for _, tc := range []struct{ name, prompt string }{
		{"a read outside the root", "read " + secret},
		{"a read through dot-dot", "read " + filepath.Join(root, "..", filepath.Base(outside), "secret.txt")},
		{"a write outside the root", "write " + filepath.Join(outside, "planted.txt") + " x"},
	} {
		t.Run("refused: "+tc.name, func(t *testing.T) {
			m := ask(t, tc.prompt)
			b, _ := json.Marshal(m)
			if e, ok := m["error"].(map[string]any); !ok || e["code"] == nil {
				t.Fatalf("reply %s: not refused with a JSON-RPC error", b)
			}
			if strings.Contains(string(b), "SECRET") {
				t.Fatalf("the outside file leaked: %s", b)
			}
			if _, err := os.Stat(filepath.Join(outside, "planted.txt")); err == nil {
				t.Fatal("a file was written outside the root")
			}
		})
	}

	t.Run("its terminal runs a real command", func(t *testing.T) {
		m := ask(t, "run echo hi")
		if m["output"] != "hi\n" || m["exitCode"] != float64(0) || m["signal"] != nil {
			t.Fatalf("reply %v", m)
		}
		if id, _ := m["terminalId"].(string); id == "" {
			t.Fatalf("reply %v: no terminalId", m)
		} else if _, live := conn.Terminal(id); live {
			t.Errorf("terminal %s still known after terminal/release", id)
		}
	})

	t.Run("its terminal/kill ends the command with a signal", func(t *testing.T) {
		m := ask(t, "kill sleep 600")
		if m["exitCode"] != nil || m["signal"] == nil {
			t.Fatalf("reply %v", m)
		}
	})

	t.Run("it connects to an MCP server the client offers over ACP, by acpId", func(t *testing.T) {
		srv := server.New(mcp.Implementation{Name: "tools", Version: "1"}, &server.Options{Logger: quiet})
		s2, err := conn.NewSession(ctx, acpclient.SessionConfig{Cwd: root, ProvideMCP: []acpclient.ProvidedMCP{{Name: "tools", Server: srv}}})
		if err != nil {
			t.Fatal(err)
		}
		defer s2.Close(ctx)
		take()
		if stop, err := s2.Prompt(ctx, acp.TextBlock("mcp-connect")); err != nil || stop != acp.EndTurn {
			t.Fatalf("stop %q, %v", stop, err)
		}
		var m map[string]any
		reply := strings.Join(take(), "")
		if err := json.Unmarshal([]byte(reply), &m); err != nil || m["connected"] == nil || !strings.HasPrefix(m["server"].(string), "agentwire-mcp-") {
			t.Fatalf("reply %q (%v)", reply, err)
		}
		if st := conn.Stats().MCP; st.Connections < 1 {
			t.Fatalf("MCP stats %+v", st)
		}
	})
	t.Run("a cancelled turn comes back cancelled", func(t *testing.T) {
		take()
		for len(started) > 0 {
			<-started
		}
		done := make(chan error, 1)
		var stop acp.StopReason
		go func() {
			var err error
			stop, err = sess.Prompt(ctx, acp.TextBlock("wait"))
			done <- err
		}()
		// The SDK registers the turn before its handler says "waiting": a
		// cancel sent after that chunk reaches a turn it can cancel.
		select {
		case <-started:
		case <-time.After(10 * time.Second):
			t.Fatal("no chunk within 10s")
		}
		if err := sess.Cancel(ctx); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-done:
			if err != nil || stop != acp.Cancelled {
				t.Fatalf("stop %q, %v", stop, err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("the prompt did not end within 10s of session/cancel")
		}
	})
}

// acp-go-sdk's example agent (its example/agent program, built here from
// the module) answers `agentwire acp --prompt hi`: its disclaimer, the
// turn's text, and, since the default policy refuses its permission
// request, the "skip" branch.
func TestACPGoSDKExampleAgent(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "agent")
	build := exec.Command("go", "build", "-o", bin, "github.com/coder/acp-go-sdk/example/agent")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build the example agent: %v\n%s", err, out)
	}
	cmd := exec.Command(needAgentwire(t), "acp", "--prompt", "hi", "--report", "--cwd", t.TempDir(), "--", bin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("agentwire acp: %v; stdout %q, stderr:\n%s", err, stdout.String(), stderr.String())
		}
	case <-time.After(60 * time.Second):
		cmd.Process.Kill()
		<-done
		t.Fatalf("agentwire acp did not finish within 60s; stderr:\n%s", stderr.String())
	}
	want := "ACP Go Example Agent — demo only (no AI model)." +
		"I'll help you with that. Let me start by reading some files to understand the current situation." +
		" Now I understand the project structure. I need to make some changes to improve it." +
		" I understand you prefer not to make that change. I'll skip the configuration update.\n"
	if stdout.String() != want {
		t.Fatalf("stdout %q, want %q; stderr:\n%s", stdout.String(), want, stderr.String())
	}
	if !strings.Contains(stderr.String(), `"stop_reason":"end_turn"`) {
		t.Errorf("the report has no end_turn:\n%s", stderr.String())
	}
}
