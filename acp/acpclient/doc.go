// Package acpclient is the client side of the Agent Client Protocol v1: what
// an editor, a CI harness or an orchestrator written in Go needs to drive an
// ACP agent (Gemini CLI, Claude's and Codex's ACP adapters, Goose, or any
// other) and to serve the agent's requests for files, terminals and
// permissions safely. It is the other end of package acp.
//
// # Connecting
//
// Start launches an agent as a subprocess through package client and
// package process: its own process group, stderr drained and kept as a
// tail for error messages, an optional restart policy, the stdio shutdown
// ladder on Close (guarantees K1–K8). New works over any stream; Pipe runs an
// agent of package acp in memory. All three send initialize first and alone,
// declaring exactly what the client serves, and refuse an agent of another
// protocol version (*VersionError).
//
// An agent that wants authentication answers session/new with -32000; the
// error is an *AuthRequiredError (errors.Is ErrAuthRequired) carrying the
// methods the agent offered. Authenticate runs one of them; a method of type
// "terminal" is the caller's to run (the agent's command with the method's
// args, on a terminal), never passed to authenticate.
//
// # Updates: order and backpressure
//
// session/update is a barrier of the underlying connection: its handler
// runs alone, in the order the agent sent the updates, before anything the
// agent sent after it is dispatched. A quick handler (append to a buffer,
// signal a UI) costs no goroutine and no channel hop: it runs on the
// reading goroutine. A slow one is left to finish where it is while later
// messages are held in receive order, up to Options.MaxQueuedUpdates
// (1024) and MaxQueuedBytes (16 MiB); past that reading from the agent
// pauses, its stdout pipe fills and its writes block. Nothing is dropped,
// reordered or buffered without bound, and the connection is never shut
// down for a slow consumer. A permission question that follows a tool_call
// update is asked only once that update was handled.
//
// Calls that bring updates (Prompt, NewSession, LoadSession, ResumeSession,
// SetMode, SetConfigOption) return only after every update the agent sent
// before its answer has been handled: the history LoadSession replays is
// all delivered when it returns, and a Prompt's last chunk is handled
// before its stop reason is returned. Updates that arrive before the
// session/new result that names their session are parked (up to 256 and 1
// MiB) and delivered first, before NewSession returns. An update for a
// session the connection does not know goes to Options.Updates with a nil
// Session and is counted (Stats.OrphanUpdates).
//
// A handler may call the connection (a nested Prompt or SetMode returns
// without waiting for later updates, which are held behind it). The one
// deadlock left to the caller: a handler that waits for something its own
// Prompt caller does only after Prompt returns.
//
// # Cancelling
//
// Cancelling a Prompt's context, or Session.Cancel, cancels the ACP way:
// session/cancel goes on the wire first, then every pending permission
// question of the session is answered "cancelled", as are questions asked
// until the prompt returns; the agent then answers stopReason "cancelled",
// which Prompt returns with a nil error. An agent that does not answer
// within Options.CancelGrace (5 s) is abandoned: $/cancel_request is sent,
// a late answer is counted, and Prompt returns the context's cause.
//
// # What the client serves
//
// Only what it declares in initialize; everything else is -32601. Every
// session-scoped request must name a session of this connection (-32002
// otherwise).
//
//   - fs/read_text_file and fs/write_text_file through Options.FS, by
//     default RootedFS: confined to the session's roots (its cwd and
//     additional directories) with os.Root, so no path escapes through "..",
//     symlinks or a symlink swapped in mid-request; FIFOs, devices, /proc and
//     /sys are refused, as are files over RootedFS.MaxReadBytes (8 MiB,
//     too_large); counted in Stats.FS, refusals logged once per burst.
//     NoFiles declares no file system.
//   - session/request_permission through Options.Permissions, by default
//     DenyAll. The policy runs on its own goroutine at human pace; a policy
//     error or an option the agent did not offer is answered with DenyAll's
//     choice, never "cancelled" (agents read that as the user cancelling).
//     At most MaxPendingPermissions (64) policies run at once; past that a
//     question is refused without asking (Stats.Permissions.Overflow).
//   - terminal/* when Options.Terminals is set: each terminal/create runs
//     one command with process.Start, without a shell (a whole command
//     line put into command runs through /bin/sh -c), in its own process
//     group, never tied to the request's context; stdin closed, stdout and
//     stderr on one pipe in the kernel's order; output kept in a ring of
//     min(outputByteLimit, MaxOutputBytes) bytes (1 MiB), dropped from the
//     front, so a flooding command never blocks; terminal/output is valid
//     UTF-8 cut at a character boundary. Kill, release, session close and
//     Conn.Close send SIGTERM to the group, wait KillGrace (2 s), SIGKILL
//     the group, and return only after that: a terminal never outlives
//     them. At most MaxLive (16) live terminals per connection (-33000
//     too_many_terminals, Stats.Terminals.Refused, logged). A command that
//     is not found still makes a terminal that says so and exits 127.
//     A terminal is not a sandbox: the command runs with this process's
//     rights, a process that calls setsid leaves the group, and there is
//     no PTY (programs see a pipe).
//   - mcp/connect, mcp/message and mcp/disconnect for the MCP servers a
//     session offers with SessionConfig.ProvideMCP (the unstable
//     MCP-over-ACP extension, agent side in package acp): an editor gives an
//     agent tools without a socket. Both generations of the extension are
//     served: the schema's (mcp/connect {serverId, or acpId/id} →
//     {connectionId}, mcp/message {connectionId, …}, mcp/disconnect) and
//     the TypeScript SDK 2.x's connectionless mcp/message {serverId,
//     requestId, …} → {result} or {error}. At most MaxMCPConnections (32)
//     live (-33000 too_many_connections); an unknown serverId is -33001, an
//     unknown connectionId or a duplicate active pair -32602.
//
// # Closing
//
// Session.Close answers the session's pending questions "cancelled", sends
// session/close when the agent offers it and releases the session's
// terminals and MCP connections. Conn.Close does that for every session,
// then closes the agent's input (ACP agents cancel their turns at end of
// input and answer them), gives prompts in flight CancelGrace, and runs the
// shutdown ladder (close stdin, grace, SIGTERM to the group, grace,
// SIGKILL). When a restart policy starts the agent again, every session is
// lost (ErrSessionLost): the new process knows none of them.
//
// Numbers such as K5 cite the guarantees in the repository's
// docs/guarantees.md.
package acpclient
