package main

import "slices"

// roundRatio is the median over rounds of f(s)/f(ref), each pair measured
// in the same round, with the lowest and highest; ok is false when no round
// has both (or the reference is zero in all).
func roundRatio[T any](samples, ref map[int]T, f func(T) float64) (med, lo, hi float64, ok bool) {
	var vals []float64
	for round, s := range samples {
		if r, found := ref[round]; found && f(r) > 0 {
			vals = append(vals, f(s)/f(r))
		}
	}
	if len(vals) == 0 {
		return 0, 0, 0, false
	}
	slices.Sort(vals)
	return vals[len(vals)/2], vals[0], vals[len(vals)-1], true
}

// roundMedian is the median over rounds of f, 0 with no rounds.
func roundMedian[T any](samples map[int]T, f func(T) float64) float64 {
	var vals []float64
	for _, s := range samples {
		vals = append(vals, f(s))
	}
	if len(vals) == 0 {
		return 0
	}
	slices.Sort(vals)
	return vals[len(vals)/2]
}
