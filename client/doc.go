// Package client is the calling side of a JSON-RPC connection: over any
// stream (New), or to a stdio server it starts and looks after (Start).
//
// # Calls
//
// Call and Notify may be used from any number of goroutines; responses are
// matched by id and any number of calls can be in flight (guarantee K1). Reading
// and writing are independent, and a call never writes on its caller's
// goroutine, so a server that pauses its input cannot deadlock the client or
// hold a caller past its context.
//
// When a call's context ends first, Call returns the context's error at
// once, forgets the id and sends the cancellation notification without
// waiting for it to be written (guarantee K2): notifications/cancelled with
// requestId and reason by default, $/cancel_request with Options.Cancel =
// &rpc.ACPCancel, nothing with NoCancel. A response that crosses the cancel on
// the wire is dropped and counted (Stats.LateResponses).
//
// # Bad output from the server
//
// A line on the server's stdout that is not a valid message (a stray debug
// print), or a response to no call of ours, is logged, counted
// (Stats.Violations, Stats.UnknownResponses) and offered to OnViolation; it
// is never fatal and never answered (guarantee K3). Options.Strict makes it fatal.
//
// # A server that dies
//
// When the server exits or crashes, every pending call fails promptly with
// a *ConnectionLostError that matches ErrConnectionLost and carries the exit
// status and the stderr tail (guarantee K5). With a RestartPolicy the client
// starts the server again (attempts, doubling backoff), calls OnRestart so
// that anything tied to the old process can be set up again, and retries
// once the calls marked Retryable (read-only) that the crash failed (guarantee
// K6). Without one, the client stays failed. Stats counts what happened:
// servers lost before Close (Lost), restarts that succeeded (Restarts),
// that failed to start or to hand-shake (RestartsFailed), and losses that
// found the policy used up (RestartsExhausted).
//
// # Closing
//
// Close runs the process package's shutdown ladder (close stdin, grace,
// SIGTERM to the group, grace, SIGKILL) and returns how it ended. Requests
// still in flight may be answered while the server drains, because EOF on
// its stdin is a half-close.
//
// Numbers such as C3 cite the guarantees in the repository's
// docs/guarantees.md.
package client
