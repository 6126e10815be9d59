package streamable

import (
	"bytes"
	"net/url"
	"strings"
	"testing"
	"time"
)

// FuzzEventReader reads any bytes as a server's event stream: it never
// panics, never returns an event larger than the limit, names every event
// (message when it has no type), and keeps the last id and retry it saw.
func FuzzEventReader(f *testing.F) {
	for _, seed := range []string{
		"event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n\n",
		"event: endpoint\ndata: /messages?sessionId=abc\n\n",
		"id: g_7\nretry: 500\ndata: \n\n",
		":\n\n: keep-alive\r\ndata: a\r\ndata: b\r\n\r\n",
		"\xEF\xBB\xBFdata: x\rid: 1\x00\r\r",
		"data:" + strings.Repeat("y", 300) + "\n\n",
		"retry: -1\nretry: 99999999999999999999\ndata: z\n\n",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		const limit = 256
		tr := &httpTransport{opts: ClientOptions{MaxMessageBytes: limit}}
		var lastID string
		var retry time.Duration
		r := tr.newEventReader(bytes.NewReader(body), &lastID, &retry)
		for range len(body) + 1 {
			name, data, err := r.next()
			if err != nil {
				break
			}
			if name == "" {
				t.Fatal("an event without a type")
			}
			if len(data) == 0 || len(data) > limit {
				t.Fatalf("an event of %d bytes (limit %d)", len(data), limit)
			}
		}
		if strings.ContainsRune(lastID, 0) {
			t.Fatalf("an id with NUL kept: %q", lastID)
		}
		if retry < 0 || retry > time.Hour {
			t.Fatalf("a retry of %v: not within [0, 1h] (regression: a large retry overflowed into a negative delay)", retry)
		}
	})
}

// FuzzResolveEndpoint resolves any endpoint event a server may send: the
// result is an error, or a URL on the server's own origin (scheme, host,
// port, user), so that a client's credentials never leave it.
func FuzzResolveEndpoint(f *testing.F) {
	for _, seed := range []string{"/messages?sessionId=1", "messages?sessionId=2", "../x", "http://127.0.0.1:8080/m",
		"//evil.example/m", "https://127.0.0.1:8080/m", "http://user@127.0.0.1:8080/", "http://127.0.0.1:80/", " \t/m \n", "%zz", "http://[::1]:8080/"} {
		f.Add("http://127.0.0.1:8080/sse", seed)
	}
	f.Add("https://Example.COM/a/b/sse?x=1", "HTTPS://example.com:443/a/messages")
	f.Fuzz(func(t *testing.T, baseURL, data string) {
		base, err := url.Parse(baseURL)
		if err != nil || (base.Scheme != "http" && base.Scheme != "https") || base.Host == "" {
			return
		}
		got, err := resolveEndpoint(base, data)
		if err != nil {
			return
		}
		ep, err := url.Parse(got)
		if err != nil {
			t.Fatalf("resolveEndpoint(%q, %q) = %q, which does not parse: %v", baseURL, data, got, err)
		}
		if origin(ep) != origin(base) || ep.User.String() != base.User.String() {
			t.Fatalf("resolveEndpoint(%q, %q) = %q: another origin", baseURL, data, got)
		}
	})
}
