package auth_test

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/agentwire/agentwire/mcp/auth"
)

func TestAnIdentityHasOnlyTheScopesItWasGranted(t *testing.T) {
	id := &auth.Identity{Scopes: []string{"mcp:read", "mcp:write"}}
	if !id.HasScopes() || !id.HasScopes("mcp:read") || !id.HasScopes("mcp:write", "mcp:read") {
		t.Error("granted scopes refused")
	}
	if id.HasScopes("mcp:admin") || id.HasScopes("mcp:read", "mcp:admin") {
		t.Error("a scope not granted accepted")
	}
	if got := id.Missing([]string{"mcp:admin", "mcp:read", "deploy"}); !slices.Equal(got, []string{"mcp:admin", "deploy"}) {
		t.Errorf("Missing = %q", got)
	}
	var none *auth.Identity
	if none.HasScopes("mcp:read") || !none.HasScopes() {
		t.Error("a nil identity has no scopes")
	}
}

func TestTheIdentityTravelsInTheRequestContext(t *testing.T) {
	if auth.IdentityFrom(context.Background()) != nil {
		t.Fatal("an identity in a bare context")
	}
	id := &auth.Identity{Subject: "alice"}
	ctx, cancel := context.WithCancel(auth.WithIdentity(context.Background(), id))
	defer cancel()
	if got := auth.IdentityFrom(ctx); got != id {
		t.Fatalf("IdentityFrom = %v", got)
	}
}

func ExampleIdentityFrom() {
	// What a tool handler sees of a verified request.
	ctx := auth.WithIdentity(context.Background(), &auth.Identity{Subject: "alice", Scopes: []string{"files:read"}})
	if id := auth.IdentityFrom(ctx); id != nil && id.HasScopes("files:read") {
		fmt.Println(id.Subject, "may read files")
	}
	// Output: alice may read files
}

func TestAScopeIsOnePrintableTokenWithoutSpacesOrQuotes(t *testing.T) {
	for s, want := range map[string]bool{
		"mcp:read": true, "files.write": true, "a/b~c!": true,
		"": false, "two words": false, `quo"te`: false, `back\slash`: false, "tab\t": false, "é": false,
	} {
		if got := auth.ValidScope(s); got != want {
			t.Errorf("ValidScope(%q) = %v", s, got)
		}
	}
}
