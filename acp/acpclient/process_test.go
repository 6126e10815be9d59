package acpclient_test

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/agentwire/agentwire/acp"
	"github.com/agentwire/agentwire/acp/acpclient"
	"github.com/agentwire/agentwire/client"
	"github.com/agentwire/agentwire/internal/wiretest"
	"github.com/agentwire/agentwire/process"
)

func agentCommand(mode string) process.Command {
	return process.Command{Path: os.Args[0], Env: append(os.Environ(), agentEnv+"="+mode, "GORACE=atexit_sleep_ms=0")}
}

func start(t *testing.T, mode string, opts *acpclient.Options) *acpclient.Conn {
	t.Helper()
	if opts == nil {
		opts = &acpclient.Options{}
	}
	opts.Logger = wiretest.Quiet
	c, err := acpclient.Start(t.Context(), agentCommand(mode), opts)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func TestAStrayLineOnTheAgentsStdoutIsCountedNotFatal(t *testing.T) {
	c := start(t, "polluted", nil)
	s, err := c.NewSession(t.Context(), acpclient.SessionConfig{Cwd: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if r, err := s.Prompt(t.Context(), acp.TextBlock("hi")); err != nil || r != acp.EndTurn {
		t.Fatalf("Prompt = %q, %v", r, err)
	}
	if v := c.Stats().Transport.Violations; v != 1 {
		t.Fatalf("violations %d", v)
	}
}

func TestAnAgentThatCrashesMidPromptFailsItWithTheExitStatusAndStderr(t *testing.T) {
	k := &collector{}
	c := start(t, "crashy", &acpclient.Options{Updates: k})
	s, err := c.NewSession(t.Context(), acpclient.SessionConfig{Cwd: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.Prompt(t.Context(), acp.TextBlock("crash"))
	var lost *client.ConnectionLostError
	if !errors.As(err, &lost) || !errors.Is(err, client.ErrConnectionLost) {
		t.Fatalf("Prompt: %v", err)
	}
	if lost.Exit == nil || lost.Exit.ExitCode != 3 || !strings.Contains(lost.Exit.StderrTail, "model backend went away") {
		t.Fatalf("lost: %+v", lost.Exit)
	}
	if _, err := s.Prompt(t.Context(), acp.TextBlock("again")); err == nil {
		t.Fatal("a prompt on a dead agent succeeded")
	}
}

func TestARestartedAgentHasLostEverySession(t *testing.T) {
	restarted := make(chan struct{}, 1)
	c := start(t, "crashy", &acpclient.Options{Transport: &client.Options{
		Restart:   &client.RestartPolicy{MaxRestarts: 1, Backoff: time.Millisecond},
		OnRestart: func(int, error) { restarted <- struct{}{} },
	}})
	s, err := c.NewSession(t.Context(), acpclient.SessionConfig{Cwd: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	s.Prompt(t.Context(), acp.TextBlock("crash"))
	<-restarted
	if !errors.Is(s.Err(), acpclient.ErrSessionLost) {
		t.Fatalf("session after restart: %v", s.Err())
	}
	if _, err := s.Prompt(t.Context(), acp.TextBlock("hi")); !errors.Is(err, acpclient.ErrSessionLost) {
		t.Fatalf("Prompt on a lost session: %v", err)
	}
	// The new process was initialized again and serves new sessions.
	s2, err := c.NewSession(t.Context(), acpclient.SessionConfig{Cwd: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if r, err := s2.Prompt(t.Context(), acp.TextBlock("hi")); err != nil || r != acp.EndTurn {
		t.Fatalf("Prompt = %q, %v", r, err)
	}
}

func TestCancellingStartsContextAfterwardsStopsNothing(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	c, err := acpclient.Start(ctx, agentCommand("plain"), &acpclient.Options{Logger: wiretest.Quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	cancel()
	s, err := c.NewSession(t.Context(), acpclient.SessionConfig{Cwd: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if r, err := s.Prompt(t.Context(), acp.TextBlock("hi")); err != nil || r != acp.EndTurn {
		t.Fatalf("Prompt = %q, %v", r, err)
	}
}

func TestCloseEndsAnAgentThatExitsAtEndOfInputPolitely(t *testing.T) {
	c, err := acpclient.Start(t.Context(), agentCommand("plain"), &acpclient.Options{Logger: wiretest.Quiet})
	if err != nil {
		t.Fatal(err)
	}
	if res := c.Close(); res.Outcome != process.Exited {
		t.Fatalf("Close: %+v", res)
	}
}

func restartOnce() *client.Options {
	return &client.Options{Restart: &client.RestartPolicy{MaxRestarts: 1, Backoff: time.Millisecond}}
}

func textBlock(s string) acp.ContentBlock { return acp.TextBlock(s) }

func contains(s, sub string) bool { return strings.Contains(s, sub) }
