package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentwire/agentwire/oauth/resource"
)

// tsClientScript is a client built on the TypeScript SDK
// (@modelcontextprotocol/client) that authenticates with the SDK's own
// OAuth support; see the script.
var tsClientScript = filepath.Join(interopDir, "oidc", "ts-client.mjs")

// tsClientOutput is the line the script prints.
type tsClientOutput struct {
	Requests      []string `json:"requests"`
	Authorization struct {
		ClientID            string `json:"client_id"`
		Scope               string `json:"scope"`
		Resource            string `json:"resource"`
		CodeChallengeMethod string `json:"code_challenge_method"`
		RedirectURI         string `json:"redirect_uri"`
		Iss                 string `json:"iss"`
	} `json:"authorization"`
	TokenType       string   `json:"tokenType"`
	RefreshToken    bool     `json:"refreshToken"`
	ProtocolVersion string   `json:"protocolVersion"`
	Tools           []string `json:"tools"`
	Result          string   `json:"result"`
	Error           string   `json:"error"`
}

// TestTypeScriptClientAuthenticatesOnItsOwn: the TypeScript SDK's client,
// given only the server's URL, a client ID and a redirect URI, finds the
// provider from the server's 401, authorizes, gets a token and calls a
// tool whose answer names the verified token's subject, client and scopes.
func TestTypeScriptClientAuthenticatesOnItsOwn(t *testing.T) {
	srv := newMCPServer(t)
	p := startProvider(t, providerConfig{Resource: srv.Resource})
	sdk := filepath.Join(interopDir, "node_modules", "@modelcontextprotocol", "client", "package.json")
	if _, err := os.Stat(sdk); err != nil {
		t.Fatalf("the TypeScript SDK client is not installed: %v", err)
	}
	v, err := resource.NewJWTVerifier(resource.JWTOptions{Issuer: p.Issuer, Resource: srv.Resource, RequireType: true})
	if err != nil {
		t.Fatal(err)
	}
	srv.protect(t, v, p.Issuer)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, nodeBinary, tsClientScript)
	cmd.Env = append(os.Environ(),
		"MCP_URL="+srv.Endpoint,
		"REDIRECT_URI="+redirectURI,
		"CLIENT_ID="+clientID,
		"TOOL=whoami",
	)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.WaitDelay = 5 * time.Second
	runErr := cmd.Run()
	diag := func() string {
		return "script stderr:\n" + stderr.String() + "\nserver saw: " + strings.Join(served2s(srv.Requests()), ", ") + "\n" + p.Diagnostics()
	}
	var out tsClientOutput
	line := bytes.TrimSpace(stdout.Bytes())
	if err := json.Unmarshal(line, &out); err != nil {
		t.Fatalf("the TypeScript client (%v) printed %q, not its JSON line (%v)\n%s", runErr, line, err, diag())
	}
	t.Logf("the TypeScript client's requests:\n  %s\nauthorization: %+v", strings.Join(out.Requests, "\n  "), out.Authorization)
	if runErr != nil || out.Error != "" {
		t.Fatalf("the TypeScript client failed (%v): %s\n%s", runErr, out.Error, diag())
	}

	// The tool answered for the token the provider issued to the
	// pre-registered client for user-1, verified by the server.
	if want := "user-1 " + clientID + " [mcp:read]"; out.Result != want {
		t.Errorf("whoami through the TypeScript client: %q, want %q", out.Result, want)
	}
	if !slices.Equal(out.Tools, []string{"whoami", "write"}) {
		t.Errorf("tools/list through the TypeScript client: %q", out.Tools)
	}
	a := out.Authorization
	if a.ClientID != clientID || a.Resource != srv.Resource || a.CodeChallengeMethod != "S256" ||
		a.RedirectURI != redirectURI || a.Iss != p.Issuer || !slices.Contains(strings.Fields(a.Scope), "mcp:read") {
		t.Errorf("the SDK's authorization request and response: %+v; want client %q, resource %q, S256, redirect %q, iss %q, scope with mcp:read",
			a, clientID, srv.Resource, redirectURI, p.Issuer)
	}
	if !strings.EqualFold(out.TokenType, "Bearer") {
		t.Errorf("token type %q", out.TokenType)
	}

	// The server's side: the first request had no token and got 401; the
	// later MCP requests carried the token and were served.
	reqs := srv.Requests()
	var mcpReqs []served
	for _, r := range reqs {
		if r.Path == "/mcp" {
			mcpReqs = append(mcpReqs, r)
		}
	}
	if len(mcpReqs) == 0 || mcpReqs[0].Bearer || mcpReqs[0].Status != 401 {
		t.Fatalf("the server's first MCP request: want one without a token answered 401; saw %s", served2s(reqs))
	}
	var ok int
	for _, r := range mcpReqs[1:] {
		switch {
		case r.Bearer && r.Status/100 == 2:
			ok++
		case r.Method == "GET" && r.Status == 405:
			// The SDK's optional stream for server messages, which a
			// server without one refuses so (Streamable HTTP).
		default:
			t.Errorf("after the authorization the server answered %s", r)
		}
	}
	if ok < 3 { // initialize (or discover), tools/list, tools/call
		t.Errorf("the server served %d MCP requests with a token, want at least 3; saw %s", ok, served2s(reqs))
	}
	if st := srv.Handler.Stats(); st.Unauthorized != 1 || st.InvalidTokens != 0 || st.InsufficientScope != 0 {
		t.Errorf("server stats: %d unauthorized (want 1), %d invalid tokens, %d insufficient scope (want 0)",
			st.Unauthorized, st.InvalidTokens, st.InsufficientScope)
	}
	if !slices.ContainsFunc(reqs, func(r served) bool {
		return strings.HasPrefix(r.Path, "/.well-known/oauth-protected-resource") && r.Status == 200
	}) {
		t.Errorf("the TypeScript client did not read the protected resource metadata; the server saw %s", served2s(reqs))
	}
}

func served2s(rs []served) []string {
	s := make([]string, len(rs))
	for i, r := range rs {
		s[i] = r.String()
	}
	return s
}
