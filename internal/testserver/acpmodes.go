package testserver

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sync/atomic"
	"time"

	"github.com/agentwire/agentwire/acp"
	"github.com/agentwire/agentwire/internal/acpdemo"
	"github.com/agentwire/agentwire/jsonrpc"
	"github.com/agentwire/agentwire/rpc"
	"github.com/agentwire/agentwire/stdio"
)

// The ACP agents `agentwire acp` and `agentwire check --acp` are tested
// against: the example agent (agentwire serve acp) with one misbehaviour.
//
//	acp-pollutes               writes "agent starting (debug build)" on stdout
//	                           before it serves
//	acp-error-on-cancel        answers a cancelled prompt with -32603 instead
//	                           of stopReason "cancelled"
//	acp-updates-after-response sends one more agent_message_chunk ("late")
//	                           20 ms after each prompt's response
//	acp-ignores-eof            keeps running after stdin EOF (SIGTERM ends it)
//	acp-auth-required          offers the auth methods AuthMethodIDs and
//	                           answers session/new with -32000 "Authentication
//	                           required" until authenticate("agent-login")

// AuthMethodIDs are the auth methods acp-auth-required offers: its own
// ("agent-login", which authenticate accepts) and one of a type the client
// does not know ("api-key", type "env_var").
var AuthMethodIDs = []string{"agent-login", "api-key"}

// PollutionLine is what acp-pollutes writes on stdout.
const PollutionLine = "agent starting (debug build)"

func serveACPMode(mode string) (int, bool) {
	switch mode {
	case "acp-pollutes", "acp-error-on-cancel", "acp-updates-after-response", "acp-ignores-eof", "acp-auth-required":
	default:
		return 0, false
	}
	inner, o := acp.ConnOptions(acpdemo.New(), &acp.Options{ShutdownGrace: time.Second}, nil)
	h := inner
	switch mode {
	case "acp-pollutes":
		fmt.Println(PollutionLine) // before the stdout guard is installed
	case "acp-error-on-cancel":
		h = rpc.HandlerFunc(func(ctx context.Context, r *rpc.Request) (any, error) {
			res, err := inner.Handle(ctx, r)
			if r.Method == acp.MethodPrompt && err == nil && stopReason(res) == acp.Cancelled {
				return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "Internal error: the turn was aborted"}
			}
			return res, err
		})
	case "acp-updates-after-response":
		h = rpc.HandlerFunc(func(ctx context.Context, r *rpc.Request) (any, error) {
			res, err := inner.Handle(ctx, r)
			if r.Method == acp.MethodPrompt && err == nil {
				var p struct {
					SessionID string `json:"sessionId"`
				}
				r.UnmarshalParams(&p)
				conn := r.Conn()
				time.AfterFunc(20*time.Millisecond, func() {
					conn.Notify(context.Background(), acp.MethodUpdate, map[string]any{"sessionId": p.SessionID,
						"update": map[string]any{"sessionUpdate": acp.UpdateAgentMessageChunk, "content": acp.TextBlock("late")}})
				})
			}
			return res, err
		})
	case "acp-auth-required":
		var authed atomic.Bool
		h = rpc.HandlerFunc(func(ctx context.Context, r *rpc.Request) (any, error) {
			switch r.Method {
			case acp.MethodInitialize:
				res, err := inner.Handle(ctx, r)
				if err != nil {
					return res, err
				}
				var m map[string]json.RawMessage
				b, _ := json.Marshal(res)
				json.Unmarshal(b, &m)
				m["authMethods"] = json.RawMessage(`[{"id":"agent-login","name":"Log in","description":"Sign in with your agent account"},` +
					`{"id":"api-key","name":"API key","type":"env_var","vars":[{"name":"AGENT_API_KEY"}],"description":"Use AGENT_API_KEY"}]`)
				return m, nil
			case acp.MethodAuthenticate:
				var p struct {
					MethodID string `json:"methodId"`
				}
				r.UnmarshalParams(&p)
				if p.MethodID != "agent-login" {
					return nil, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "invalid params: unknown auth method %q", p.MethodID)
				}
				authed.Store(true)
				return map[string]any{}, nil
			case acp.MethodSessionNew, acp.MethodSessionLoad, acp.MethodSessionResume:
				if !authed.Load() {
					return nil, &jsonrpc.Error{Code: acp.CodeBusy, Message: "Authentication required"}
				}
			}
			return inner.Handle(ctx, r)
		})
	}
	conn, err := stdio.Serve(h, o, nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, "testserver:", err)
		return 1, true
	}
	conn.Wait()
	if mode == "acp-ignores-eof" {
		time.Sleep(time.Hour)
	}
	return 0, true
}

// stopReason reads a prompt result's stopReason, whatever Go type the
// runtime answers with.
func stopReason(res any) acp.StopReason {
	b, _ := json.Marshal(res)
	var r struct {
		StopReason acp.StopReason `json:"stopReason"`
	}
	json.Unmarshal(b, &r)
	return r.StopReason
}
