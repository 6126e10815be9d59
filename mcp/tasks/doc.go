// Package tasks is where an MCP server keeps its tasks: tools/call
// requests that outlive their request (the 2026-07-28 extension
// io.modelcontextprotocol/tasks, and the 2025-11-25 revision's tasks).
// mcp/server runs the handlers and speaks the wire; this package only
// keeps records, so that the same records can live in this process
// (Memory) or in a store a fleet of servers shares.
//
// # The model
//
// A Task is a record: its status (working, input_required, then one of
// completed, failed, cancelled, after which it never changes), its
// timestamps, the input requests it waits on and the answers that have
// arrived for them, a cancellation request, and its result or error. The
// server running the handler and the servers answering clients about it
// may be different processes; they meet only in the Store:
//
//   - Create returns once Get would find the task (durable creation: a
//     client may poll an id the moment it has it).
//   - Update is an atomic read-modify-write of one record. A tasks/update
//     files answers in it, tasks/cancel marks it cancelled, and the
//     running handler takes its answers from it and records its outcome.
//   - Subscribe tells every change, so the instance running a handler
//     learns of an answer or a cancellation that arrived elsewhere, and a
//     listen stream can tell its client. Events of one task arrive in
//     order; a store may lose events under pressure, and readers check
//     the record again now and then all the same.
//
// # Bounds
//
// Memory holds at most MaxTasks records and MaxBytes of payload
// (results, errors, input requests and answers; at most MaxTaskBytes
// each). An ended task is kept for its TTL, counted from its end; a
// running task never expires. When full, Memory forgets the ended task
// nearest its expiry first and refuses a new task (ErrFull) only when
// every task is live; every refusal and early eviction is counted in
// MemoryStats and logged. Expiry is checked as the store is used and by
// Sweep, against MemoryOptions.Now (tests inject a clock); Memory has no
// goroutine but one per subscription, which ends with its context or its
// stop function.
//
// Every method is safe for concurrent use; the store hands out copies.
// Package storetest holds the contract as tests: a store of one's own
// runs them with storetest.Run.
package tasks
