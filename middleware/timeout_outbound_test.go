package middleware_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/agentwire/agentwire/middleware"
	"github.com/agentwire/agentwire/rpc"
)

// An outbound call still unanswered at its method's Max returns a
// *TimeoutError at exactly Max, the peer is sent the connection's
// cancellation, and a call answered in time is untouched.
func TestTimeoutOutboundEndsACallAtMax(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		to := middleware.NewTimeout(&middleware.TimeoutOptions{
			Default: middleware.Limits{Max: 2 * time.Second},
			Methods: map[string]middleware.Limits{"fast": {Max: -1}},
			Logger:  quiet,
		})
		cancelled := make(chan string, 1)
		server := rpc.Methods{
			"slow": func(ctx context.Context, _ *rpc.Request) (any, error) {
				<-ctx.Done()
				cancelled <- context.Cause(ctx).Error()
				return nil, ctx.Err()
			},
			"fast": func(context.Context, *rpc.Request) (any, error) { return "ok", nil },
		}
		client, srv := rpc.Pipe(server, nil, &rpc.Options{Logger: quiet}, &rpc.Options{
			Logger: quiet, Outbound: []rpc.OutboundMiddleware{to.Outbound()}, OutboundCancel: &rpc.MCPCancel,
		})
		defer srv.Close()
		defer client.Close()
		if res, err := client.Call(t.Context(), "fast", nil); err != nil || string(res) != `"ok"` {
			t.Fatalf("an untimed call = %s, %v", res, err)
		}
		start := time.Now()
		_, err := client.Call(t.Context(), "slow", nil)
		var te *middleware.TimeoutError
		if !errors.Is(err, middleware.ErrTimeout) || !errors.As(err, &te) || te.Kind != middleware.MaxTimeout || te.Method != "slow" {
			t.Fatalf("the slow call returned %v, want a max TimeoutError", err)
		}
		if d := time.Since(start); d != 2*time.Second {
			t.Errorf("the call ended after %v, want exactly 2s", d)
		}
		if cause := <-cancelled; cause != rpc.ErrCancelledByPeer.Error() {
			t.Errorf("the server's handler ended with %q, want the peer's cancellation", cause)
		}
		if s := to.Stats(); s.OutboundTimeouts != 1 {
			t.Errorf("stats: %+v, want one outbound timeout", s)
		}
	})
}
