package dpop_test

import (
	"net/http"
	"testing"

	"github.com/agentwire/agentwire/oauth/dpop"
)

func TestATokenIsPresentedAsDPoPOnlyWhenBoundAndAKeyIsGiven(t *testing.T) {
	key, err := dpop.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		key        *dpop.Key
		tokenType  string
		authz      string
		wantsProof bool
	}{
		{key, "DPoP", "DPoP tok", true},
		{key, "dpop", "DPoP tok", true},
		{key, "Bearer", "Bearer tok", false},
		{nil, "DPoP", "Bearer tok", false},
		{nil, "", "Bearer tok", false},
	} {
		req, _ := http.NewRequest(http.MethodPost, "https://mcp.example/mcp?x=1", nil)
		req.Header.Set("DPoP", "a stale proof")
		if err := dpop.Present(req, tc.key, tc.tokenType, "tok"); err != nil {
			t.Fatal(err)
		}
		if got := req.Header.Get("Authorization"); got != tc.authz {
			t.Errorf("%q with key %v: Authorization %q, want %q", tc.tokenType, tc.key != nil, got, tc.authz)
		}
		if got := req.Header.Get("DPoP") != ""; got != tc.wantsProof || got && req.Header.Get("DPoP") == "a stale proof" {
			t.Errorf("%q with key %v: DPoP header %q", tc.tokenType, tc.key != nil, req.Header.Get("DPoP"))
		}
		if got := dpop.PresentedToken(req); got != "tok" {
			t.Errorf("PresentedToken = %q", got)
		}
	}
	req, _ := http.NewRequest(http.MethodGet, "https://mcp.example/mcp", nil)
	for _, h := range []string{"", "Basic dXNlcjpwYXNz", "Bearer", "Token abc"} {
		req.Header.Set("Authorization", h)
		if got := dpop.PresentedToken(req); got != "" {
			t.Errorf("PresentedToken(%q) = %q", h, got)
		}
	}
}
