package rpc_test

import (
	"context"
	"testing"

	"github.com/agentwire/agentwire/rpc"
)

func TestRequestFromNamesTheRequestAHandlersContextBelongsTo(t *testing.T) {
	got := make(chan string, 2)
	h := rpc.HandlerFunc(func(ctx context.Context, r *rpc.Request) (any, error) {
		derived, cancel := context.WithCancel(ctx)
		defer cancel()
		if rr := rpc.RequestFrom(derived); rr != nil {
			got <- rr.Method
		} else {
			got <- ""
		}
		return "ok", nil
	})
	client, server := rpc.Pipe(h, nil, nil, nil)
	defer client.Close()
	defer server.Close()
	if _, err := client.Call(t.Context(), "work", nil); err != nil {
		t.Fatal(err)
	}
	if m := <-got; m != "work" {
		t.Fatalf("RequestFrom in the handler = %q", m)
	}
	if rpc.RequestFrom(t.Context()) != nil {
		t.Fatal("a context outside any handler names a request")
	}
}
