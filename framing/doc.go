// Package framing turns a byte stream into newline-delimited messages and
// back, with bounded memory in both directions. It knows nothing of JSON.
//
// # Input: LineReader
//
// LineReader returns one '\n'-terminated line at a time (guarantee W1). It strips
// one '\r' before the '\n', returns a final line that has no '\n' at EOF, and
// holds at most the limit (16 MiB by default) plus one read buffer: a longer
// line is read and forgotten up to its '\n' without being buffered, and
// reported as *LineTooLongError; the next line is returned normally (guarantee
// W4). HasLine tells whether another line is already buffered, which is how
// the runtime knows it is about to wait for input.
//
// # Output: Output
//
// Output is the bounded outbound queue of a connection (guarantees C3, C5, C6):
//
//   - At most QueueLimit bytes (1 MiB) wait behind the block being written;
//     a single larger message is accepted into an empty queue. A producer
//     waits for room before it copies a byte, so a peer that never reads
//     cannot make the queue grow.
//   - There is no writer goroutine. Whoever finds bytes queued and nobody
//     writing becomes the writer, writes everything queued (swapping two
//     buffers, so producers keep appending meanwhile) and returns. Enqueue
//     without Flush lets a caller batch several messages into one write.
//   - Writes are split into chunks of at most WriteChunk bytes (16 KiB).
//     While running, a slow reader just holds writers back: that is the
//     backpressure, and there is no deadline. Once CloseWithin starts
//     draining, every chunk must complete within the idle timeout (each
//     success resets it, so a slow but live reader is not cut off) and the
//     drain within the total timeout; otherwise the stream is closed.
//   - After a failed or interrupted write nothing else is written: a
//     half-written message is never followed by another.
//   - QueuedBytes reports the bytes waiting now, and Blocked the time
//     callers have spent waiting for room (the backpressure felt, summed
//     over callers); the clock is read only by a caller that finds the
//     queue full.
//
// Close uses the standalone bounds: 5 s without progress, 10 s in all. The
// stream is closed with CloseWrite when it has one (a socket keeps its read
// half), otherwise with Close; an interrupted write is unblocked with a past
// write deadline or by closing the stream.
//
// # Timers
//
// The drain deadlines use the time package's timers, so tests run them
// under testing/synctest with a fake clock (guarantee C7).
//
// Numbers such as C3 cite the guarantees in the repository's
// docs/guarantees.md.
package framing
