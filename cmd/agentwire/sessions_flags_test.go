//go:build unix

package main

import (
	"strings"
	"testing"
)

// The session and bridge-upstream flags are checked before anything
// starts: the session settings only with --sessions, all of them only
// with --http, --url and a server command exclusive, --url-token only
// with --url, and an upstream that is not an http(s) URL refused.
func TestSessionAndUpstreamFlagsAreCheckedBeforeAnythingStarts(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"serve", "mcp", "--sessions"}, "--sessions: only with --http"},
		{[]string{"serve", "mcp", "--sse"}, "--sse: only with --http"},
		{[]string{"serve", "mcp", "--http", "127.0.0.1:0", "--session-idle", "5m"}, "only with --sessions"},
		{[]string{"serve", "mcp", "--http", "127.0.0.1:0", "--max-sessions", "10"}, "only with --sessions"},
		{[]string{"serve", "mcp", "--http", "127.0.0.1:0", "--sessions", "--max-sessions", "-1"}, "must not be negative"},
		{[]string{"bridge", "--http", "127.0.0.1:0", "--url", "http://127.0.0.1:1/mcp", "--", "true"}, "exclude each other"},
		{[]string{"bridge", "--http", "127.0.0.1:0", "--url-token", "x", "--", "true"}, "--url-token only with --url"},
		{[]string{"bridge", "--http", "127.0.0.1:0", "--url", "ftp://host/"}, "--url must be an http:// or https:// URL"},
		{[]string{"bridge", "--http", "127.0.0.1:0"}, "missing the server"},
	} {
		code, _, errText := runAgentwire(t, c.args...)
		if code != 2 || !strings.Contains(errText, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %q", c.args, code, errText, c.want)
		}
	}
}
