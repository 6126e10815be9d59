package refusal

import (
	"log/slog"
	"sync"
	"time"
)

// DefaultWindow is how long a burst's log line stands for the refusals that
// follow it.
const DefaultWindow = 10 * time.Second

// Log writes one line per burst of refusals of one limit.
type Log struct {
	// Logger receives the lines (at Warn). Nil means slog.Default().
	Logger *slog.Logger
	// Window is the quiet time after a line during which further refusals
	// are only counted. Zero means DefaultWindow.
	Window time.Duration
	// Now is the clock. Nil means time.Now.
	Now func() time.Time

	mu         sync.Mutex
	last       time.Time // when the last line was written; zero before the first
	suppressed int64
}

// Refused records one refusal: it writes msg with attrs when no line was
// written within the window, adding "suppressed" (the refusals counted
// without a line since the previous one), and otherwise only counts it. It
// reports whether a line was written.
func (l *Log) Refused(msg string, attrs ...any) bool {
	now := time.Now
	if l.Now != nil {
		now = l.Now
	}
	window := l.Window
	if window <= 0 {
		window = DefaultWindow
	}
	t := now()
	l.mu.Lock()
	if !l.last.IsZero() && t.Sub(l.last) < window {
		l.suppressed++
		l.mu.Unlock()
		return false
	}
	suppressed := l.suppressed
	l.suppressed = 0
	l.last = t
	l.mu.Unlock()
	logger := l.Logger
	if logger == nil {
		logger = slog.Default()
	}
	if suppressed > 0 {
		attrs = append(attrs, "suppressed", suppressed)
	}
	logger.Warn(msg, attrs...)
	return true
}
