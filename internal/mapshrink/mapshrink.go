// Package mapshrink gives back the memory of a Go map that has emptied:
// a map keeps the room of the largest size it ever had, and a table that
// once held 10,000 sessions or connections must not keep it after they
// end.
package mapshrink

// Shrunk returns m, or a copy of it made to measure when it holds a
// quarter or less of the most it has held (*peak, which it then resets);
// nil when it is empty. Copying only at a quarter keeps the cost of a
// deletion constant, amortised. Tables of fewer than 64 entries are left
// as they are.
func Shrunk[K comparable, V any](m map[K]V, peak *int) map[K]V {
	n := len(m)
	if *peak < n {
		*peak = n
	}
	if *peak < 64 || n > *peak/4 {
		return m
	}
	*peak = n
	if n == 0 {
		return nil
	}
	out := make(map[K]V, n)
	for k, v := range m {
		out[k] = v
	}
	return out
}
