package resource_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/agentwire/agentwire/oauth/resource"
)

func ExampleNewJWTVerifier() {
	// An authorization server, publishing its metadata and key set.
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	mux := http.NewServeMux()
	as := httptest.NewServer(mux)
	defer as.Close()
	mux.HandleFunc("/.well-known/oauth-authorization-server", func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode(map[string]string{"issuer": as.URL, "jwks_uri": as.URL + "/jwks"})
	})
	mux.HandleFunc("/jwks", func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &key.PublicKey, KeyID: "k1", Use: "sig"}}})
	})

	// The MCP server's verifier.
	v, err := resource.NewJWTVerifier(resource.JWTOptions{
		Issuer:   as.URL,
		Resource: "https://mcp.example.com/mcp",
	})
	if err != nil {
		panic(err)
	}

	// A token the authorization server issued for it.
	signer, _ := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: key},
		(&jose.SignerOptions{}).WithType("at+jwt").WithHeader("kid", "k1"))
	token, _ := jwt.Signed(signer).Claims(map[string]any{
		"iss": as.URL, "aud": "https://mcp.example.com/mcp", "sub": "user-1", "client_id": "cli",
		"scope": "mcp:read", "iat": time.Now().Unix(), "exp": time.Now().Add(time.Minute).Unix(),
	}).Serialize()

	id, err := v.Verify(context.Background(), token)
	if err != nil {
		panic(err)
	}
	fmt.Println(id.Subject, id.ClientID, id.Scopes)
	// Output: user-1 cli [mcp:read]
}

func ExampleNewIntrospectionVerifier() {
	// An introspection endpoint that knows one token.
	as := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if id, secret, _ := r.BasicAuth(); id != "mcp-server" || secret != "s3cret" {
			http.Error(w, "who are you?", http.StatusUnauthorized)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		if r.FormValue("token") != "opaque-token" {
			fmt.Fprint(w, `{"active":false}`)
			return
		}
		fmt.Fprint(w, `{"active":true,"sub":"user-1","client_id":"cli","scope":"mcp:read mcp:write","aud":"https://mcp.example.com/mcp"}`)
	}))
	defer as.Close()

	v, err := resource.NewIntrospectionVerifier(resource.IntrospectionOptions{
		Endpoint:     as.URL,
		ClientID:     "mcp-server",
		ClientSecret: "s3cret",
		Resource:     "https://mcp.example.com/mcp",
	})
	if err != nil {
		panic(err)
	}
	id, err := v.Verify(context.Background(), "opaque-token")
	fmt.Println(id.Subject, id.Scopes, err)
	_, err = v.Verify(context.Background(), "another-token")
	fmt.Println(err)
	// Output:
	// user-1 [mcp:read mcp:write] <nil>
	// auth: invalid token: the introspection endpoint says the token is not active
}
