package rpc_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/agentwire/agentwire/jsonrpc"
	"github.com/agentwire/agentwire/rpc"
)

// collected is a MessageWriter that keeps what it is given.
type collected struct {
	mu   sync.Mutex
	msgs []rpc.Outbound
	text []string
	fail error
}

func (c *collected) WriteMessage(m *rpc.Outbound) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.fail != nil {
		return c.fail
	}
	c.msgs = append(c.msgs, rpc.Outbound{Kind: m.Kind, ID: m.ID, Method: m.Method, Error: m.Error, Related: m.Related, Params: append([]byte(nil), m.Params...)})
	var sb strings.Builder
	if _, err := m.WriteTo(&sb); err != nil {
		return err
	}
	if sb.Len() != m.Len() || string(m.AppendTo(nil)) != sb.String() {
		panic("Len, AppendTo and WriteTo disagree")
	}
	c.text = append(c.text, sb.String())
	return nil
}

func (c *collected) lines() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.text...)
}

// A pushed connection runs a request's handler on the goroutine that
// pushed it, and hands the writer each message with its kind, id and error
// known, so a transport never decodes its own output.
func TestPushedRequestRunsOnTheCallersGoroutineAndIsDescribed(t *testing.T) {
	var out collected
	var sameGoroutine bool
	marker := make(chan struct{})
	h := rpc.Methods{
		"hello": func(ctx context.Context, req *rpc.Request) (any, error) {
			select {
			case <-marker: // closed by the caller before it pushed
				sameGoroutine = true
			default:
			}
			if err := req.Notify("progress", map[string]int{"n": 1}); err != nil {
				return nil, err
			}
			return map[string]string{"hi": "there"}, nil
		},
		"fail": func(context.Context, *rpc.Request) (any, error) {
			return nil, jsonrpc.NewError(-32602, "bad", nil)
		},
	}
	c := rpc.NewMessages(nil, &out, h, &rpc.Options{Logger: quiet})
	close(marker)
	if err := c.Receive([]byte(`{"jsonrpc":"2.0","id":7,"method":"hello"}`)); err != nil {
		t.Fatal(err)
	}
	// Returned: the handler ran here, and its messages are written.
	if !sameGoroutine {
		t.Error("the handler did not run before Receive returned")
	}
	if err := c.Receive([]byte(`{"jsonrpc":"2.0","id":"x","method":"fail"}`)); err != nil {
		t.Fatal(err)
	}
	if err := c.Receive([]byte(`{not json`)); err != nil {
		t.Fatal(err)
	}
	if err := c.EndInput(); err != nil {
		t.Fatal(err)
	}
	if err := c.Wait(); err != nil {
		t.Fatalf("Wait = %v", err)
	}
	want := []string{
		`{"jsonrpc":"2.0","method":"progress","params":{"n":1}}`,
		`{"jsonrpc":"2.0","id":7,"result":{"hi":"there"}}`,
		`{"jsonrpc":"2.0","id":"x","error":{"code":-32602,"message":"bad"}}`,
	}
	got := out.lines()
	if len(got) != 4 || strings.Join(got[:3], "\n") != strings.Join(want, "\n") {
		t.Fatalf("written:\n%s", strings.Join(got, "\n"))
	}
	m := out.msgs
	if m[0].Kind != jsonrpc.KindNotification || m[0].Method != "progress" || string(m[0].Params) != `{"n":1}` {
		t.Errorf("notification described as %+v", m[0])
	}
	if m[1].Kind != jsonrpc.KindResult || m[1].ID != "7" {
		t.Errorf("result described as %+v", m[1])
	}
	if m[2].Kind != jsonrpc.KindError || m[2].ID != `"x"` || m[2].Error == nil || m[2].Error.Code != -32602 {
		t.Errorf("error described as %+v", m[2])
	}
	if m[3].Kind != jsonrpc.KindError || m[3].ID != "" || m[3].Error.Code != jsonrpc.CodeParseError {
		t.Errorf("parse error described as %+v (want id null: empty)", m[3])
	}
	if err := c.Receive([]byte(`{"jsonrpc":"2.0","id":8,"method":"hello"}`)); !errors.Is(err, rpc.ErrInputEnded) {
		t.Errorf("Receive after EndInput = %v, want ErrInputEnded", err)
	}
}

