package rpc_test

import (
	"context"
	"testing"
	"testing/synctest"

	"github.com/agentwire/agentwire/rpc"
)

type lifeKey struct{}

// A connection's Context lives exactly as long as the connection: it is not
// done while the connection serves (not even after input ends, during the
// grace), it is done once the connection has shut down, and a hook on it
// (context.AfterFunc) runs then without a goroutine waiting meanwhile. It
// carries the parent context's values but not its cancellation.
func TestConnContextEndsWhenTheConnectionHasShutDown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		parent, cancelParent := context.WithCancel(context.WithValue(context.Background(), lifeKey{}, "v"))
		release := make(chan struct{})
		h := rpc.Methods{"wait": func(ctx context.Context, r *rpc.Request) (any, error) {
			<-release
			return "ok", nil
		}}
		var out collected
		c := rpc.Prepare(&rpc.Options{Logger: quiet}).NewMessages(parent, nil, &out, h)
		ctx := c.Context()
		if ctx.Value(lifeKey{}) != "v" {
			t.Error("the parent's values are not carried")
		}
		ran := make(chan struct{})
		stop := context.AfterFunc(ctx, func() { close(ran) })
		defer stop()

		go c.Receive([]byte(`{"jsonrpc":"2.0","id":1,"method":"wait"}`))
		synctest.Wait()
		cancelParent() // the parent's cancellation is not the connection's end
		c.EndInput()   // nor is the end of input, while a handler still runs
		synctest.Wait()
		if ctx.Err() != nil {
			t.Fatal("the context ended before the connection did")
		}
		close(release)
		c.Wait()
		synctest.Wait()
		select {
		case <-ran:
		default:
			t.Fatal("the hook did not run when the connection shut down")
		}
		if ctx.Err() == nil {
			t.Fatal("the context is not done after the connection shut down")
		}
		if c.Context() != ctx {
			t.Error("Context returned another context")
		}
	})
}

// A connection asked for its Context after it shut down gets one that is
// already done: a hook set then runs at once instead of waiting forever.
func TestConnContextOfAFinishedConnectionIsDone(t *testing.T) {
	var out collected
	c := rpc.NewMessages(nil, &out, nil, &rpc.Options{Logger: quiet})
	c.Close()
	if c.Context().Err() == nil {
		t.Fatal("the Context of a closed connection is not done")
	}
}
