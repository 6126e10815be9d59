//go:build unix

package main

import (
	"strings"
	"testing"
)

// Issue 18: the fleet flags are checked before anything starts: --redis
// only with --http, its companions only with --redis, a URL that is not
// Redis's refused without echoing it (it may hold a password), and a key
// rotation faster than a requestState lives refused.
func TestServeRedisFlagsAreCheckedBeforeAnythingStarts(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"serve", "mcp", "--redis", "redis://127.0.0.1:1/0"}, "--redis: only with --http"},
		{[]string{"serve", "mcp", "--http", "127.0.0.1:0", "--redis-lease", "3s"}, "--redis-lease: only with --redis"},
		{[]string{"serve", "mcp", "--http", "127.0.0.1:0", "--redis", "http://user:s3cret@host/"}, "--redis: not a Redis URL"},
		{[]string{"serve", "mcp", "--http", "127.0.0.1:0", "--redis", "redis://127.0.0.1:1/0", "--redis-rotate-keys", "10m"}, "--redis-rotate-keys must be at least 1h"},
	} {
		code, _, errText := runAgentwire(t, c.args...)
		if code != 2 || !strings.Contains(errText, c.want) || strings.Contains(errText, "s3cret") {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %q", c.args, code, errText, c.want)
		}
	}
}
