package mcp

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
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
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

func r7Server(opts *ServerOptions) *Server {
	return NewServer(Implementation{Name: "test-server", Version: "0.1"}, opts)
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
		s.AddPrompt(Prompt{Name: "p"}, func(context.Context, *PromptRequest) (*PromptResult, error) {
			runs.Add(1)
			return &PromptResult{}, nil
		})
		w := wiretest.Start(t, s.Handler(), s.ConnOptions(nil), true)
		defer w.Finish()
		got := r7One(t, w.Exchange(`{"jsonrpc":"2.0","id":1,"method":"prompts/get","params":{"name":"p"}}`))
		if c := wiretest.ErrCode(t, got); c != codeServerNotInitialized {
			t.Errorf("reply %s", got)
		}
		if n := runs.Load(); n != 0 {
			t.Errorf("the prompt handler ran %d time(s) before initialize (it was then refused)", n)
		}
	})
}

// 2. A legacy client's answer to the server's own request is routed by a
// sequential, process-wide id ("srv-1", "srv-2", ...) and nothing else:
// any other HTTP client can guess it and answer for the client that was
// asked.
func TestRegressionSurfaceSrvIDAnsweredByAnotherClient(t *testing.T) {
	s := r7Server(nil)
	s.AddTool(Tool{Name: "greet"}, func(ctx context.Context, r *ToolRequest) (*ToolResult, error) {
		res, err := r.Elicit(ctx, "who", "Your name?", map[string]any{"type": "object"})
		if err != nil {
			return nil, err
		}
		return TextResult(fmt.Sprint("hello ", res.Content["name"])), nil
	})
	h := s.HTTPHandler(nil)
	srv := httptest.NewServer(h)
	defer func() { h.Shutdown(context.Background()); srv.Close() }()

	post := func(body string) *http.Response {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/mcp", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set(HeaderProtocolVersion, "2025-11-25")
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	// Alice calls the tool and is asked for her name on her stream.
	alice := post(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"greet"}}`)
	defer alice.Body.Close()
	br := bufio.NewReader(alice.Body)
	readData := func() string {
		for {
			l, err := br.ReadString('\n')
			if err != nil {
				t.Fatalf("alice's stream: %v", err)
			}
			if d, ok := strings.CutPrefix(strings.TrimRight(l, "\r\n"), "data: "); ok {
				return d
			}
		}
	}
	asked := readData()
	if !strings.Contains(asked, `"elicitation/create"`) {
		t.Fatalf("alice got %s", asked)
	}
	var q struct {
		ID json.RawMessage `json:"id"`
	}
	json.Unmarshal([]byte(asked), &q)
	// Mallory never saw Alice's stream; she guesses the first id. Then
	// Alice answers with the id she was sent.
	m := post(`{"jsonrpc":"2.0","id":"srv-1","result":{"action":"accept","content":{"name":"Mallory"}}}`)
	m.Body.Close()
	a := post(`{"jsonrpc":"2.0","id":` + string(q.ID) + `,"result":{"action":"accept","content":{"name":"Alice"}}}`)
	a.Body.Close()
	if d := readData(); !strings.Contains(d, "hello Alice") {
		t.Errorf("Alice's result: %s", d)
	}
}

// 3. A StateKey that is set but empty ([]byte(os.Getenv(...)) with the
// variable unset) is used as the HMAC key: anyone can sign a requestState.
func TestRegressionSurfaceEmptyStateKeyLetsClientsForgeState(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := r7Server(&ServerOptions{StateKey: []byte("")})
		s.AddTool(Tool{Name: "st"}, func(ctx context.Context, r *ToolRequest) (*ToolResult, error) {
			return TextResult("state=" + string(r.State())), nil
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
		s.AddTool(Tool{Name: "pay"}, func(ctx context.Context, r *ToolRequest) (*ToolResult, error) {
			var in struct{ Amount int }
			json.Unmarshal(r.Arguments, &in)
			if string(r.State()) == "confirmed" {
				return TextResult(fmt.Sprintf("paid %d", in.Amount)), nil
			}
			res, err := r.Elicit(ctx, "ok", fmt.Sprintf("Pay %d?", in.Amount), map[string]any{"type": "object"})
			if err != nil {
				return nil, err
			}
			if res.Action != "accept" {
				return ErrorResult("declined"), nil
			}
			r.SetState([]byte("confirmed")) // confirmed: one more round for a code
			if _, err := r.Ask(ctx, map[string]InputRequest{"otp": {Method: MethodElicit, Params: map[string]any{"message": "code?", "requestedSchema": map[string]any{"type": "object"}}}}); err != nil {
				return nil, err
			}
			return TextResult(fmt.Sprintf("paid %d", in.Amount)), nil
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
		s.AddTool(Tool{Name: "needs"}, func(ctx context.Context, r *ToolRequest) (*ToolResult, error) {
			if err := r.RequireClientCapability("elicitation"); err != nil {
				return nil, err
			}
			return TextResult("ok"), nil
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
		s.AddTool(Tool{Name: "roots"}, func(ctx context.Context, r *ToolRequest) (*ToolResult, error) {
			if _, err := r.Ask(ctx, map[string]InputRequest{"r": {Method: MethodListRoots}}); err != nil {
				return nil, err
			}
			return TextResult("ok"), nil
		})
		w := wiretest.Start(t, s.Handler(), s.ConnOptions(nil), true)
		defer w.Finish()
		got := r7One(t, w.Exchange(r7Modern("1", "tools/call", `"name":"roots"`)))
		if strings.Contains(got, `"params":null`) {
			t.Errorf("inputRequests carries params null: %s", got)
		}
	})
}

func r7Post(body string, hdr map[string]string) *http.Request {
	req := httptest.NewRequest(http.MethodPost, "http://localhost/mcp", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	return req
}

// 7. The Mcp-Param- check of a nested argument reads it case-sensitively
// (argAt), the tool decodes case-insensitively: the header says "us", the
// tool runs with "eu". The top-level variant was fixed; the nested one not.
func TestRegressionSurfaceNestedParamHeaderCaseVariantBypass(t *testing.T) {
	s := r7Server(nil)
	type in struct {
		Loc struct {
			Region string `json:"region"`
		} `json:"loc"`
	}
	got := make(chan string, 1)
	AddTool(s, Tool{Name: "deploy", InputSchema: json.RawMessage(`{"type":"object","properties":{"loc":{"type":"object","properties":{"region":{"type":"string","x-mcp-header":"Region"}}}}}`)},
		func(_ context.Context, _ *ToolRequest, a in) (*ToolResult, error) {
			got <- a.Loc.Region
			return TextResult(a.Loc.Region), nil
		})
	h := s.HTTPHandler(nil)
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{` + r7Meta + `,"name":"deploy","arguments":{"loc":{"region":"us","REGION":"eu"}}}}`
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, r7Post(body, map[string]string{HeaderProtocolVersion: LatestVersion, HeaderMethod: "tools/call", HeaderName: "deploy", "Mcp-Param-Region": "us"}))
	select {
	case region := <-got:
		if region != "us" {
			t.Errorf("Mcp-Param-Region: us accepted (status %d) but the tool ran with region %q", rec.Code, region)
		}
	default:
	}
}

