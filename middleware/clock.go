package middleware

import "time"

// Clock is the time a Timeouts or a Limiter reads and waits on. Nil in
// their options means the time package's clock; a test passes its own, or
// runs in a testing/synctest bubble, where the time package's clock is the
// bubble's.
type Clock interface {
	// Now returns the current time. Only differences between two of its
	// values are used.
	Now() time.Time
	// AfterFunc calls f on a goroutine of its own once d has passed, as
	// time.AfterFunc does.
	AfterFunc(d time.Duration, f func()) Timer
}

// Timer is what Clock.AfterFunc returns; *time.Timer is one.
type Timer interface {
	Stop() bool
	Reset(d time.Duration) bool
}

// systemClock is the time package's clock.
type systemClock struct{}

func (systemClock) Now() time.Time                            { return time.Now() }
func (systemClock) AfterFunc(d time.Duration, f func()) Timer { return time.AfterFunc(d, f) }

func clockOr(c Clock) Clock {
	if c == nil {
		return systemClock{}
	}
	return c
}
