package authcode_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"

	"github.com/agentwire/agentwire/mcp/streamable"
	"github.com/agentwire/agentwire/oauth/authcode"
)

// An MCP host reaching a protected server: the Authorizer registers the
// client, has the user agent approve, and gives every request the token.
// Here the user agent is a program that requests the authorization URL
// and reads the redirect; a CLI would print the URL (or open a browser)
// and receive the callback on a loopback listener.
func ExampleNew() {
	as := newFakeAS() // an authorization server that approves at once
	defer as.Close()
	mcpServer := newFakeMCP(as, nil) // a server it protects
	defer mcpServer.Close()

	a, err := authcode.New(authcode.Options{
		RedirectURL:  "http://127.0.0.1:3000/callback",
		Registration: &authcode.Registration{ClientName: "example-host"},
		Redirect:     userAgent,
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx := context.Background()
	sess, err := streamable.Connect(ctx, mcpServer.URL(), nil, &streamable.ClientOptions{Authorizer: a})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer sess.Close()
	res, err := sess.CallTool(ctx, "echo", map[string]any{})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(res.Content[0].Text)
	// Output: echoed
}

// userAgent is the Redirect hook of a user who approves at once: it
// requests the authorization URL without following the redirect and
// returns where it points.
func userAgent(ctx context.Context, authURL string) (*url.URL, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, authURL, nil)
	if err != nil {
		return nil, err
	}
	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := noFollow.Do(req)
	if err != nil {
		return nil, err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusFound {
		return nil, fmt.Errorf("the authorization server answered %s", resp.Status)
	}
	return resp.Location()
}
