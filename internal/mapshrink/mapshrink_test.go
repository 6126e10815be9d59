package mapshrink

import "testing"

// A map is copied to measure once it falls to a quarter of its peak (and
// the peak starts again from there), given up when it empties from a
// large peak, and kept as it is while small or above a quarter.
func TestShrunkCopiesAtAQuarterOfThePeak(t *testing.T) {
	m, peak := map[int]int{}, 0
	for i := range 100 {
		m[i] = i
		m = Shrunk(m, &peak)
	}
	if peak != 100 {
		t.Fatalf("peak %d, want 100", peak)
	}
	for i := range 75 {
		delete(m, i)
		m = Shrunk(m, &peak)
	}
	if len(m) != 25 || peak != 25 {
		t.Fatalf("at a quarter: len %d, peak %d; want 25, 25 (copied, peak reset)", len(m), peak)
	}

	big, p := map[int]int{}, 0
	for i := range 64 {
		big[i] = i
	}
	Shrunk(big, &p)
	clear(big)
	if got := Shrunk(big, &p); got != nil {
		t.Fatalf("an emptied map of peak 64 kept: %v", got)
	}

	small, q := map[int]int{1: 1}, 0
	Shrunk(small, &q)
	delete(small, 1)
	if Shrunk(small, &q) == nil {
		t.Fatal("a small map was given up")
	}
}