// 8. The HTTP layer reads _meta's protocolVersion case-insensitively
// (encoding/json), the session exactly (jsonrpc.Members): MCP-Protocol-Version:
// 2025-11-25 passes the mirror check while the request is served as
// 2026-07-28.
func TestRegressionSurfaceProtocolVersionHeaderMismatchViaCaseVariant(t *testing.T) {
	s := r7Server(nil)
	h := s.HTTPHandler(nil)
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","IO.MODELCONTEXTPROTOCOL/PROTOCOLVERSION":"2025-11-25","io.modelcontextprotocol/clientCapabilities":{}}}}`
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, r7Post(body, map[string]string{HeaderProtocolVersion: "2025-11-25", HeaderMethod: "tools/list"}))
	if rec.Code != http.StatusBadRequest {
		t.Errorf("header 2025-11-25 with body 2026-07-28 was served: %d %s", rec.Code, rec.Body)
	}
}

// 9. Every resources/subscribe starts a goroutine that lives as long as
// the connection (unsubscribe does not end it), and the server-wide
// resourceSubs map keeps a key for every URI ever subscribed, after the
// connection is gone: both grow without bound from client input.
func TestRegressionSurfaceSubscribeLeaks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := r7Server(nil)
		s.AddResource(Resource{URI: "test://a", Name: "a"}, func(context.Context, *ReadRequest) ([]ResourceContents, error) {
			return []ResourceContents{{URI: "test://a", Text: "a"}}, nil
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
		s.mu.Lock()
		keys := len(s.resourceSubs)
		s.mu.Unlock()
		if grown >= 100 {
			t.Errorf("200 subscribe/unsubscribe pairs left %d goroutines running", grown)
		}
		if keys > 1 {
			t.Errorf("after the connection ended, resourceSubs still holds %d URIs", keys)
		}
	})
}

