package discover_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/agentwire/agentwire/oauth/discover"
)

// docServer serves JSON documents by path and records every path asked.
type docServer struct {
	*httptest.Server
	mu    sync.Mutex
	asked []string
	docs  map[string]any // path -> document; a string value is a status code
}

func newDocServer(t *testing.T) *docServer {
	d := &docServer{docs: map[string]any{}}
	d.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		d.mu.Lock()
		d.asked = append(d.asked, r.URL.Path)
		doc, ok := d.docs[r.URL.Path]
		d.mu.Unlock()
		switch v := doc.(type) {
		case nil:
			if !ok {
				http.NotFound(w, r)
			}
		case int:
			w.WriteHeader(v)
		default:
			w.Header().Set("Content-Type", "application/json")
			json.NewEncoder(w).Encode(v)
		}
	}))
	t.Cleanup(d.Close)
	return d
}

func (d *docServer) paths() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.asked)
}

func TestTheProtectedResourceMetadataNamedByTheChallengeIsTheOnlyOneFetched(t *testing.T) {
	d := newDocServer(t)
	d.docs["/custom/metadata/location.json"] = map[string]any{"resource": d.URL + "/mcp", "authorization_servers": []string{d.URL}}
	md, err := discover.ProtectedResource(context.Background(), nil, d.URL+"/mcp", d.URL+"/custom/metadata/location.json")
	if err != nil {
		t.Fatal(err)
	}
	if md.Resource != d.URL+"/mcp" || !slices.Equal(d.paths(), []string{"/custom/metadata/location.json"}) {
		t.Errorf("resource %q, asked %q", md.Resource, d.paths())
	}
}

func TestWithoutAChallengeThePathBasedWellKnownURLComesFirstThenTheRoot(t *testing.T) {
	d := newDocServer(t)
	d.docs["/.well-known/oauth-protected-resource"] = map[string]any{"resource": d.URL, "authorization_servers": []string{d.URL + "/tenant1"}}
	md, err := discover.ProtectedResource(context.Background(), nil, d.URL+"/mcp", "")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"/.well-known/oauth-protected-resource/mcp", "/.well-known/oauth-protected-resource"}
	if !slices.Equal(d.paths(), want) || md.AuthorizationServers[0] != d.URL+"/tenant1" {
		t.Errorf("asked %q, want %q; got %+v", d.paths(), want, md)
	}
}

func TestMetadataForAnotherResourceIsRefused(t *testing.T) {
	d := newDocServer(t)
	d.docs["/.well-known/oauth-protected-resource/mcp"] = map[string]any{"resource": "https://evil.example.com/mcp", "authorization_servers": []string{d.URL}}
	_, err := discover.ProtectedResource(context.Background(), nil, d.URL+"/mcp", "")
	if !errors.Is(err, discover.ErrResourceMismatch) {
		t.Fatalf("err = %v", err)
	}
}

func TestMetadataWithoutAnAuthorizationServerIsRefused(t *testing.T) {
	d := newDocServer(t)
	d.docs["/.well-known/oauth-protected-resource/mcp"] = map[string]any{"resource": d.URL + "/mcp"}
	if _, err := discover.ProtectedResource(context.Background(), nil, d.URL+"/mcp", ""); err == nil {
		t.Fatal("accepted")
	}
}

func TestAResourceCoversItsServerAndTheServersBelowIt(t *testing.T) {
	for _, tc := range []struct {
		resource, server string
		covers           bool
	}{
		{"https://a.example/mcp", "https://a.example/mcp", true},
		{"https://a.example/mcp/", "https://a.example/mcp", true},
		{"https://a.example", "https://a.example/mcp", true},
		{"https://a.example/", "https://a.example/public/mcp", true},
		{"https://a.example/public", "https://a.example/public/mcp", true},
		{"https://A.example/mcp", "https://a.example/mcp", true},
		{"https://a.example/pub", "https://a.example/public/mcp", false}, // not at a segment boundary
		{"https://a.example/mcp/x", "https://a.example/mcp", false},
		{"https://a.example:8443/mcp", "https://a.example/mcp", false},
		{"http://a.example/mcp", "https://a.example/mcp", false},
		{"https://evil.example/mcp", "https://a.example/mcp", false},
		{"https://a.example/mcp#frag", "https://a.example/mcp", false},
	} {
		if got := discover.ResourceCovers(tc.resource, tc.server); got != tc.covers {
			t.Errorf("ResourceCovers(%q, %q) = %v", tc.resource, tc.server, got)
		}
	}
}

func TestAuthorizationServerURLsFollowTheSpecifiedOrder(t *testing.T) {
	got, _ := discover.AuthorizationServerURLs("https://auth.example/tenant1")
	want := []string{
		"https://auth.example/.well-known/oauth-authorization-server/tenant1",
		"https://auth.example/.well-known/openid-configuration/tenant1",
		"https://auth.example/tenant1/.well-known/openid-configuration",
	}
	if !slices.Equal(got, want) {
		t.Errorf("with a path: %q", got)
	}
	got, _ = discover.AuthorizationServerURLs("https://auth.example")
	want = []string{"https://auth.example/.well-known/oauth-authorization-server", "https://auth.example/.well-known/openid-configuration"}
	if !slices.Equal(got, want) {
		t.Errorf("without a path: %q", got)
	}
}

