// Package redisstate keeps what a fleet of agentwire MCP servers shares
// in Redis, so that the instances behind a load balancer serve as one:
// the task store (mcp/tasks.Store), the bus that carries list changes
// and resource updates to every instance's listen streams (server.Bus),
// and the ring of keys that seal multi-round-trip requestState
// (server.KeyRing). It is a module of its own: a server that runs as one
// process does not build go-redis.
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
//	task:<id>               the task, JSON (a string; PEXPIRE once it has ended)
//	owner:<owner>\x00<scope> the owner index: a sorted set of ids by creation sequence
//	                        (an owner's tasks whatever their scope; for no owner, one scope's)
//	seq                     the creation sequence (INCR)
//	live                    sorted set: live tasks by lease deadline (unix ms)
//	ended                   sorted set: ended tasks by expiry, for the owner indexes' cleanup
//	statekeys               hash: current, previous, rotated_at (unix ms)
//	events, bus             Pub/Sub channels: task changes, and the servers' bus
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
// MULTI, SET, and (when it has ended) PEXPIRE, ZADD ended and ZREM live,
// PUBLISH, EXEC. When another writer changed the record in between, EXEC
// fails and the update is tried again on the new record (f is called
// again; at most 20 tries with a short random back-off, then an error,
// counted in Stats.Conflicts). f's error writes nothing. An ended task
// stays ended: an update that would move it out of its terminal status
// keeps the status. The first update that ends a task sets its EndedAt
// (when f left it zero).
//
// List reads the owner index after the cursor's sequence
// (ZRANGEBYSCORE), then the records (MGET); ids whose record has expired
// are skipped and taken out of the index. The cursor is opaque (the
// base64 of a sequence number), so tasks ending or expiring mid-listing
// do not upset it. A page that meets many expired ids ends after a few
// round trips with a cursor to go on from.
//
// # Consistency
//
// Redis executes each script and transaction alone, so every write of a
// task is atomic and sees the last one: with one Redis primary the
// records are linearizable. Events are published inside the script or
// the transaction that writes, so the events of one task are published
// in the order of its writes, and Redis Pub/Sub delivers one
// connection's messages in order: a subscriber sees the changes of a
// task in the order they were made. An event carries the task whole
// when its JSON is at most 64 KiB; a larger one carries its id, and the
// receiving State reads the task (it may then see a later version; a
// task that has gone by then is not told).
//
// Pub/Sub is at most once. Events published while an instance's Pub/Sub
// connection is down are lost to it: go-redis reconnects and
// resubscribes, the State counts it (Stats.Resubscribed) and rechecks at
// once the tasks running here, and the server's runtime reads a waiting
// task again every 2 s on its own. A lost cancellation still reaches
// the instance running the task: each lease renewal (every Lease/3) also
// reads the records of the tasks running here, and tells the local
// subscribers of any that was cancelled or ended elsewhere.
//
// Redis replication is asynchronous: a failover may lose writes Redis
// had acknowledged (a task created just before, an answer), and a Redis
// restarted without persistence has lost every task (polls then get
// "unknown task"). Use AOF and replicas as durability requires;
// redisstate does not issue WAIT.
//
// # Leases: no task runs forever or vanishes
//
// A task created through a State runs on that instance (the server runs
// the handler where it created the task). The State renews the lease of
// each of its live tasks every Lease/3 (ZADD XX: a lease that a sweeper
// has already taken is not given back). Every State also sweeps every
// Lease/3: a task whose lease deadline has passed is failed, unless it
// ended meanwhile, with the statusMessage "the server instance running
// the task was lost" and the error {"code":-32603,"message":"Internal
// error: the server instance running the task was lost"}, which starts
// its TTL. So the tasks of an instance that was killed are failed within
// about Lease + Lease/3 (15 s + 5 s by default) and then expire as any
// ended task does. A sweeper skips the tasks running on its own
// instance: after a Redis outage longer than Lease they are renewed,
// though another instance may have failed them first (their handler then
// finds its task ended when it records its outcome). The instances
// compare each other's deadlines: their clocks must agree to well within
// Lease.
//
// Ended tasks expire by Redis (PEXPIRE of what remains of their TTL,
// counted by the State's clock, so the Redis server's clock does not
// matter); the sweepers take expired tasks out of the owner indexes, so
// that 10,000 ended tasks leave nothing behind once their TTL has passed.
//
// # Failure modes
//
//   - Redis unreachable: every method fails within about OpTimeout with
//     a wrapped error (a Redis that refuses memory for a write, OOM, is
//     tasks.ErrFull), counted in Stats.RedisErrors and logged at most
//     once a second. The server then runs an optional task-augmented
//     call in its request, and refuses one of a tool that requires a
//     task (-32000). Subscribe never needs Redis: it registers locally.
//   - Redis hung (accepting, not answering): the same, given a client
//     with ContextTimeoutEnabled; a Pub/Sub connection that does not
//     answer a ping within one beat (Lease/3, at most 5 s) is replaced.
//   - Redis back: the Pub/Sub connection is subscribed again
//     (Stats.Listening), the scripts are loaded again on their first use
//     (EVALSHA falls back to EVAL), and everything works again.
//   - An instance killed: its tasks are failed by the others' sweepers
//     (above); its bus messages and events in flight are lost.
//   - A store or an answer that cannot be written: the caller gets the
//     error. A task's outcome that the server could not store leaves the
//     task live and its lease renewed while its instance lives.
//
// # Bounds
//
// MaxTaskBytes (8 MiB) bounds one task's payload (tasks.Task.Size): a
// Create or Update past it is tasks.ErrTooLarge and writes nothing. The
// number and the bytes of tasks are bounded by Redis's maxmemory (a full
// Redis refuses with ErrFull), the ended ones by their TTL, and the live
// ones by each server's TaskOptions.MaxRunning; unlike tasks.Memory, the
// store evicts nothing early. Each local subscriber (of tasks or of the
// bus) has a queue of EventBuffer (4096) items: past it the oldest are
// dropped and counted in Stats.EventsDropped. A sweep takes at most 500
// lapsed leases and 500 expired index entries; a lease renewal goes in
// batches of 500 ids.
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
// multi-round-trip requests while the cache holds keys (a failed refresh
// keeps the cache; with no cache and no Redis, StateKeys fails and the
// request gets a -32603). Keys are 32 random bytes (crypto/rand).
//
// RotateKeys makes the current key the previous one and a new random key
// the current, in one script. So that an instance whose cache predates
// the rotation still verifies everything sealed after it, the new key
// only verifies for Refresh + OpTimeout after the rotation, while the
// previous one goes on sealing; after that the new key seals and the
// previous verifies until the next rotation. KeyOptions.RotateEvery
// makes the fleet rotate on its own once the current key is that old:
// every instance checks (a few times per period), and the check and the
// rotation are one script, so N instances rotate once, not N times.
// RotateEvery must be at least the lifetime of a requestState (an hour):
// a state sealed two rotations ago no longer verifies.
//
// # Goroutines and shutdown
//
// New starts four goroutines: the Pub/Sub receiver, the dispatcher that
// hands what it receives to the local subscribers, the lease renewer and
// the sweeper. Each Subscribe (of the store or the bus) adds one, which
// ends with its context, its stop function or the State; each ring with
// RotateEvery adds one. Close stops them all and waits for them (a
// subscriber's callback in progress included); it does not close the
// client. Shut the Servers down first: their handlers then record how
// their tasks ended, and a Server's Shutdown stops its bus link. Tasks
// still live at Close keep their leases, which lapse: the other
// instances fail them.
//
// # Redis deployments
//
// A Redis primary (or Sentinel, through a failover client) serves as is;
// the tests run Debian's redis-server 7.0. On Redis Cluster the keys a script or a transaction
// touches must share a slot: make Options.Prefix a hash tag, say
// "{agentwire}:", which puts everything in one slot.
package redisstate