// 10. ResourceUpdated notifies subscribers one by one with a blocking
// Notify: one subscriber that does not read its output stalls the caller
// and every other subscriber.
func TestRegressionSurfaceResourceUpdatedStalledBySlowSubscriber(t *testing.T) {
	s := r7Server(nil)
	s.AddResource(Resource{URI: "test://a", Name: "a"}, func(context.Context, *ReadRequest) ([]ResourceContents, error) {
		return []ResourceContents{{URI: "test://a", Text: "a"}}, nil
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

// 11. Legacy over HTTP: logging/setLevel is answered {} but forgotten with
// it still holds them, and a server can grow it without bound.
func TestRegressionSurfaceLateResponsesKeptForever(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		json.NewDecoder(r.Body).Decode(&m)
		switch m.Method {
		case methodDiscover:
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"resultType":"complete","supportedVersions":["2026-07-28"],"capabilities":{},"ttlMs":0,"cacheScope":"public"}}`, m.ID)
		default:
			w.Header().Set("Content-Type", "text/event-stream")
			for i := range 50 {
				fmt.Fprintf(w, "data: {\"jsonrpc\":\"2.0\",\"id\":\"junk-%s-%d\",\"result\":{}}\n\n", m.ID, i)
			}
			fmt.Fprintf(w, "data: {\"jsonrpc\":\"2.0\",\"id\":%s,\"result\":{\"resultType\":\"complete\",\"tools\":[]}}\n\n", m.ID)
		}
	}))
	defer srv.Close()
	sess, err := ConnectHTTP(t.Context(), srv.URL, &ClientOptions{Eras: ModernOnly}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	for range 3 {
		if _, err := sess.ListTools(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	n := 0
	sess.t.(*httpTransport).late.Range(func(any, any) bool { n++; return true })
	if n > 0 {
		t.Errorf("no call in flight, yet %d stray responses are kept", n)
	}
}

// 13. With OnInput set, a legacy HTTP connect opens the standalone GET
// stream synchronously on the transport's base context: a server that
// does not send the GET's headers holds ConnectHTTP past its ctx and
// ConnectTimeout.
func TestRegressionSurfaceStandaloneStreamIgnoresConnectDeadline(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet {
			select { // headers only with the first event, which never comes
			case <-r.Context().Done():
			case <-release:
			}
			return
		}
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		json.NewDecoder(r.Body).Decode(&m)
		if m.ID == nil {
			w.WriteHeader(http.StatusAccepted)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"protocolVersion":"2025-11-25","capabilities":{},"serverInfo":{"name":"s","version":"1"}}}`, m.ID)
	}))
	defer srv.Close()
	var once sync.Once
	defer once.Do(func() { close(release) })
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	type result struct {
		s   *Session
		err error
	}
	ch := make(chan result, 1)
	go func() {
		s, err := ConnectHTTP(ctx, srv.URL, &ClientOptions{Eras: LegacyOnly, ConnectTimeout: 300 * time.Millisecond,
			OnInput: func(context.Context, InputRequest) (any, error) { return map[string]any{}, nil }}, nil)
		ch <- result{s, err}
	}()
	var r result
	select {
	case r = <-ch:
	case <-time.After(3 * time.Second):
		t.Errorf("ConnectHTTP still running 3 s after its 300 ms deadline")
		once.Do(func() { close(release) })
		r = <-ch
	}
	if r.s != nil {
		r.s.Close()
	}
}

// 14. A template with an unsupported expression before the last variable
// is accepted (only the text after the last {var} is checked) and the
// expression becomes literal text that no URI matches.
func TestRegressionSurfaceTemplateUnsupportedExpressionAccepted(t *testing.T) {
	if err := r7Server(nil).AddResourceTemplate(ResourceTemplate{URITemplate: "db://{?table}/{id}", Name: "x"}, nil); err == nil {
		t.Errorf("db://{?table}/{id} accepted; db://{id}{?table} is refused")
	}
}

// 15. An invalid io.modelcontextprotocol/logLevel is ignored (no logs)
// rather than rejected with -32602 ("Invalid level → SHOULD reject").
func TestRegressionSurfaceInvalidLogLevelNotRejected(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := r7Server(nil)
		s.AddTool(Tool{Name: "t"}, func(context.Context, *ToolRequest) (*ToolResult, error) { return TextResult("ok"), nil })
		w := wiretest.Start(t, s.Handler(), s.ConnOptions(nil), true)
		defer w.Finish()
		req := strings.Replace(r7Modern("1", "tools/call", `"name":"t"`), `"io.modelcontextprotocol/clientCapabilities":{}`, `"io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/logLevel":"verbose"`, 1)
		if got := r7One(t, w.Exchange(req)); wiretest.ErrCode(t, got) != -32602 {
			t.Errorf("logLevel verbose: %s", got)
		}
	})
}

var _ = client.Retryable
