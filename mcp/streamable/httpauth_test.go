package streamable_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/agentwire/agentwire/mcp"
	"github.com/agentwire/agentwire/mcp/auth"
	"github.com/agentwire/agentwire/mcp/internal/mcptest"
	"github.com/agentwire/agentwire/mcp/server"
	"github.com/agentwire/agentwire/mcp/streamable"
)

var _ streamable.ScopedBackend = (*server.Server)(nil)

const (
	prmURL       = "https://mcp.example.com/.well-known/oauth-protected-resource/mcp"
	challenge401 = `Bearer resource_metadata="` + prmURL + `", scope="mcp:basic"`
	invalid401   = challenge401 + `, error="invalid_token"`
	body401      = `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Unauthorized: a valid bearer token is required"}}` + "\n"
)

// testVerifier knows a few tokens by the scopes they carry.
var testVerifier = auth.VerifierFunc(func(ctx context.Context, token string) (*auth.Identity, error) {
	scopes := map[string][]string{
		"basic":   {"mcp:basic"},
		"lister":  {"mcp:basic", "tools:list"},
		"writer":  {"mcp:basic", "files:write"},
		"nobasic": {"tools:list", "files:write"},
	}
	switch token {
	case "broken":
		return nil, errors.New("introspection at 10.1.2.3 refused the connection")
	case "nobody":
		return nil, nil
	}
	s, ok := scopes[token]
	if !ok {
		return nil, fmt.Errorf("%w: token %q is not known", auth.ErrInvalidToken, token)
	}
	return &auth.Identity{Subject: "alice-" + token, Scopes: s}, nil
})

// newProtected is a dual-era server whose tools/list needs tools:list,
// whose "write" tool needs files:write, and whose "whoami" tool tells who
// called, behind an endpoint that needs mcp:basic of every request.
func newProtected(t *testing.T) (h *streamable.Handler, logged func() string) {
	s := mcptest.NewServer(&server.Options{MethodScopes: map[string][]string{"tools/list": {"tools:list"}}})
	s.AddTool(mcp.Tool{Name: "write", Scopes: []string{"files:write"}}, func(context.Context, *server.ToolRequest) (*mcp.ToolResult, error) {
		return mcp.TextResult("written"), nil
	})
	s.AddTool(mcp.Tool{Name: "whoami"}, func(ctx context.Context, _ *server.ToolRequest) (*mcp.ToolResult, error) {
		id := auth.IdentityFrom(ctx)
		if id == nil {
			return mcp.TextResult("nobody"), nil
		}
		return mcp.TextResult(id.Subject + " " + strings.Join(id.Scopes, ",")), nil
	})
	var mu sync.Mutex
	var logs bytes.Buffer
	logged = func() string { mu.Lock(); defer mu.Unlock(); return logs.String() }
	h = streamable.NewHandler(s, &streamable.Options{
		Logger: slog.New(slog.NewTextHandler(writerFunc(func(p []byte) (int, error) {
			mu.Lock()
			defer mu.Unlock()
			return logs.Write(p)
		}), nil)),
		Protect: &streamable.Protection{
			Verifier: testVerifier,
			Metadata: auth.ProtectedResourceMetadata{
				Resource:             "https://mcp.example.com/mcp",
				AuthorizationServers: []string{"https://auth.example.com"},
				ScopesSupported:      []string{"mcp:basic", "tools:list", "files:write"},
			},
			Scopes: []string{"mcp:basic"},
		},
	})
	t.Cleanup(func() { h.Shutdown(context.Background()) })
	return h, logged
}

func modernCall(name string) string {
	return `{"jsonrpc":"2.0","id":"c","method":"tools/call","params":` + withMeta(`"name":"`+name+`","arguments":{}`) + `}`
}

func legacyCall(name string) string {
	return `{"jsonrpc":"2.0","id":"c","method":"tools/call","params":{"name":"` + name + `","arguments":{}}}`
}

const (
	modernList = `{"jsonrpc":"2.0","id":7,"method":"tools/list","params":{` + mcptest.Meta + `}}`
	legacyList = `{"jsonrpc":"2.0","id":7,"method":"tools/list"}`
	modernDisc = `{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{` + mcptest.Meta + `}}`
)

