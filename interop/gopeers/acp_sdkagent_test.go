package gopeers_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"

	acpsdk "github.com/coder/acp-go-sdk"
)

// sdkAgent is an ACP agent built on acp-go-sdk's AgentSideConnection, for
// agentwire's client to drive. The prompt's text is a command, and the
// agent answers each one with a single agent_message_chunk holding one
// JSON object (the streaming commands excepted):
//
//	chunks N             N chunks "1\n" .. "N\n", then end_turn
//	permission           session/request_permission (allow / reject)
//	                     -> {"outcome": OPTION or "cancelled"}
//	read PATH            fs/read_text_file  -> {"content"} or {"error"}
//	write PATH TEXT...   fs/write_text_file -> {"written"} or {"error"}
//	run CMD ARGS...      terminal/create, wait_for_exit, output, release
//	kill CMD ARGS...     the same with terminal/kill before the wait
//	wait                 "waiting\n", then blocks until the turn is
//	                     cancelled -> cancelled
type sdkAgent struct {
	conn *acpsdk.AgentSideConnection

	mu         sync.Mutex
	caps       acpsdk.ClientCapabilities
	nextID     int
	acpServers []string // the ids of the MCP servers the client offered over ACP
}

var _ acpsdk.Agent = (*sdkAgent)(nil)

func (a *sdkAgent) Initialize(_ context.Context, p acpsdk.InitializeRequest) (acpsdk.InitializeResponse, error) {
	a.mu.Lock()
	a.caps = p.ClientCapabilities
	a.mu.Unlock()
	return acpsdk.InitializeResponse{
		ProtocolVersion:   acpsdk.ProtocolVersionNumber,
		AgentInfo:         &acpsdk.Implementation{Name: "acp-go-sdk-agent", Version: "0.13.0"},
		AuthMethods:       []acpsdk.AuthMethod{},
		AgentCapabilities: acpsdk.AgentCapabilities{McpCapabilities: acpsdk.McpCapabilities{Acp: true}},
	}, nil
}

func (a *sdkAgent) clientCapabilities() acpsdk.ClientCapabilities {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.caps
}

func (a *sdkAgent) NewSession(_ context.Context, p acpsdk.NewSessionRequest) (acpsdk.NewSessionResponse, error) {
	a.mu.Lock()
	for _, m := range p.McpServers {
		if m.Acp != nil {
			a.acpServers = append(a.acpServers, string(m.Acp.Id))
		}
	}
	a.nextID++
	id := fmt.Sprintf("sdk-%d", a.nextID)
	a.mu.Unlock()
	return acpsdk.NewSessionResponse{SessionId: acpsdk.SessionId(id)}, nil
}

func (a *sdkAgent) Authenticate(context.Context, acpsdk.AuthenticateRequest) (acpsdk.AuthenticateResponse, error) {
	return acpsdk.AuthenticateResponse{}, nil
}

func (a *sdkAgent) Cancel(context.Context, acpsdk.CancelNotification) error { return nil }

func (a *sdkAgent) CloseSession(context.Context, acpsdk.CloseSessionRequest) (acpsdk.CloseSessionResponse, error) {
	return acpsdk.CloseSessionResponse{}, acpsdk.NewMethodNotFound(acpsdk.AgentMethodSessionClose)
}

func (a *sdkAgent) ListSessions(context.Context, acpsdk.ListSessionsRequest) (acpsdk.ListSessionsResponse, error) {
	return acpsdk.ListSessionsResponse{}, acpsdk.NewMethodNotFound(acpsdk.AgentMethodSessionList)
}

func (a *sdkAgent) ResumeSession(context.Context, acpsdk.ResumeSessionRequest) (acpsdk.ResumeSessionResponse, error) {
	return acpsdk.ResumeSessionResponse{}, acpsdk.NewMethodNotFound(acpsdk.AgentMethodSessionResume)
}

func (a *sdkAgent) SetSessionConfigOption(context.Context, acpsdk.SetSessionConfigOptionRequest) (acpsdk.SetSessionConfigOptionResponse, error) {
	return acpsdk.SetSessionConfigOptionResponse{}, acpsdk.NewMethodNotFound(acpsdk.AgentMethodSessionSetConfigOption)
}

func (a *sdkAgent) SetSessionMode(context.Context, acpsdk.SetSessionModeRequest) (acpsdk.SetSessionModeResponse, error) {
	return acpsdk.SetSessionModeResponse{}, nil
}

func (a *sdkAgent) say(ctx context.Context, sid acpsdk.SessionId, text string) error {
	return a.conn.SessionUpdate(ctx, acpsdk.SessionNotification{SessionId: sid, Update: acpsdk.UpdateAgentMessageText(text)})
}

// sdkErr keeps what a test needs from a failed client call: the JSON-RPC
// code and message.
func sdkErr(err error) map[string]any {
	var re *acpsdk.RequestError
	if errors.As(err, &re) {
		return map[string]any{"error": map[string]any{"code": re.Code, "message": re.Message, "data": re.Data}}
	}
	return map[string]any{"error": map[string]any{"message": err.Error()}}
}

