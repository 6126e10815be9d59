package server

// Regression tests for defects a review found in the server surface and
// the client features. Each names the bug it pins; a failure is the bug.

import (
	"bufio"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"github.com/agentwire/agentwire/mcp"
	"io"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/agentwire/agentwire/client"
	"github.com/agentwire/agentwire/internal/wiretest"
	"github.com/agentwire/agentwire/rpc"
)

const r7Meta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"t","version":"1"},"io.modelcontextprotocol/clientCapabilities":{}}`

func r7Modern(id, method, params string) string {
	p := "{" + r7Meta
	if params != "" {
		p += "," + params
	}
	return `{"jsonrpc":"2.0","id":` + id + `,"method":"` + method + `","params":` + p + `}}`
}

const r7Init = `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"elicitation":{}},"clientInfo":{"name":"c","version":"1"}}}`

func r7Server(opts *Options) *Server {
	return New(mcp.Implementation{Name: "test-server", Version: "0.1"}, opts)
}

func r7One(t *testing.T, got []string) string {
	t.Helper()
	if len(got) != 1 {
		t.Fatalf("want one line, got %q", got)
	}
	return got[0]
}

// 1. A legacy client's prompts/get (resources/read, completion/complete)
// before initialize runs the handler, with its side effects, and only then
// is refused: feature() is called before the readiness check.
func TestRegressionSurfaceLegacyFeatureRunsBeforeInitialize(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := r7Server(nil)
		var runs atomic.Int32
		s.AddPrompt(mcp.Prompt{Name: "p"}, func(context.Context, *PromptRequest) (*mcp.PromptResult, error) {
			runs.Add(1)
			return &mcp.PromptResult{}, nil
		})
		w := wiretest.Start(t, s.Handler(), s.ConnOptions(nil), true)
		defer w.Finish()
		got := r7One(t, w.Exchange(`{"jsonrpc":"2.0","id":1,"method":"prompts/get","params":{"name":"p"}}`))
		if c := wiretest.ErrCode(t, got); c != mcp.CodeServerNotInitialized {
			t.Errorf("reply %s", got)
		}
		if n := runs.Load(); n != 0 {
			t.Errorf("the prompt handler ran %d time(s) before initialize (it was then refused)", n)
		}
	})
}

// 3. A StateKey that is set but empty ([]byte(os.Getenv(...)) with the
// variable unset) is used as the HMAC key: anyone can sign a requestState.
func TestRegressionSurfaceEmptyStateKeyLetsClientsForgeState(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := r7Server(&Options{StateKey: []byte("")})
		s.AddTool(mcp.Tool{Name: "st"}, func(ctx context.Context, r *ToolRequest) (*mcp.ToolResult, error) {
			return mcp.TextResult("state=" + string(r.State())), nil
		})
		payload := append(make([]byte, 8), "role=admin"...)
		m := hmac.New(sha256.New, nil)
		m.Write([]byte("tools/call:st\x00"))
		m.Write(payload)
		enc := base64.RawURLEncoding
		forged := enc.EncodeToString(payload) + "." + enc.EncodeToString(m.Sum(nil))
		w := wiretest.Start(t, s.Handler(), s.ConnOptions(nil), true)
		defer w.Finish()
		got := r7One(t, w.Exchange(r7Modern("1", "tools/call", `"name":"st","requestState":"`+forged+`"`)))
		if strings.Contains(got, "state=role=admin") {
			t.Errorf("a client-forged requestState was accepted: %s", got)
		}
	})
}

// 4. requestState is bound to the tool name only: state issued in a call
// with one set of arguments is accepted, as "this call's" state, in a call
// with other arguments (and from any client, at any later time).
func TestRegressionSurfaceRequestStateReplayedWithOtherArguments(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := r7Server(nil)
		s.AddTool(mcp.Tool{Name: "pay"}, func(ctx context.Context, r *ToolRequest) (*mcp.ToolResult, error) {
			var in struct{ Amount int }
			json.Unmarshal(r.Arguments, &in)
			if string(r.State()) == "confirmed" {
				return mcp.TextResult(fmt.Sprintf("paid %d", in.Amount)), nil
			}
			res, err := r.Elicit(ctx, "ok", fmt.Sprintf("Pay %d?", in.Amount), map[string]any{"type": "object"})
			if err != nil {
				return nil, err
			}
			if res.Action != "accept" {
				return mcp.ErrorResult("declined"), nil
			}
			r.SetState([]byte("confirmed")) // confirmed: one more round for a code
			if _, err := r.Ask(ctx, map[string]mcp.InputRequest{"otp": {Method: mcp.MethodElicit, Params: map[string]any{"message": "code?", "requestedSchema": map[string]any{"type": "object"}}}}); err != nil {
				return nil, err
			}
			return mcp.TextResult(fmt.Sprintf("paid %d", in.Amount)), nil
		})
		w := wiretest.Start(t, s.Handler(), s.ConnOptions(nil), true)
		defer w.Finish()
		got := r7One(t, w.Exchange(r7Modern("1", "tools/call", `"name":"pay","arguments":{"amount":1},"inputResponses":{"ok":{"action":"accept"}}`)))
		var r struct {
			Result struct {
				RequestState string `json:"requestState"`
			} `json:"result"`
		}
		if json.Unmarshal([]byte(got), &r) != nil || r.Result.RequestState == "" {
			t.Fatalf("no state: %s", got)
		}
		got = r7One(t, w.Exchange(r7Modern("2", "tools/call", `"name":"pay","arguments":{"amount":1000000},"requestState":"`+r.Result.RequestState+`"`)))
		if strings.Contains(got, "paid 1000000") {
			t.Errorf("state confirmed for amount 1 was accepted for amount 1000000: %s", got)
		}
	})
}

// 5. RequireClientCapability never sees a legacy client's capabilities
// (initialize's are not kept): it fails with -32021, a 2026-07-28 code,
// for a legacy client that declared the capability.
func TestRegressionSurfaceRequireClientCapabilityLegacy(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := r7Server(nil)
		s.AddTool(mcp.Tool{Name: "needs"}, func(ctx context.Context, r *ToolRequest) (*mcp.ToolResult, error) {
			if err := r.RequireClientCapability("elicitation"); err != nil {
				return nil, err
			}
			return mcp.TextResult("ok"), nil
		})
		w := wiretest.Start(t, s.Handler(), s.ConnOptions(nil), true)
		defer w.Finish()
		w.Exchange(r7Init, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
		got := r7One(t, w.Exchange(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"needs"}}`))
		if c := wiretest.ErrCode(t, got); c != 0 {
			t.Errorf("legacy client declared elicitation in initialize, got %s", got)
		}
	})
}

