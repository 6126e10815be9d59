package wait_test

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/agentwire/agentwire/internal/wait"
)

func TestClosedWithinTheBound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ch := make(chan struct{})
		go func() {
			time.Sleep(time.Second)
			close(ch)
		}()
		start := time.Now()
		if !wait.Closed(ch, 2*time.Second) {
			t.Fatal("Closed = false, want true: the channel closed after 1s")
		}
		if d := time.Since(start); d != time.Second {
			t.Errorf("returned after %v, want 1s", d)
		}
	})
}

func TestNotClosedReturnsAtTheBound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		if wait.Closed(make(chan struct{}), 3*time.Second) {
			t.Fatal("Closed = true for a channel nobody closes")
		}
		if d := time.Since(start); d != 3*time.Second {
			t.Errorf("returned after %v, want the 3s bound", d)
		}
	})
}

func TestAlreadyClosedReturnsAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ch := make(chan struct{})
		close(ch)
		start := time.Now()
		if !wait.Closed(ch, time.Hour) || time.Since(start) != 0 {
			t.Fatal("a closed channel must be seen at once")
		}
	})
}
