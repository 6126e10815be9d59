// Package wait has the one bounded wait agentwire's runtimes share: for a
// channel to close, within a duration. Its timer comes from the time
// package, so it runs on testing/synctest's fake clock like every other
// bound (guarantee C7).
package wait

import "time"

// Closed reports whether ch is closed within d. It makes no timer when ch
// is already closed: a connection that shuts down with nothing running
// (one HTTP request's) pays for no timer.
func Closed(ch <-chan struct{}, d time.Duration) bool {
	select {
	case <-ch:
		return true
	default:
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ch:
		return true
	case <-t.C:
		return false
	}
}
