// Package redisstate keeps what a fleet of agentwire MCP servers shares
// in Redis, so that the instances behind a load balancer serve as one:
// the task store (mcp/tasks.Store), the bus that carries list changes
// and resource updates to every instance's listen streams (server.Bus),
// and the ring of keys that seal multi-round-trip requestState
// (server.KeyRing), and the legacy Streamable HTTP sessions with their
// resumable event streams (streamable.SessionStore and
// streamable.EventStore), so that a client resumes a dropped stream, or
// goes on with its session, through any instance. It is a module of its
// own: a server that runs as one process does not build go-redis.
//
// # Use
//
// One State per process, over one go-redis client, shared by every
// Server of the process:
//
//	rdb := redis.NewClient(&redis.Options{Addr: "redis:6379", ContextTimeoutEnabled: true})
//	st := redisstate.New(rdb, nil)
//	srv := server.New(info, &server.Options{
//		Tasks:     &server.TaskOptions{Store: st.Tasks()},
//		Bus:       st.Bus(),
//		StateKeys: st.Keys(nil),
//	})
//	...
//	srv.Shutdown(ctx) // the handlers record how their tasks ended
//	st.Close()        // then the State's goroutines stop
//	rdb.Close()
//
// Make the client with ContextTimeoutEnabled: go-redis otherwise bounds a
// command's reads and writes by its own ReadTimeout and WriteTimeout, not
// by the context, and Options.OpTimeout then bounds only the wait for a
// connection, the dial and the retries (enough for a Redis that refuses
// connections, not for one that hangs).
//
// # What is shared
//
// Everything lives under Options.Prefix ("agentwire:" by default):
//
//	task:<id>               the task: a head (its revision, and whether it has ended or
//	                        was asked to cancel) and its JSON (PEXPIRE once it has ended)
//	owner:<owner>\x00<scope> the owner index: a sorted set of ids by creation sequence
//	                        (an owner's tasks whatever their scope; for no owner, one scope's)
//	seq, epoch              the creation sequence (INCR), and the epoch made with its first value
//	live                    sorted set: live tasks by lease deadline (unix ms, Redis's clock)
//	ended                   sorted set: ended tasks by expiry, for the owner indexes' cleanup
//	statekeys               hash: current, previous, rotated_at (unix ms, Redis's clock)
//	events, bus             Pub/Sub channels: task changes, and the servers' bus
//	ev:<session>:<stream>   a resumable event stream: a Redis Stream of its events (field d:
//	                        the JSON-RPC message, empty for a priming event), PEXPIRE Retain
//	evs:<session>           sorted set: the ids of the session's streams by last append, for EndSession (PEXPIRE Retain; members older than Retain dropped on append)
//	sess:<id>               a legacy session: hash rec (its SessionRecord, JSON) and holder
//	                        (the instance serving it), PEXPIRE of the ttl of its last Save or Touch
//	sessions                Pub/Sub channel: session changes, {"id","holder"} (holder "": ended)
//
// Create runs one Lua script: SET NX of the record (tasks.ErrExists when
// the id is taken), INCR of the sequence, ZADD to the owner index, ZADD
// to the live set with the lease deadline, and PUBLISH of the event; it
// returns once Redis has answered, so a Get through any instance finds
// the task the moment its id is handed out (durable creation, as far as
// the Redis deployment's persistence and replication make it durable).
// Get is a GET; a missing record is tasks.ErrNotFound.
//
// Update is optimistic: WATCH the record, GET it, call f on a copy, then
// MULTI, SET (the revision one more), and (when it has ended) PEXPIRE,
// ZADD ended and ZREM live, PUBLISH, EXEC. When another writer changed
// the record in between, EXEC fails and the update is tried again on the
// new record (f is called again; at most 20 tries with a short random
// back-off, then an error, counted in Stats.Conflicts and logged). f's
// error writes nothing. An ended task stays ended: an update that would
// move it out of its terminal status keeps the status. The first update
// that ends a task sets its EndedAt (when f left it zero).
//
// List reads the owner index after the cursor's sequence
// (ZRANGEBYSCORE), then the records (MGET); ids whose record has expired
// are skipped and taken out of the index. The cursor is opaque (the
// base64 of the sequence's epoch and a sequence number), so tasks ending
// or expiring mid-listing do not upset it; a cursor List did not make is
// tasks.ErrInvalidCursor, and a cursor of another epoch (Redis lost its
// data, and the sequence started again from 1) lists from the start. A
// page that meets many expired ids ends after a few round trips with a
// cursor to go on from.
//
// # Consistency
//
// Redis executes each script and transaction alone, so every write of a
// task is atomic and sees the last one: with one Redis primary the
// records are linearizable. Events are published inside the script or
// the transaction that writes, and each carries the task's revision. An
// event carries the task whole when its JSON is at most 64 KiB; a larger
// one carries its id and revision, and the receiving State reads the
// task, which may be a later version: the older events of that task
// still on their way are then not delivered (Stats.EventsSuperseded).
// So a subscriber sees the versions of a task in the order they were
// written, some skipped, never one older than one it has seen. The
// version delivered ahead of the events is remembered per task for at
// least 10 s (and until the events queued before it are dispatched), for
// at most 65,536 tasks at once; past that the oldest are forgotten early
// (Stats.OrderForgotten, logged). A task that has gone by the time it
// is read is not told.
//
// Pub/Sub is at most once. Events published while an instance's Pub/Sub
// connection is down are lost to it: go-redis reconnects and
// resubscribes (also after a failed ping), the State counts it
// (Stats.Resubscribed) and rechecks at once the tasks running here, and
// the server's runtime reads a waiting task again every 2 s on its own.
// A lost cancellation still reaches the instance running the task: each
// lease renewal (every Lease/3) also reads the head of the records of
// the tasks running here, and one cancelled or ended elsewhere is read
// and told to the local subscribers, in order with the events.
//
// The store is a tasks.Selective: every event names its task before its
// record, so a subscriber is asked by id whether it keeps the task (the
// server keeps the tasks it runs or watches) before anything is decoded
// or read. An event no subscriber keeps is only counted
// (Stats.EventsReceived): an instance of a large fleet does not decode
// every change of every task, nor read the tasks of large events.
//
// Redis replication is asynchronous: a failover may lose writes Redis
// had acknowledged (a task created just before, an answer). Use AOF and
// replicas as durability requires; redisstate does not issue WAIT.
//
// # Leases: no task runs forever or vanishes
//
// A task created through a State runs on that instance (the server runs
// the handler where it created the task). The State renews the lease of
// each of its live tasks every Lease/3, by a script that reads only the
// head of each record: a live task gets a new deadline, Redis's TIME
// plus Lease (put back if Redis lost it: Stats.LeasesRestored, logged);
// an ended one is forgotten. A lease a sweeper has taken is not given
// back: the sweeper ends the task in the same script. A renewal that
// fails is tried again every Lease/20 (50 ms to 1 s) until it succeeds,
// and each batch of 500 is tried whatever the others did.
//
// Every State also sweeps every Lease/3: a task whose lease deadline has
// passed by Redis's clock is failed, unless it ended meanwhile, with the
// statusMessage "the server instance running the task was lost" and the
// error {"code":-32603,"message":"Internal error: the server instance
// running the task was lost"}, which starts its TTL. The check of the
// lease and of the record's revision and the write are one script, so a
// renewal or an update that lands first wins. A sweeper skips the tasks
// running on its own instance, and takes no lapsed lease at all until
// Redis has answered it for a whole Lease (and it is a Lease old): after
// an outage every live instance has had a Lease to renew (Stats.SweepsHeld,
// logged once per outage). So the tasks of an instance that was killed
// are failed within about Lease + Lease/3 (15 s + 5 s by default) of its
// death, or of the end of a Redis outage it died in, and then expire as
// any ended task does; the tasks of live instances survive an outage of
// any length, provided each instance's client reaches Redis again within
// the Lease (go-redis dials again at once, or, after many failed dials,
// at its probe once a second). An instance cut off from Redis while the
// others are not looks dead to them: its tasks are failed after the
// Lease, and when it is back its renewal finds them ended and tells its
// handlers (the server stops them with server.ErrTaskEnded).
//
// Leases use only the Redis server's clock, not the instances'. A step
// of that clock, or a failover to a replica whose clock differs, moves
// every deadline by the difference: forward by less than two thirds of
// Lease lapses none (a failover breaks the connections, which holds the
// sweepers for a Lease anyway). Keep the Redis hosts' clocks in step
// (NTP).
//
// Ended tasks expire by Redis (PEXPIRE of what remains of their TTL,
// counted by the clock of the State that ended them, Options.Now). The
// sweepers take expired tasks out of the owner indexes by Redis's clock,
// and only once their records are gone (an entry found due whose record
// lives is put back at the record's own expiry), so that 10,000 ended
// tasks leave nothing behind once their TTL has passed.
//
// # Sessions and resumable streams
//
// A Streamable HTTP endpoint that keeps legacy sessions
// (streamable.SessionOptions) shares them, and the event streams that
// make their SSE streams resumable, through a State:
//
//	h := streamable.NewHandler(srv, &streamable.Options{Sessions: &streamable.SessionOptions{
//		Events: st.Events(nil),
//		Store:  st.Sessions(),
//	}})
//
// Each stream of a session is a Redis Stream, ev:<session>:<stream>.
// Append is one transaction: XADD with MAXLEN ~ MaxEventsPerStream (1000;
// Redis trims whole nodes of its radix tree, so it may keep up to about
// 100 more), PEXPIRE Retain (5 min) of the stream, and ZADD of the stream
// (scored by the time) to the session's index, evs:<session>, with the
// same PEXPIRE and the removal of members older than Retain: no key is
// left without an expiry, a stream lasts Retain after its last event, and
// the index names what is still there.
// The event id is "<stream>_<XADD id>"; stream ids are base64url and may
// hold '_', so it is read at the last '_', and an entry id that is not
// "<ms>-<seq>" in canonical decimal names nothing. A priming event is an
// entry whose field is empty; it is never replayed, but it is the point a
// client resumes from.
//
// Replay reads in batches of 128, each one script: if the Last-Event-ID's
// entry is no longer in the stream, the events after it may be gone and
// the replay is streamable.ErrUnknownEvent; otherwise XRANGE from just
// after it (exclusive ranges: Redis 6.2). The check is exact because Redis
// trims a stream oldest first and expires it whole: an entry still there
// means that everything after it is too. So a client never silently misses
// an event: it resumes exactly, or its resumption is refused. An id of a
// stream the session does not have (the stream's key is the session's) is
// unknown too. EndStream (the stream will carry nothing more: its
// request was cancelled or left unanswered)
// empties the stream (XTRIM MAXLEN 0) and leaves the empty key for at most
// 10 s: it keeps the stream's last entry id, so that an Append to the same
// stream id meanwhile is numbered after it, where a new stream would be
// numbered from Redis's clock and could issue an ended event's id again
// within the same millisecond. EndSession deletes every stream the
// session's index names, then the index.
//
// Follow lets the instance a client reconnected to relay a stream whose
// request still runs on another: it reads as Replay does, then waits in
// XREAD BLOCK (FollowWait, 1 s) for the next entry, reads again through
// the checking script (so that an entry trimmed between the two reads is
// a gap, not a loss), and returns once it has sent a JSON-RPC response.
// A blocked read is not interrupted, so it runs on a goroutine of its
// own: Follow returns the moment its context ends, and the read ends
// within FollowWait. Each Follow holds one of the client's pooled
// connections while it waits, so MaxFollows (half the client's PoolSize,
// or 16) bounds them, a read left running counted until it ends; past it
// Follow fails with ErrTooManyFollows.
//
// A session's record is a hash, sess:<id>: rec, the
// streamable.SessionRecord as JSON, and holder, the instance that serves
// it, with the PEXPIRE the handler asks for. Save replaces both (DEL,
// HSET, PEXPIRE and, for a record with a holder, PUBLISH of
// {"id","holder"} on the sessions channel, in one transaction); Touch is
// one script that sets the expiry and returns the holder, so that an
// instance whose session was taken over learns it at its next touch;
// Load reads rec, and Delete is a DEL and a PUBLISH with holder "". The
// store is a streamable.SessionWatcher: WatchSessions delivers the
// channel's messages (read on a Pub/Sub connection of the store's, made
// at the first watch; a message that is not one Save or Delete can have
// published is dropped and logged) through a bounded queue per watcher
// (EventBuffer, EventBufferBytes), so that the previous holder of a
// session taken over or deleted elsewhere drops its copy at once. Pub/Sub
// is at most once: a message lost while the connection is down leaves it
// to the holder's next touch. A missing record is streamable.ErrUnknownSession. A record that is
// not one Save can have written (not JSON, another session's id, no
// protocol version, restore messages that are not JSON objects) is an
// error, never a panic (Stats.SessionsCorrupt, logged). An id that no
// handler can have minted (empty, longer than 256 bytes, not visible
// ASCII) is unknown without a command to Redis. Errors never repeat a
// session id: it is a client's header, and as good as a password to the
// session.
//
// The fleet's takeover of a session (which instance rehydrates a session
// it does not hold, and how the previous holder stops) is the handler's;
// the store gives it an atomic read of the holder with every touch, and
// the news of every change of holder.
//
// # Redis requirements
//
//   - maxmemory-policy noeviction (or volatile-*, which evicts only ended
//     tasks early). Under allkeys-* Redis may evict a lease (a renewal
//     puts it back), the sequence or the keys; a State warns at its start
//     when it sees such a policy. A full Redis refuses writes: ErrFull.
//   - Redis 5 or later: the scripts read TIME before they write, which
//     needs scripts replicated by their effects (the default since 5).
//     Redis 6.2 or later for the event store (Events): its replay reads
//     exclusive ranges of a stream.
//   - On Redis Cluster, a prefix that is a hash tag (below).
//
// # An empty Redis after a restart
//
// A Redis restarted without persistence (or a failover to an empty
// replica) has lost every task: polls get "unknown task"; the handlers
// still running on an instance run to their end, and their outcomes are
// dropped (ErrNotFound). Tasks created after start a new creation
// sequence, in a new epoch: List cursors handed out before list from the
// start. The key ring is made anew by the first instance that reads it:
// an instance that held a key goes on signing with it for Refresh +
// OpTimeout and verifies it after, while the new key verifies at once,
// so a multi-round-trip request in flight fails only where it lands on
// an instance that never held the old key.
//
// # Failure modes
//
//   - Redis unreachable: every method fails within about OpTimeout with
//     a wrapped error (a Redis that refuses memory for a write, OOM, is
//     tasks.ErrFull), counted in Stats.RedisErrors and logged at most
//     once a second. The server then runs an optional task-augmented
//     call in its request, and refuses one of a tool that requires a
//     task (-32000). Subscribe never needs Redis: it registers locally.
//     Tasks stay as they are: no sweeper takes a lease meanwhile, nor for
//     a Lease after.
//   - Redis hung (accepting, not answering): the same, given a client
//     with ContextTimeoutEnabled; a Pub/Sub connection that does not
//     answer a ping within one beat (Lease/3, at most 5 s) is replaced.
//   - Redis back: the Pub/Sub connection is subscribed again
//     (Stats.Listening), the leases are renewed within Lease/20 (at most
//     a second) of the client reaching Redis, the scripts are loaded again
//     on their first use (EVALSHA falls back to EVAL), and a Lease later
//     the sweepers take lapsed leases again.
//   - An instance killed: its tasks are failed by the others' sweepers
//     (above); its bus messages and events in flight are lost.
//   - The event and session stores, Redis unreachable: Append fails and
//     the handler sends the message live, not resumable; Replay and
//     Follow fail (an error that is not streamable.ErrUnknownEvent);
//     Load and Touch fail with an error that is not
//     streamable.ErrUnknownSession, so that an outage is never taken for a
//     session that has ended.
//   - A store or an answer that cannot be written: the caller gets the
//     error. A task's outcome that the server could not store leaves the
//     task live and its lease renewed while its instance lives.
//
// # Bounds
//
// Every limit has a default, a counter in Stats and a log line when it
// refuses or drops something:
//
//   - MaxTaskBytes (8 MiB) bounds one task's payload (tasks.Task.Size):
//     a Create or Update past it is tasks.ErrTooLarge and writes nothing
//     (Stats.TooLarge). The number and the bytes of tasks are bounded by
//     Redis's maxmemory (a full Redis refuses with ErrFull), the ended
//     ones by their TTL, and the live ones by each server's
//     TaskOptions.MaxRunning; unlike tasks.Memory, the store evicts
//     nothing early.
//   - An Update tries at most 20 times against other writers
//     (Stats.Conflicts); so does a sweeper failing a lost task.
//   - Each local subscriber (of tasks or of the bus) has a queue of at
//     most EventBuffer (4096) items and EventBufferBytes (16 MiB): past
//     either the oldest are dropped (Stats.EventsDropped). The queue
//     between the Pub/Sub connection and the dispatcher holds at least
//     4096 items and 16 MiB, the same way.
//   - The versions delivered ahead of their events: 65,536 tasks
//     (Stats.OrderForgotten).
//   - An event stream keeps about MaxEventsPerStream (1000) events, each
//     at most MaxEventBytes (8 MiB: Append refuses a larger one,
//     Stats.StreamEventsTooLarge, logged), for Retain (5 min) after its
//     last event; a session's record lasts the ttl of its last Save or
//     Touch. Follows running at once: MaxFollows (Stats.FollowsRefused,
//     logged).
//   - A renewal script renews 500 leases; a sweep command takes 500
//     lapsed leases or expired index entries, and a sweep goes on batch
//     after batch until one comes back short or Lease/6 has passed
//     (Stats.SweepsCut; the rest waits for the next sweep, Lease/3
//     later).
//
// # The bus
//
// Bus().Publish is a PUBLISH on the "bus" channel, bounded by its
// context and OpTimeout; Bus().Subscribe delivers what arrives on it,
// from every instance (this one's included, which the server skips),
// over the same Pub/Sub connection as the task events. At most once, as
// server.Bus allows: a listen stream that missed a change lists again
// when it reconnects.
//
// # The key ring
//
// server.StaticKeys is a fixed ring: give every instance the same keys
// (from configuration or a secret store) and rotate them by redeploying
// with the old key among the previous ones. Keys is a ring the fleet
// shares in Redis, for fleets that should need no key distribution or
// should rotate on their own: the first instance that needs a key makes
// one (HSETNX: of instances racing, one key wins), each instance caches
// the keys for KeyOptions.Refresh (5 s), so a Redis outage does not fail
// multi-round-trip requests while the cache holds keys (a failed read
// keeps the cache, served without a wait for Refresh after; with no cache
// and no Redis, StateKeys fails and the request gets a -32603). Keys are
// 32 random bytes (crypto/rand).
//
// One read from Redis at a time is under way per ring, shared by every
// caller and bounded by OpTimeout, not by any caller (a caller waits for
// it within its own context). A cache younger than Refresh is served as
// is; one younger than Refresh + OpTimeout is served while a read runs
// behind; an older one, which may lack a key another instance seals
// with, is read again before it is used.
//
// RotateKeys makes the current key the previous one and a new random key
// the current, in one script. So that every instance verifies what any
// seals, a key that an instance reads for the first time only verifies
// there for Refresh + OpTimeout, by that instance's own monotonic clock,
// while the key it sealed with before goes on sealing; then the new key
// seals and the previous verifies until the next rotation. No instance's
// clock is compared with another's. KeyOptions.RotateEvery makes the
// fleet rotate on its own once the current key is that old by Redis's
// clock: every instance checks (a few times per period), and the check
// and the rotation are one script, so N instances rotate once, not N
// times. RotateEvery must be at least the lifetime of a requestState (an
// hour): a state sealed two rotations ago no longer verifies, and so
// must the interval between manual rotations be well over Refresh +
// OpTimeout.
//
// # Goroutines and shutdown
//
// New starts four goroutines: the Pub/Sub receiver, the dispatcher that
// hands what it receives to the local subscribers, the lease renewer and
// the sweeper. Each Subscribe (of the store or the bus) adds one, which
// ends with its context, its stop function or the State; each ring with
// RotateEvery adds one, and a ring's read from Redis runs on one of its
// own while it lasts (at most OpTimeout). Each Follow waiting for an
// event adds one for its XREAD BLOCK, which ends within FollowWait (Close
// waits for it); Follow itself runs on its caller's goroutine, and
// returns when the State closes. Close stops them all and waits for them (a
// subscriber's callback in progress included); it does not close the
// client. Shut the Servers down first: their handlers then record how
// their tasks ended, and a Server's Shutdown stops its bus link. Tasks
// still live at Close keep their leases, which lapse: the other
// instances fail them.
//
// # Redis deployments
//
// A Redis primary (or Sentinel, through a failover client) serves as is;
// the tests run Debian's redis-server 7.0. On Redis Cluster the keys a
// script or a transaction touches must share a slot: make Options.Prefix
// a hash tag, say "{agentwire}:", which puts everything in one slot.
package redisstate
