package rpc_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/agentwire/agentwire/jsonrpc"
	"github.com/agentwire/agentwire/rpc"
)

// A server with two methods and a client, connected in memory.
//
// Handlers run concurrently, so the client declares "progress" a barrier:
// each progress notification is handled, in the order it was sent, before
// anything read after it is dispatched.
func ExamplePipe() {
	server := rpc.Methods{
		"add": func(_ context.Context, r *rpc.Request) (any, error) {
			var xs []int
			if err := r.UnmarshalParams(&xs); err != nil {
				return nil, err
			}
			sum := 0
			for _, x := range xs {
				sum += x
			}
			return sum, nil
		},
		"progress": func(_ context.Context, r *rpc.Request) (any, error) {
			for i := 1; i <= 2; i++ {
				if err := r.Notify("progress", map[string]int{"step": i}); err != nil {
					return nil, err
				}
			}
			return "done", nil
		},
	}
	progress := make(chan string, 2)
	client := rpc.HandlerFunc(func(_ context.Context, r *rpc.Request) (any, error) {
		progress <- fmt.Sprintf("client got %s %s", r.Method, r.Params)
		return nil, nil
	})
	ordered := &rpc.Options{IsBarrier: func(method string) bool { return method == "progress" }}
	c, s := rpc.Pipe(server, client, nil, ordered)
	defer s.Close()
	defer c.Close()

	res, err := c.Call(context.Background(), "add", []int{1, 2, 3})
	fmt.Println(string(res), err)
	res, err = c.Call(context.Background(), "progress", nil)
	fmt.Println(<-progress)
	fmt.Println(<-progress)
	fmt.Println(string(res), err)
	_, err = c.Call(context.Background(), "nope", nil)
	fmt.Println(err)
	// Output:
	// 6 <nil>
	// client got progress {"step":1}
	// client got progress {"step":2}
	// "done" <nil>
	// jsonrpc error -32601: method not found: nope
}

// Serving raw lines: every bad line gets one reply and the stream goes on.
// Replies go out in completion order, which need not be receive order: a
// bad line is answered by the reader while a request's handler may still be
// running.
func ExampleNew() {
	in := strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"hello","params":{"name":"wire"}}
not json
{"jsonrpc":"2.0","id":2,"method":"missing"}
`)
	var out strings.Builder
	h := rpc.Methods{"hello": func(_ context.Context, r *rpc.Request) (any, error) {
		var p struct{ Name string }
		if err := json.Unmarshal(r.Params, &p); err != nil {
			return nil, err
		}
		return "hello, " + p.Name, nil
	}}
	conn := rpc.New(in, nopCloser{&out}, h, nil)
	conn.Wait() // input EOF: answer everything, then stop
	fmt.Print(out.String())
	// Unordered output:
	// {"jsonrpc":"2.0","id":1,"result":"hello, wire"}
	// {"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error: invalid character 'o' in literal null"}}
	// {"jsonrpc":"2.0","id":2,"error":{"code":-32601,"message":"method not found: missing"}}
}

type nopCloser struct{ io.Writer }

// printer is a MessageWriter that shows each message with what the
// connection told it about it.
type printer struct{}

func (printer) WriteMessage(m *rpc.Outbound) error {
	status := "200"
	if m.Kind == jsonrpc.KindError {
		status = fmt.Sprint("error ", m.Error.Code)
	}
	fmt.Printf("%s %s\n", status, m.AppendTo(nil))
	return nil
}

// Serving pushed messages, as an HTTP transport does: no framing, the
// handler runs on the pushing goroutine, and the writer knows each
// message's kind and error code without decoding it.
func ExampleNewMessages() {
	h := rpc.Methods{"hello": func(context.Context, *rpc.Request) (any, error) { return "hi", nil }}
	conn := rpc.NewMessages(nil, printer{}, h, nil)
	conn.Receive([]byte(`{"jsonrpc":"2.0","id":1,"method":"hello"}`))
	conn.Receive([]byte(`{"jsonrpc":"2.0","id":2,"method":"missing"}`))
	conn.EndInput()
	conn.Wait()
	// Output:
	// 200 {"jsonrpc":"2.0","id":1,"result":"hi"}
	// error -32601 {"jsonrpc":"2.0","id":2,"error":{"code":-32601,"message":"method not found: missing"}}
}

// A transport that serves each exchange on a connection of its own (as the
// Streamable HTTP handler does, one per POST) prepares the options once.
func ExamplePrepared_NewMessages() {
	h := rpc.Methods{"who": func(ctx context.Context, _ *rpc.Request) (any, error) {
		return ctx.Value(caller{}), nil
	}}
	conns := rpc.Prepare(&rpc.Options{MaxConcurrentRequests: 4})
	for _, name := range []string{"ada", "grace"} {
		// Each exchange's handlers are children of its own context.
		ctx := context.WithValue(context.Background(), caller{}, name)
		conn := conns.NewMessages(ctx, nil, printer{}, h)
		conn.Receive([]byte(`{"jsonrpc":"2.0","id":1,"method":"who"}`))
		conn.EndInput()
		conn.Wait()
	}
	// Output:
	// 200 {"jsonrpc":"2.0","id":1,"result":"ada"}
	// 200 {"jsonrpc":"2.0","id":1,"result":"grace"}
}

type caller struct{}