// legacyHeaders are a 2025-11-25 client's: no Mcp-Method, no Mcp-Name.
func legacyHeaders(token string) map[string]string {
	h := map[string]string{mcp.HeaderProtocolVersion: "2025-11-25", mcp.HeaderMethod: "", mcp.HeaderName: ""}
	if token != "" {
		h["Authorization"] = "Bearer " + token
	}
	return h
}

func bearer(token string) map[string]string {
	return map[string]string{"Authorization": "Bearer " + token}
}

// A protected endpoint answers 401 without a token or with a refused
// one, naming its metadata document and the scopes every request needs,
// and closes the connection; 503 with Retry-After when the verifier fails,
// its error logged and never sent.
func TestHTTPProtectRefusesWithoutAValidToken(t *testing.T) {
	h, logged := newProtected(t)
	cases := []struct {
		name      string
		method    string
		target    string
		headers   map[string]string
		status    int
		challenge string
		body      string
	}{
		{name: "no Authorization", status: 401, challenge: challenge401, body: body401},
		{name: "GET without a token", method: http.MethodGet, status: 401, challenge: challenge401, body: body401},
		{name: "another scheme", headers: map[string]string{"Authorization": "Basic YWxpY2U6c2VjcmV0"}, status: 401, challenge: challenge401, body: body401},
		{name: "Bearer without a token", headers: map[string]string{"Authorization": "Bearer "}, status: 401, challenge: challenge401, body: body401},
		{name: "a token in the query string is not read", target: "http://localhost:8080/mcp?access_token=basic", status: 401, challenge: challenge401, body: body401},
		{name: "refused token", headers: bearer("bogus"), status: 401, challenge: invalid401, body: body401},
		{name: "refused token, lowercase scheme", headers: map[string]string{"Authorization": "bearer bogus"}, status: 401, challenge: invalid401, body: body401},
		{name: "verifier failure", headers: bearer("broken"), status: 503,
			body: `{"jsonrpc":"2.0","id":null,"error":{"code":-32603,"message":"Service Unavailable: the access token could not be verified"}}` + "\n"},
		{name: "verifier without an identity", headers: bearer("nobody"), status: 503,
			body: `{"jsonrpc":"2.0","id":null,"error":{"code":-32603,"message":"Service Unavailable: the access token could not be verified"}}` + "\n"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req := newPost(t.Context(), modernDisc, modernHeaders(modernDisc, tc.headers))
			if tc.method != "" {
				req.Method = tc.method
			}
			if tc.target != "" {
				req = newPost(t.Context(), modernDisc, modernHeaders(modernDisc, tc.headers))
				req.URL.RawQuery = "access_token=basic"
			}
			req.Host = "evil.example" // never in the challenge
			rec := serve(h, req)
			if rec.Status() != tc.status {
				t.Fatalf("status %d, want %d: %s", rec.Status(), tc.status, rec.Body())
			}
			if got := rec.hdr.Get("WWW-Authenticate"); got != tc.challenge {
				t.Errorf("WWW-Authenticate\n got %s\nwant %s", got, tc.challenge)
			}
			if got := rec.Body(); got != tc.body {
				t.Errorf("body\n got %s\nwant %s", got, tc.body)
			}
			if ct := rec.hdr.Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type %q", ct)
			}
			if rec.hdr.Get("Connection") != "close" {
				t.Error("the connection is kept open")
			}
			if ra := rec.hdr.Get("Retry-After"); (tc.status == 503) != (ra == "1") {
				t.Errorf("Retry-After %q", ra)
			}
		})
	}
	st := h.Stats()
	if st.Unauthorized != 5 || st.InvalidTokens != 2 || st.VerifierFailures != 2 || st.InsufficientScope != 0 {
		t.Errorf("stats: Unauthorized %d, InvalidTokens %d, VerifierFailures %d, InsufficientScope %d", st.Unauthorized, st.InvalidTokens, st.VerifierFailures, st.InsufficientScope)
	}
	out := logged()
	for _, want := range []string{"request without a valid bearer token (401)", "bearer token refused by the verifier (401, Protect)", "the token verifier failed (503, Protect)", "10.1.2.3 refused the connection", `token \"bogus\" is not known`} {
		if !strings.Contains(out, want) {
			t.Errorf("the log lacks %q:\n%s", want, out)
		}
	}
}

