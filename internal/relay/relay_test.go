package relay_test

import (
	"runtime"
	"slices"
	"testing"
	"testing/synctest"

	"github.com/agentwire/agentwire/internal/relay"
)

// Values arrive in order, and Finish returns after the last one.
func TestDeliversInOrderBeforeFinishReturns(t *testing.T) {
	var got []int
	r := relay.New(16, func(v int) { got = append(got, v) }, nil)
	for i := range 10 {
		r.Send(i)
	}
	r.Finish()
	if !slices.Equal(got, []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}) {
		t.Fatalf("delivered %v", got)
	}
	r.Send(10) // after Finish: dropped, no panic
}

// A value that finds the bound reached is dropped; full decides whether
// the relay goes on.
func TestFullDropsAndMayStop(t *testing.T) {
	for _, stop := range []bool{false, true} {
		synctest.Test(t, func(t *testing.T) {
			release := make(chan struct{})
			var got []int
			fulls := 0
			r := relay.New(2, func(v int) { <-release; got = append(got, v) }, func() bool { fulls++; return stop })
			r.Send(1) // taken by the delivering goroutine, which waits
			synctest.Wait()
			r.Send(2)
			r.Send(3) // the two places are taken
			r.Send(4) // dropped
			r.Send(5) // dropped too, or not taken at all once stopped
			close(release)
			r.Finish()
			want, wantFulls := []int{1, 2, 3}, 2
			if stop {
				wantFulls = 1
			}
			if !slices.Equal(got, want) || fulls != wantFulls {
				t.Errorf("stop=%v: delivered %v with %d full calls, want %v and %d", stop, got, fulls, want, wantFulls)
			}
		})
	}
}

// An idle relay holds no goroutine: one delivers a burst and ends with
// it. A bridged listen stream keeps its relay for as long as it is open
// (regression: each held a goroutine and a 256-value buffer, 8 KiB, for
// nothing while idle).
func TestAnIdleRelayHoldsNoGoroutine(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := runtime.NumGoroutine()
		var got []int
		r := relay.New(256, func(v int) { got = append(got, v) }, nil)
		if n := runtime.NumGoroutine(); n != base {
			t.Fatalf("a new relay runs %d goroutines", n-base)
		}
		for burst := range 3 {
			r.Send(2 * burst)
			r.Send(2*burst + 1)
			synctest.Wait()
			if n := runtime.NumGoroutine(); n != base {
				t.Fatalf("after burst %d the relay runs %d goroutines", burst, n-base)
			}
		}
		r.Finish()
		if !slices.Equal(got, []int{0, 1, 2, 3, 4, 5}) {
			t.Fatalf("delivered %v", got)
		}
	})
}