// What the transport learned of a message reaches the handler with it:
// a message decoded once is not decoded again.
func TestReceiveDecodedHandsTheNoteToTheHandler(t *testing.T) {
	var out collected
	type learned struct{ era string }
	var seen any
	h := rpc.HandlerFunc(func(_ context.Context, req *rpc.Request) (any, error) {
		seen = req.Note()
		return true, nil
	})
	note := &learned{era: "modern"}
	serveDecoded(t, rpc.NewMessages(nil, &out, h, &rpc.Options{Logger: quiet}), `{"jsonrpc":"2.0","id":1,"method":"m","params":{}}`, note)
	if seen != note {
		t.Errorf("Note = %v, want the transport's note", seen)
	}
	if got := out.lines(); len(got) != 1 || got[0] != `{"jsonrpc":"2.0","id":1,"result":true}` {
		t.Errorf("written: %q", got)
	}
}

// A detached request lets go of its transport's note (Request.Note): a
// handler reads it before it detaches, and a stream open for hours should
// not keep what the transport decoded for its first instant.
func TestADetachedRequestLetsGoOfItsNote(t *testing.T) {
	var out collected
	type learned struct{ era string }
	var before, after any
	h := rpc.HandlerFunc(func(_ context.Context, req *rpc.Request) (any, error) {
		before = req.Note()
		err := req.Detach()
		after = req.Note()
		return true, err
	})
	note := &learned{era: "modern"}
	serveDecoded(t, rpc.NewMessages(nil, &out, h, &rpc.Options{Logger: quiet}), `{"jsonrpc":"2.0","id":1,"method":"listen","params":{}}`, note)
	if before != note {
		t.Errorf("Note before Detach = %v, want the transport's note", before)
	}
	if after != nil {
		t.Errorf("Note after Detach = %v, want nil", after)
	}
	if got := out.lines(); len(got) != 1 || got[0] != `{"jsonrpc":"2.0","id":1,"result":true}` {
		t.Errorf("written: %q", got)
	}
}

// serveDecoded pushes one decoded message with its note into c, ends its
// input and waits for it to finish.
func serveDecoded(t *testing.T, c *rpc.Conn, line string, note any) {
	t.Helper()
	raw := []byte(line)
	msg, err := jsonrpc.Decode(raw, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.ReceiveDecoded(raw, &msg, note); err != nil {
		t.Fatal(err)
	}
	c.EndInput()
	c.Wait()
}

// Options.Context is the parent of handler contexts: an HTTP request whose
// client goes away cancels its handler.
func TestContextEndsRunningHandlers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		parent, cancel := context.WithCancel(context.Background())
		var out collected
		h := rpc.HandlerFunc(func(ctx context.Context, req *rpc.Request) (any, error) {
			<-ctx.Done()
			return nil, ctx.Err()
		})
		c := rpc.NewMessages(nil, &out, h, &rpc.Options{Logger: quiet, Context: parent})
		done := make(chan struct{})
		go func() {
			c.Receive([]byte(`{"jsonrpc":"2.0","id":1,"method":"wait"}`))
			close(done)
		}()
		synctest.Wait()
		cancel()
		<-done
		c.EndInput()
		c.Wait()
		if got := out.lines(); len(got) != 1 || !strings.Contains(got[0], `"code":-32603`) {
			t.Errorf("written: %q", got)
		}
	})
}

// A connection that reads its own input refuses pushed messages.
func TestReceiveOnAReadingConnectionIsRefused(t *testing.T) {
	w := &collected{}
	c := rpc.NewMessages(blockingReader{make(chan struct{})}, w, nil, &rpc.Options{Logger: quiet})
	defer c.Close()
	if err := c.Receive([]byte(`{}`)); !errors.Is(err, rpc.ErrNotPushed) {
		t.Errorf("Receive = %v, want ErrNotPushed", err)
	}
	if err := c.EndInput(); !errors.Is(err, rpc.ErrNotPushed) {
		t.Errorf("EndInput = %v, want ErrNotPushed", err)
	}
}

type blockingReader struct{ stop chan struct{} }

func (b blockingReader) ReadMessage() ([]byte, error) {
	<-b.stop
	return nil, errors.New("closed")
}

