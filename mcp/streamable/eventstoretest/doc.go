// Package eventstoretest checks that a streamable.EventStore keeps the
// contract the session handler relies on to resume a dropped event stream
// (Last-Event-ID) without losing or repeating a message: event ids unique
// within their session and safe in an SSE id field and a header; a replay
// that sends exactly the later events of the id's own stream, in order,
// without priming events, and that names the stream; ErrUnknownEvent for
// any id the session did not issue or has forgotten; send's error ending
// the replay; EndStream and EndSession forgetting exactly what they name;
// a copy of the data kept; concurrent use. A store that is also a
// streamable.EventFollower is checked to follow a stream until its
// response, its context or its send ends it.
//
// streamable.MemoryEvents and the Redis store run it; a store of your own
// can too:
//
//	func TestMyEventStore(t *testing.T) {
//		eventstoretest.Run(t, func(t *testing.T) streamable.EventStore { return openMine(t) })
//	}
//
// The suite stays far below any sensible bound (a few hundred events of
// under 200 bytes per session, under 100 per stream) and never waits on a
// clock, so a store opened with its defaults passes it. What a store
// adds beyond the contract (its bounds, what it drops and when, what it
// counts) its own tests check.
package eventstoretest