// A verified token without a scope the request needs (the endpoint's,
// the method's, the tool's) gets 403 insufficient_scope naming every
// scope the operation needs, in both eras' request forms.
func TestHTTPProtectScopesPerMethodAndTool(t *testing.T) {
	h, _ := newProtected(t)
	type tcase struct {
		name    string
		body    string
		headers map[string]string
		status  int
		scope   string // of the 403 challenge
		id      string
		want    string // a substring of a 200 body
	}
	var cases []tcase
	for _, era := range []string{"2026-07-28", "2025-11-25"} {
		list, call, hdr := modernList, modernCall, bearer
		if era != "2026-07-28" {
			list, call, hdr = legacyList, legacyCall, legacyHeaders
		}
		cases = append(cases,
			tcase{name: era + "/method scope missing", body: list, headers: hdr("basic"), status: 403, scope: "mcp:basic tools:list", id: "7"},
			tcase{name: era + "/method scope granted", body: list, headers: hdr("lister"), status: 200, want: `"name":"write"`},
			tcase{name: era + "/tool scope missing", body: call("write"), headers: hdr("lister"), status: 403, scope: "mcp:basic files:write", id: `"c"`},
			tcase{name: era + "/tool scope granted", body: call("write"), headers: hdr("writer"), status: 200, want: `"text":"written"`},
			tcase{name: era + "/endpoint scope missing", body: call("whoami"), headers: hdr("nobasic"), status: 403, scope: "mcp:basic", id: `"c"`},
			tcase{name: era + "/tool without scopes", body: call("whoami"), headers: hdr("basic"), status: 200, want: `"text":"alice-basic mcp:basic"`},
		)
	}
	// The scheme is case-insensitive.
	cases = append(cases, tcase{name: "lowercase scheme", body: modernDisc, headers: map[string]string{"Authorization": "bearer basic"}, status: 200, want: `"supportedVersions"`},
		tcase{name: "uppercase scheme", body: modernDisc, headers: map[string]string{"Authorization": "BEARER basic"}, status: 200, want: `"supportedVersions"`})
	// Mcp-Name is checked against the body before scopes are: it cannot
	// name a tool that needs less.
	cases = append(cases, tcase{name: "Mcp-Name naming another tool", body: modernCall("write"),
		headers: map[string]string{"Authorization": "Bearer basic", mcp.HeaderName: "whoami"}, status: 400})
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rec := serve(h, newPost(t.Context(), tc.body, modernHeaders(tc.body, tc.headers)))
			body := rec.Body()
			if rec.Status() != tc.status {
				t.Fatalf("status %d, want %d: %s", rec.Status(), tc.status, body)
			}
			switch tc.status {
			case 403:
				want := `Bearer error="insufficient_scope", scope="` + tc.scope + `", resource_metadata="` + prmURL + `"`
				if got := rec.hdr.Get("WWW-Authenticate"); got != want {
					t.Errorf("WWW-Authenticate\n got %s\nwant %s", got, want)
				}
				wantBody := `{"jsonrpc":"2.0","id":` + tc.id + `,"error":{"code":-32600,"message":"Forbidden: insufficient scope: the request needs ` + tc.scope + `"}}` + "\n"
				if body != wantBody {
					t.Errorf("body\n got %s\nwant %s", body, wantBody)
				}
			case 200:
				if !strings.Contains(body, tc.want) {
					t.Errorf("body lacks %s: %s", tc.want, body)
				}
				if rec.hdr.Get("WWW-Authenticate") != "" {
					t.Error("a challenge on a served request")
				}
			}
		})
	}
	if st := h.Stats(); st.InsufficientScope != 6 || st.Unauthorized != 0 || st.InvalidTokens != 0 {
		t.Errorf("stats: InsufficientScope %d, Unauthorized %d, InvalidTokens %d", st.InsufficientScope, st.Unauthorized, st.InvalidTokens)
	}
}