func (b blockingReader) Close() error { close(b.stop); return nil }

// A failed WriteMessage ends output for good and the connection with it
// (guarantees C5, C6).
func TestFailedWriteMessageEndsTheConnection(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		out := &collected{fail: errors.New("client gone")}
		c := rpc.NewMessages(nil, out, nil, &rpc.Options{Logger: quiet})
		c.Receive([]byte(`{"jsonrpc":"2.0","id":1,"method":"nope"}`))
		select {
		case <-c.Done():
		case <-time.After(time.Minute):
			t.Fatal("the connection did not end after a failed write")
		}
		if err := c.Wait(); err == nil || !strings.Contains(err.Error(), "client gone") {
			t.Errorf("Wait = %v, want the write's error", err)
		}
	})
}

// Every message a connection writes says which inbound request it belongs
// to: a response its request, a notification or call made on a request's
// behalf (Request.Notify, or Conn.Notify/Call with a context derived from
// the handler's, however deeply) that request, and anything else nothing.
// A transport with several output streams routes on it.
func TestOutboundNamesTheRequestItBelongsTo(t *testing.T) {
	var out collected
	asked := &stopOnRequest{w: &out}
	other := rpc.NewMessages(nil, &collected{}, nil, &rpc.Options{Logger: quiet})
	defer other.Close()
	var c *rpc.Conn
	type key struct{}
	h := rpc.Methods{
		"work": func(ctx context.Context, req *rpc.Request) (any, error) {
			if err := req.Notify("n/request", nil); err != nil {
				return nil, err
			}
			derived, cancel := context.WithTimeout(context.WithValue(ctx, key{}, 1), time.Minute)
			defer cancel()
			if err := c.Notify(derived, "n/derived", nil); err != nil {
				return nil, err
			}
			if err := c.Notify(context.WithoutCancel(ctx), "n/detached", nil); err != nil {
				return nil, err
			}
			if err := c.Notify(context.Background(), "n/unrelated", nil); err != nil {
				return nil, err
			}
			// A context of another connection's request relates to nothing here.
			if err := other.Notify(ctx, "n/elsewhere", nil); err != nil {
				return nil, err
			}
			// The call is abandoned as soon as it is written.
			callCtx, stop := context.WithCancel(ctx)
			asked.stop = stop
			_, _ = c.Call(callCtx, "ask", nil)
			return "done", nil
		},
		"fail": func(context.Context, *rpc.Request) (any, error) {
			return nil, jsonrpc.NewError(-32602, "bad", nil)
		},
	}
	c = rpc.NewMessages(nil, asked, h, &rpc.Options{Logger: quiet})
	defer c.Close()
	if err := c.Receive([]byte(`{"jsonrpc":"2.0","id":"w1","method":"work"}`)); err != nil {
		t.Fatal(err)
	}
	if err := c.Receive([]byte(`{"jsonrpc":"2.0","id":9,"method":"fail"}`)); err != nil {
		t.Fatal(err)
	}
	out.mu.Lock()
	defer out.mu.Unlock()
	got := map[string]jsonrpc.ID{}
	for _, m := range out.msgs {
		switch m.Kind {
		case jsonrpc.KindNotification, jsonrpc.KindRequest:
			got[m.Method] = m.Related
		default:
			got["response "+string(m.ID)] = m.Related
		}
	}
	want := map[string]jsonrpc.ID{
		"n/request": `"w1"`, "n/derived": `"w1"`, "n/detached": `"w1"`, "n/unrelated": "",
		"ask": `"w1"`, `response "w1"`: `"w1"`, "response 9": "9",
	}
	for k, v := range want {
		if g, ok := got[k]; !ok || g != v {
			t.Errorf("%s: Related = %q (seen %v), want %q", k, g, ok, v)
		}
	}
	if len(got) != len(want) {
		t.Errorf("messages: %v", got)
	}
}

// stopOnRequest passes messages on and calls stop once a request is written.
type stopOnRequest struct {
	w    rpc.MessageWriter
	stop func()
}

func (s *stopOnRequest) WriteMessage(m *rpc.Outbound) error {
	err := s.w.WriteMessage(m)
	if m.Kind == jsonrpc.KindRequest && s.stop != nil {
		s.stop()
	}
	return err
}
