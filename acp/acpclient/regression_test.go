package acpclient_test

import (
	"context"
	"testing"
	"time"

	"github.com/agentwire/agentwire/acp/acpclient"
)

// The bug: a NewSession made from an update handler, as the last
// session/new in flight with updates parked, took the delivery lock its own
// goroutine already held, and the whole connection hung.
func TestRegressionANewSessionFromAnUpdateHandlerDoesNotHangTheConnection(t *testing.T) {
	nested := make(chan error, 1)
	var c *acpclient.Conn
	handler := acpclient.UpdateFunc(func(ctx context.Context, u *acpclient.Update) error {
		if u.Text() == "spawn" {
			_, err := c.NewSession(ctx, acpclient.SessionConfig{Cwd: t.TempDir()})
			nested <- err
		}
		return nil
	})
	c, a := dialRaw(t, &acpclient.Options{Updates: handler}, initResult)
	s1 := openRaw(t, c, a, acpclient.SessionConfig{})
	_ = s1
	first := make(chan error, 1)
	go func() {
		_, err := c.NewSession(context.Background(), acpclient.SessionConfig{Cwd: t.TempDir()})
		first <- err
	}()
	newA := a.expect("session/new")
	a.send(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"zz","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"parked"}}}}`)
	a.send(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"spawn"}}}}`)
	newB := a.expect("session/new")
	// A returns only after the "spawn" update, sent before its answer, was
	// handled, and that handler waits for B.
	a.reply(newA, `{"sessionId":"a"}`)
	a.reply(newB, `{"sessionId":"b"}`)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-nested:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the nested NewSession never returned")
	}
	// The connection still works.
	a.send(`{"jsonrpc":"2.0","id":1,"method":"session/request_permission","params":{"sessionId":"b","toolCall":{},"options":[{"optionId":"r","name":"No","kind":"reject_once"}]}}`)
	if l := a.next(); !contains(l, `"optionId":"r"`) {
		t.Fatalf("got %s", l)
	}
	if st := c.Stats(); st.OrphanUpdates != 1 {
		t.Fatalf("the parked update for an unknown session: orphans %d", st.OrphanUpdates)
	}
}

// The bug: after an agent restart, the old process's counted but never
// handled updates were written off by moving the handled count forward,
// which the new process's first updates could overtake; calls then
// returned before their updates. A restarted agent now gets a fresh
// count, and sessions made on it are not lost.
func TestRegressionCallsOnARestartedAgentStillReturnAfterTheirUpdates(t *testing.T) {
	k := &collector{}
	c := start(t, "crashy", &acpclient.Options{Updates: k, Transport: restartOnce()})
	s, err := c.NewSession(t.Context(), acpclient.SessionConfig{Cwd: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	s.Prompt(t.Context(), textBlock("crash"))
	deadline := time.Now().Add(10 * time.Second)
	var s2 *acpclient.Session
	for time.Now().Before(deadline) {
		if s2, err = c.NewSession(t.Context(), acpclient.SessionConfig{Cwd: t.TempDir()}); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if s2 == nil {
		t.Fatalf("no session on the restarted agent: %v", err)
	}
	base := len(k.of(s2.ID())) // the new process may reuse the lost session's id
	for i := range 20 {
		if _, err := s2.Prompt(t.Context(), textBlock("n 50")); err != nil {
			t.Fatal(err)
		}
		if n := len(k.of(s2.ID())) - base; n != 50*(i+1) {
			t.Fatalf("prompt %d returned with %d of its chunks handled", i, n-50*i)
		}
	}
	if s2.Err() != nil {
		t.Fatalf("a session of the new process was lost: %v", s2.Err())
	}
}