// The handler serves the protected resource metadata document, without
// authentication, to any origin, at the path a client derives from the
// resource and at the root; challenges name its absolute URL.
func TestHTTPProtectServesResourceMetadata(t *testing.T) {
	h, _ := newProtected(t)
	const doc = `{"resource":"https://mcp.example.com/mcp","authorization_servers":["https://auth.example.com"],"scopes_supported":["mcp:basic","tools:list","files:write"],"bearer_methods_supported":["header"]}` + "\n"
	cases := []struct {
		name, method, path string
		status             int
	}{
		{"path-based", http.MethodGet, "/.well-known/oauth-protected-resource/mcp", 200},
		{"root", http.MethodGet, "/.well-known/oauth-protected-resource", 200},
		{"POST", http.MethodPost, "/.well-known/oauth-protected-resource/mcp", 405},
		{"another path below", http.MethodGet, "/.well-known/oauth-protected-resource/other", 404},
		{"another well-known document", http.MethodGet, "/.well-known/oauth-authorization-server", 404},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req := newPost(t.Context(), "", http.Header{"Origin": {"https://evil.example"}})
			req.Method, req.URL.Path = tc.method, tc.path
			rec := serve(h, req)
			if rec.Status() != tc.status {
				t.Fatalf("status %d, want %d: %s", rec.Status(), tc.status, rec.Body())
			}
			switch tc.status {
			case 200:
				if got := rec.Body(); got != doc {
					t.Errorf("document\n got %s\nwant %s", got, doc)
				}
				if ct := rec.hdr.Get("Content-Type"); ct != "application/json" {
					t.Errorf("Content-Type %q", ct)
				}
				if a := rec.hdr.Get("Access-Control-Allow-Origin"); a != "*" {
					t.Errorf("Access-Control-Allow-Origin %q", a)
				}
			case 405:
				if a := rec.hdr.Get("Allow"); a != "GET" {
					t.Errorf("Allow %q", a)
				}
			}
		})
	}
	// Unprotected, there is no document.
	plain := streamable.NewHandler(mcptest.NewServer(nil), nil)
	req := newPost(t.Context(), "", nil)
	req.Method, req.URL.Path = http.MethodGet, "/.well-known/oauth-protected-resource/mcp"
	if rec := serve(plain, req); rec.Status() != 404 {
		t.Errorf("unprotected: status %d", rec.Status())
	}
}

// Mounted under a prefix (the endpoint's path as the handler sees it
// differs from the resource's), the document is served at both paths,
// and a resource at the root of its host has its document at the root.
func TestHTTPProtectMetadataPaths(t *testing.T) {
	cases := []struct {
		resource, path string
		served         []string
		challenge      string
	}{
		{"https://api.example.com/tenant/mcp", "/mcp", []string{"/.well-known/oauth-protected-resource/tenant/mcp", "/.well-known/oauth-protected-resource/mcp", "/.well-known/oauth-protected-resource"},
			"https://api.example.com/.well-known/oauth-protected-resource/tenant/mcp"},
		{"https://api.example.com/", "/", []string{"/.well-known/oauth-protected-resource"}, "https://api.example.com/.well-known/oauth-protected-resource"},
		{"http://127.0.0.1:8080/mcp", "", []string{"/.well-known/oauth-protected-resource/mcp"}, "http://127.0.0.1:8080/.well-known/oauth-protected-resource/mcp"},
	}
	for _, tc := range cases {
		t.Run(tc.resource, func(t *testing.T) {
			h := streamable.NewHandler(mcptest.NewServer(nil), &streamable.Options{Path: tc.path, Protect: &streamable.Protection{
				Verifier: testVerifier, Metadata: auth.ProtectedResourceMetadata{Resource: tc.resource}}})
			for _, p := range tc.served {
				req := newPost(t.Context(), "", nil)
				req.Method, req.URL.Path = http.MethodGet, p
				if rec := serve(h, req); rec.Status() != 200 || !strings.Contains(rec.Body(), `"resource":"`+tc.resource+`"`) {
					t.Errorf("%s: status %d: %s", p, rec.Status(), rec.Body())
				}
			}
			req := newPost(t.Context(), modernDisc, modernHeaders(modernDisc, nil))
			req.URL.Path = tc.path
			if tc.path == "" {
				req.URL.Path = "/mcp"
			}
			rec := serve(h, req)
			if want := `Bearer resource_metadata="` + tc.challenge + `"`; rec.Status() != 401 || rec.hdr.Get("WWW-Authenticate") != want {
				t.Errorf("status %d, WWW-Authenticate %q, want %q", rec.Status(), rec.hdr.Get("WWW-Authenticate"), want)
			}
		})
	}
}

// The verified identity reaches the tool handler through its context,
// over a real connection with a real client.
func TestHTTPProtectIdentityInTheHandler(t *testing.T) {
	h, _ := newProtected(t)
	web := httptest.NewServer(h)
	t.Cleanup(web.Close)
	ctx := t.Context()
	sess, err := streamable.Connect(ctx, web.URL+"/mcp", nil, &streamable.ClientOptions{Token: "writer"})
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	res, err := sess.CallTool(ctx, "whoami", map[string]any{})
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Content[0].Text; got != "alice-writer mcp:basic,files:write" {
		t.Errorf("the handler saw %q", got)
	}
	if _, err := sess.CallTool(ctx, "write", map[string]any{}); err != nil {
		t.Errorf("a granted tool: %v", err)
	}
}