func asMetadata(issuer string) map[string]any {
	return map[string]any{"issuer": issuer, "authorization_endpoint": issuer + "/authorize", "token_endpoint": issuer + "/token",
		"code_challenge_methods_supported": []string{"S256"}}
}

func TestAnIssuerWithAPathIsLookedUpUntilADocumentIsFound(t *testing.T) {
	d := newDocServer(t)
	issuer := d.URL + "/tenant1"
	d.docs["/tenant1/.well-known/openid-configuration"] = asMetadata(issuer)
	md, err := discover.AuthorizationServer(context.Background(), nil, issuer)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"/.well-known/oauth-authorization-server/tenant1", "/.well-known/openid-configuration/tenant1", "/tenant1/.well-known/openid-configuration"}
	if !slices.Equal(d.paths(), want) || md.TokenEndpoint != issuer+"/token" {
		t.Errorf("asked %q; metadata %+v", d.paths(), md)
	}
	// The root of the origin is never asked for such an issuer.
	if slices.Contains(d.paths(), "/.well-known/oauth-authorization-server") {
		t.Error("the root metadata was asked")
	}
}

func TestMetadataNamingAnotherIssuerIsNotUsed(t *testing.T) {
	d := newDocServer(t)
	d.docs["/.well-known/oauth-authorization-server"] = asMetadata("https://attacker.example.com")
	_, err := discover.AuthorizationServer(context.Background(), nil, d.URL)
	if !errors.Is(err, discover.ErrIssuerMismatch) {
		t.Fatalf("err = %v", err)
	}
	// Not even a trailing slash is forgiven.
	d.docs["/.well-known/oauth-authorization-server"] = asMetadata(d.URL + "/")
	if _, err := discover.AuthorizationServer(context.Background(), nil, d.URL); !errors.Is(err, discover.ErrIssuerMismatch) {
		t.Fatalf("trailing slash: err = %v", err)
	}
}

func TestAnAuthorizationServerWithoutPKCEIsRefused(t *testing.T) {
	d := newDocServer(t)
	md := asMetadata(d.URL)
	delete(md, "code_challenge_methods_supported")
	d.docs["/.well-known/oauth-authorization-server"] = md
	if _, err := discover.AuthorizationServer(context.Background(), nil, d.URL); !errors.Is(err, discover.ErrNoPKCE) {
		t.Fatalf("err = %v", err)
	}
	md["code_challenge_methods_supported"] = []string{"plain"}
	if _, err := discover.AuthorizationServer(context.Background(), nil, d.URL); !errors.Is(err, discover.ErrNoPKCE) {
		t.Fatalf("plain only: err = %v", err)
	}
}

// Grants without an authorization request do not ask for PKCE; the
// issuer is checked all the same.
func TestServerMetadataForGrantsWithoutPKCE(t *testing.T) {
	d := newDocServer(t)
	md := asMetadata(d.URL)
	delete(md, "code_challenge_methods_supported")
	d.docs["/.well-known/oauth-authorization-server"] = md
	got, err := discover.ServerMetadataOf(context.Background(), nil, d.URL)
	if err != nil || got.TokenEndpoint != d.URL+"/token" {
		t.Fatalf("%+v %v", got, err)
	}
	d.docs["/.well-known/oauth-authorization-server"] = asMetadata("https://attacker.example.com")
	if _, err := discover.ServerMetadataOf(context.Background(), nil, d.URL); !errors.Is(err, discover.ErrIssuerMismatch) {
		t.Fatalf("err = %v", err)
	}
}

func TestAServerErrorEndsTheSearchAndARedirectIsNotFollowed(t *testing.T) {
	d := newDocServer(t)
	d.docs["/.well-known/oauth-authorization-server"] = http.StatusBadGateway
	d.docs["/.well-known/openid-configuration"] = asMetadata(d.URL)
	if _, err := discover.AuthorizationServer(context.Background(), nil, d.URL); err == nil || errors.Is(err, discover.ErrNoMetadata) {
		t.Fatalf("a 502 was skipped: %v", err)
	}
	d.docs["/.well-known/oauth-authorization-server"] = http.StatusFound
	if _, err := discover.AuthorizationServer(context.Background(), nil, d.URL); err == nil {
		t.Fatal("a redirect was taken for a document")
	}
}

func TestOnlyHTTPSOrLoopbackHTTPIsFetched(t *testing.T) {
	for _, u := range []string{"http://auth.example", "ftp://127.0.0.1", "file:///etc/passwd", "https://"} {
		if _, err := discover.AuthorizationServer(context.Background(), nil, u); !errors.Is(err, discover.ErrUnsafeURL) {
			t.Errorf("%s: err = %v", u, err)
		}
	}
	if _, err := discover.ProtectedResource(context.Background(), nil, "http://mcp.example/mcp", ""); !errors.Is(err, discover.ErrUnsafeURL) {
		t.Errorf("http server: err = %v", err)
	}
	if urls, err := discover.ProtectedResourceURLs("http://[::1]:8080/a/mcp"); err != nil || urls[0] != "http://[::1]:8080/.well-known/oauth-protected-resource/a/mcp" {
		t.Errorf("loopback: %q %v", urls, err)
	}
}

func TestANonDocumentIsAnError(t *testing.T) {
	d := newDocServer(t)
	d.docs["/.well-known/oauth-authorization-server"] = "not an object"
	if _, err := discover.AuthorizationServer(context.Background(), nil, d.URL); err == nil || !strings.Contains(err.Error(), "not a metadata document") {
		t.Fatalf("err = %v", err)
	}
}
