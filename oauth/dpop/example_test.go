package dpop_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"

	"github.com/agentwire/agentwire/oauth/dpop"
)

// A client with a DPoP key: token requests go through a Transport, which
// signs each and follows the server's nonce; resource requests carry a
// proof with the access token's hash.
func ExampleNew() {
	as := httptest.NewServer(&nonceAS{}) // a token endpoint that demands a nonce
	defer as.Close()

	key, err := dpop.New(nil) // a new ES256 key
	if err != nil {
		fmt.Println(err)
		return
	}
	client := &http.Client{Transport: &dpop.Transport{Key: key}}
	resp, err := client.PostForm(as.URL+"/token", url.Values{"grant_type": {"client_credentials"}})
	if err != nil {
		fmt.Println(err)
		return
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	fmt.Println(resp.StatusCode, strings.TrimSpace(string(body)))

	req, _ := http.NewRequest(http.MethodPost, "https://mcp.example.com/mcp", nil)
	req.Header.Set("Authorization", "DPoP t")
	if err := key.Sign(req, "t"); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(req.Header.Get("DPoP") != "")
	// Output:
	// 200 {"access_token":"t","token_type":"DPoP"}
	// true
}
