// Package refusal logs refusals of a limit once per burst.
//
// A server under attack refuses thousands of requests a second; logging each
// one would turn the attack into a disk and CPU problem of its own. A Log
// writes the first refusal of a burst at once (so an operator sees the limit
// being hit the moment it happens) and then at most one line per Window,
// carrying how many refusals were suppressed since the previous line. The
// caller still counts every refusal in its own Stats; the log is the alarm,
// the counters are the figures.
//
// A Log is safe for concurrent use. Its clock is injectable (Now) so that
// tests drive bursts without sleeping.
package refusal
