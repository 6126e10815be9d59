package client_test

import (
	"errors"
	"testing"
	"time"

	"github.com/agentwire/agentwire/client"
)

func TestDoneClosesWhenAServerWithoutARestartPolicyIsLost(t *testing.T) {
	c := startClient(t, "crash", nil)
	select {
	case <-c.Done():
		t.Fatal("Done before anything happened")
	default:
	}
	if err := c.Err(); err != nil {
		t.Fatalf("Err = %v on a live client", err)
	}
	c.Call(t.Context(), "crash", nil)
	select {
	case <-c.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("Done not closed after the server was lost for good")
	}
	if !errors.Is(c.Err(), client.ErrConnectionLost) {
		t.Fatalf("Err = %v", c.Err())
	}
}

func TestDoneClosesOnClose(t *testing.T) {
	c := startClient(t, "echo", nil)
	c.Close()
	<-c.Done()
	if !errors.Is(c.Err(), client.ErrClosed) {
		t.Fatalf("Err = %v", c.Err())
	}
}

func TestCloseOutputLetsTheServerAnswerWhatIsInFlightAndThenExit(t *testing.T) {
	c := startClient(t, "echo", nil)
	res := make(chan error, 1)
	go func() {
		_, err := c.Call(t.Context(), "sleep", map[string]any{"ms": 100})
		res <- err
	}()
	time.Sleep(20 * time.Millisecond) // the call is on the wire
	if err := c.CloseOutput(); err != nil {
		t.Fatal(err)
	}
	if err := <-res; err != nil {
		t.Fatalf("the call in flight at end of input: %v", err)
	}
	<-c.Process().Exited()
}