// 6. A roots/list input request without params (ListRootsRequest's
// params are optional) is sent as "params":null in inputRequests, which
// the 2026-07-28 schema does not allow (params must be an object).
func TestRegressionSurfaceListRootsInputRequestNullParams(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := r7Server(nil)
		s.AddTool(mcp.Tool{Name: "roots"}, func(ctx context.Context, r *ToolRequest) (*mcp.ToolResult, error) {
			if _, err := r.Ask(ctx, map[string]mcp.InputRequest{"r": {Method: mcp.MethodListRoots}}); err != nil {
				return nil, err
			}
			return mcp.TextResult("ok"), nil
		})
		w := wiretest.Start(t, s.Handler(), s.ConnOptions(nil), true)
		defer w.Finish()
		got := r7One(t, w.Exchange(r7Modern("1", "tools/call", `"name":"roots"`)))
		if strings.Contains(got, `"params":null`) {
			t.Errorf("inputRequests carries params null: %s", got)
		}
	})
}

// 9. Every resources/subscribe starts a goroutine that lives as long as
// the connection (unsubscribe does not end it), and the server-wide
// resourceSubs map keeps a key for every URI ever subscribed, after the
// connection is gone: both grow without bound from client input.
func TestRegressionSurfaceSubscribeLeaks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := r7Server(nil)
		s.AddResource(mcp.Resource{URI: "test://a", Name: "a"}, func(context.Context, *ReadRequest) ([]mcp.ResourceContents, error) {
			return []mcp.ResourceContents{{URI: "test://a", Text: "a"}}, nil
		})
		w := wiretest.Start(t, s.Handler(), s.ConnOptions(nil), true)
		w.Exchange(r7Init, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
		before := runtime.NumGoroutine()
		for i := range 200 {
			w.Send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"resources/subscribe","params":{"uri":"test://a"}}`, 2*i+1),
				fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"resources/unsubscribe","params":{"uri":"test://a"}}`, 2*i+2))
		}
		for i := range 200 {
			w.Send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"resources/unsubscribe","params":{"uri":"test://junk/%d"}}`, 1000+i, i))
		}
		w.Take()
		grown := runtime.NumGoroutine() - before
		w.Finish()
		synctest.Wait()
		st := s.LegacyStats()
		if grown >= 100 {
			t.Errorf("200 subscribe/unsubscribe pairs left %d goroutines running", grown)
		}
		if st.Connections != 0 || st.Subscriptions != 0 {
			t.Errorf("after the connection ended, the server still holds %d connections and %d subscriptions", st.Connections, st.Subscriptions)
		}
	})
}

// 10. ResourceUpdated notifies subscribers one by one with a blocking
// Notify: one subscriber that does not read its output stalls the caller
// and every other subscriber.
func TestRegressionSurfaceResourceUpdatedStalledBySlowSubscriber(t *testing.T) {
	s := r7Server(nil)
	s.AddResource(mcp.Resource{URI: "test://a", Name: "a"}, func(context.Context, *ReadRequest) ([]mcp.ResourceContents, error) {
		return []mcp.ResourceContents{{URI: "test://a", Text: "a"}}, nil
	})
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	conn := rpc.New(inR, outW, s.Handler(), s.ConnOptions(&rpc.Options{Logger: wiretest.Quiet}))
	br := bufio.NewReader(outR)
	io.WriteString(inW, r7Init+"\n")
	br.ReadString('\n')
	io.WriteString(inW, `{"jsonrpc":"2.0","id":1,"method":"resources/subscribe","params":{"uri":"test://a"}}`+"\n")
	br.ReadString('\n')
	// From now on this client reads nothing.
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range 30000 {
			s.ResourceUpdated("test://a")
		}
	}()
	select {
	case <-done:
	case <-time.After(30 * time.Second): // blocked means forever; the bound only keeps a failure short
		t.Errorf("ResourceUpdated is blocked by a subscriber that does not read")
	}
	conn.Close()
	inW.Close()
	outR.Close()
	<-done
	conn.Wait()
}

// 14. A template with an unsupported expression before the last variable
// is accepted (only the text after the last {var} is checked) and the
// expression becomes literal text that no URI matches.
func TestRegressionSurfaceTemplateUnsupportedExpressionAccepted(t *testing.T) {
	if err := r7Server(nil).AddResourceTemplate(mcp.ResourceTemplate{URITemplate: "db://{?table}/{id}", Name: "x"}, nil); err == nil {
		t.Errorf("db://{?table}/{id} accepted; db://{id}{?table} is refused")
	}
}

// 15. An invalid io.modelcontextprotocol/logLevel is ignored (no logs)
// rather than rejected with -32602 ("Invalid level → SHOULD reject").
func TestRegressionSurfaceInvalidLogLevelNotRejected(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := r7Server(nil)
		s.AddTool(mcp.Tool{Name: "t"}, func(context.Context, *ToolRequest) (*mcp.ToolResult, error) { return mcp.TextResult("ok"), nil })
		w := wiretest.Start(t, s.Handler(), s.ConnOptions(nil), true)
		defer w.Finish()
		req := strings.Replace(r7Modern("1", "tools/call", `"name":"t"`), `"io.modelcontextprotocol/clientCapabilities":{}`, `"io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/logLevel":"verbose"`, 1)
		if got := r7One(t, w.Exchange(req)); wiretest.ErrCode(t, got) != -32602 {
			t.Errorf("logLevel verbose: %s", got)
		}
	})
}

var _ = client.Retryable