// NewHandler refuses a protection it cannot serve.
func TestHTTPProtectConfigurationIsChecked(t *testing.T) {
	meta := auth.ProtectedResourceMetadata{Resource: "https://mcp.example.com/mcp"}
	cases := []struct {
		name string
		opts streamable.Options
		want string
	}{
		{"no verifier", streamable.Options{Protect: &streamable.Protection{Metadata: meta}}, "needs a Verifier"},
		{"no resource", streamable.Options{Protect: &streamable.Protection{Verifier: testVerifier}}, "Resource must be"},
		{"relative resource", streamable.Options{Protect: &streamable.Protection{Verifier: testVerifier, Metadata: auth.ProtectedResourceMetadata{Resource: "/mcp"}}}, "Resource must be"},
		{"resource with a fragment", streamable.Options{Protect: &streamable.Protection{Verifier: testVerifier, Metadata: auth.ProtectedResourceMetadata{Resource: "https://mcp.example.com/mcp#x"}}}, "Resource must be"},
		{"Token as well", streamable.Options{Token: "s3cret", Protect: &streamable.Protection{Verifier: testVerifier, Metadata: meta}}, "exclusive"},
		{"a scope with a space", streamable.Options{Protect: &streamable.Protection{Verifier: testVerifier, Metadata: meta, Scopes: []string{"a b"}}}, "not a scope token"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			defer func() {
				if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), tc.want) {
					t.Errorf("panic %v, want %q", r, tc.want)
				}
			}()
			streamable.NewHandler(mcptest.NewServer(nil), &tc.opts)
		})
	}
}

// Options.ResourceMetadata, with Protect, replaces the document's URL in
// challenges (a document served elsewhere); the handler still serves its
// own.
func TestHTTPProtectResourceMetadataOverride(t *testing.T) {
	const elsewhere = "https://docs.example.com/prm.json"
	h := streamable.NewHandler(mcptest.NewServer(nil), &streamable.Options{ResourceMetadata: elsewhere, Protect: &streamable.Protection{
		Verifier: testVerifier, Metadata: auth.ProtectedResourceMetadata{Resource: "https://mcp.example.com/mcp"}}})
	rec := serve(h, newPost(t.Context(), modernDisc, modernHeaders(modernDisc, bearer("bogus"))))
	if want := `Bearer resource_metadata="` + elsewhere + `", error="invalid_token"`; rec.Status() != 401 || rec.hdr.Get("WWW-Authenticate") != want {
		t.Errorf("status %d, WWW-Authenticate %q, want %q", rec.Status(), rec.hdr.Get("WWW-Authenticate"), want)
	}
	req := newPost(t.Context(), "", nil)
	req.Method, req.URL.Path = http.MethodGet, "/.well-known/oauth-protected-resource/mcp"
	if rec := serve(h, req); rec.Status() != 200 {
		t.Errorf("own document: status %d", rec.Status())
	}
}

// Mounted on a mux with the endpoint and the well-known paths routed to
// it, as docs/auth.md shows, the document is found where clients look.
func TestHTTPProtectOnAMux(t *testing.T) {
	h, _ := newProtected(t)
	mux := http.NewServeMux()
	mux.Handle("/mcp", h)
	mux.Handle("/.well-known/oauth-protected-resource/", h)
	mux.Handle("/.well-known/oauth-protected-resource", h)
	for _, p := range []string{"/.well-known/oauth-protected-resource/mcp", "/.well-known/oauth-protected-resource"} {
		req := newPost(t.Context(), "", nil)
		req.Method, req.URL.Path = http.MethodGet, p
		if rec := serve(mux, req); rec.Status() != 200 || !strings.Contains(rec.Body(), `"resource":"https://mcp.example.com/mcp"`) {
			t.Errorf("%s: status %d: %s", p, rec.Status(), rec.Body())
		}
	}
	if rec := serve(mux, newPost(t.Context(), modernDisc, modernHeaders(modernDisc, bearer("basic")))); rec.Status() != 200 {
		t.Errorf("the endpoint: status %d: %s", rec.Status(), rec.Body())
	}
}