func (a *sdkAgent) Prompt(ctx context.Context, p acpsdk.PromptRequest) (acpsdk.PromptResponse, error) {
	var text strings.Builder
	for _, b := range p.Prompt {
		if b.Text != nil {
			text.WriteString(b.Text.Text)
		}
	}
	verb, rest, _ := strings.Cut(strings.TrimSpace(text.String()), " ")
	sid := p.SessionId
	endTurn := acpsdk.PromptResponse{StopReason: acpsdk.StopReasonEndTurn}
	switch verb {
	case "chunks":
		n, err := strconv.Atoi(rest)
		if err != nil {
			return acpsdk.PromptResponse{}, acpsdk.NewInvalidParams(map[string]any{"error": err.Error()})
		}
		for i := 1; i <= n; i++ {
			if err := a.say(ctx, sid, strconv.Itoa(i)+"\n"); err != nil {
				return acpsdk.PromptResponse{}, err
			}
		}
		return endTurn, nil
	case "wait":
		if err := a.say(ctx, sid, "waiting\n"); err != nil {
			return acpsdk.PromptResponse{}, err
		}
		<-ctx.Done()
		return acpsdk.PromptResponse{StopReason: acpsdk.StopReasonCancelled}, nil
	}
	reply := a.answer(ctx, sid, verb, rest)
	b, _ := json.Marshal(reply)
	if err := a.say(ctx, sid, string(b)+"\n"); err != nil {
		return acpsdk.PromptResponse{}, err
	}
	return endTurn, nil
}

func (a *sdkAgent) answer(ctx context.Context, sid acpsdk.SessionId, verb, rest string) map[string]any {
	switch verb {
	case "mcp-connect":
		// acp-go-sdk can connect and disconnect; it has no typed way to send
		// mcp/message.
		a.mu.Lock()
		ids := append([]string(nil), a.acpServers...)
		a.mu.Unlock()
		if len(ids) == 0 {
			return map[string]any{"error": map[string]any{"message": "no MCP server offered over ACP"}}
		}
		r, err := a.conn.UnstableConnectMcp(ctx, acpsdk.UnstableConnectMcpRequest{AcpId: acpsdk.UnstableMcpServerAcpId(ids[len(ids)-1])})
		if err != nil {
			return sdkErr(err)
		}
		if _, err := a.conn.UnstableDisconnectMcp(ctx, acpsdk.UnstableDisconnectMcpRequest{ConnectionId: r.ConnectionId}); err != nil {
			return sdkErr(err)
		}
		return map[string]any{"connected": string(r.ConnectionId), "server": ids[len(ids)-1]}
	case "permission":
		r, err := a.conn.RequestPermission(ctx, acpsdk.RequestPermissionRequest{
			SessionId: sid,
			ToolCall: acpsdk.ToolCallUpdate{
				ToolCallId: "call-1",
				Title:      acpsdk.Ptr("Write a file"),
				Kind:       acpsdk.Ptr(acpsdk.ToolKindEdit),
				Status:     acpsdk.Ptr(acpsdk.ToolCallStatusPending),
			},
			Options: []acpsdk.PermissionOption{
				{Kind: acpsdk.PermissionOptionKindAllowOnce, Name: "Allow", OptionId: "allow"},
				{Kind: acpsdk.PermissionOptionKindRejectOnce, Name: "Reject", OptionId: "reject"},
			},
		})
		switch {
		case err != nil:
			return sdkErr(err)
		case r.Outcome.Selected != nil:
			return map[string]any{"outcome": string(r.Outcome.Selected.OptionId)}
		default:
			return map[string]any{"outcome": "cancelled"}
		}
	case "read":
		r, err := a.conn.ReadTextFile(ctx, acpsdk.ReadTextFileRequest{SessionId: sid, Path: rest})
		if err != nil {
			return sdkErr(err)
		}
		return map[string]any{"content": r.Content}
	case "write":
		path, content, _ := strings.Cut(rest, " ")
		if _, err := a.conn.WriteTextFile(ctx, acpsdk.WriteTextFileRequest{SessionId: sid, Path: path, Content: content}); err != nil {
			return sdkErr(err)
		}
		return map[string]any{"written": path}
	case "run", "kill":
		argv := strings.Fields(rest)
		if len(argv) == 0 {
			return map[string]any{"error": map[string]any{"message": "no command"}}
		}
		limit := 4096
		t, err := a.conn.CreateTerminal(ctx, acpsdk.CreateTerminalRequest{SessionId: sid, Command: argv[0], Args: argv[1:], OutputByteLimit: &limit})
		if err != nil {
			return sdkErr(err)
		}
		// Release even when the turn is cancelled, as an agent must.
		defer a.conn.ReleaseTerminal(context.WithoutCancel(ctx), acpsdk.ReleaseTerminalRequest{SessionId: sid, TerminalId: t.TerminalId})
		if verb == "kill" {
			if _, err := a.conn.KillTerminal(ctx, acpsdk.KillTerminalRequest{SessionId: sid, TerminalId: t.TerminalId}); err != nil {
				return sdkErr(err)
			}
		}
		exit, err := a.conn.WaitForTerminalExit(ctx, acpsdk.WaitForTerminalExitRequest{SessionId: sid, TerminalId: t.TerminalId})
		if err != nil {
			return sdkErr(err)
		}
		out, err := a.conn.TerminalOutput(ctx, acpsdk.TerminalOutputRequest{SessionId: sid, TerminalId: t.TerminalId})
		if err != nil {
			return sdkErr(err)
		}
		return map[string]any{"terminalId": t.TerminalId, "exitCode": exit.ExitCode, "signal": exit.Signal, "output": out.Output, "truncated": out.Truncated}
	}
	return map[string]any{"error": map[string]any{"message": "unknown command " + strconv.Quote(verb)}}
}
