// Package process starts and stops stdio servers: the subprocess side of
// the MCP stdio transport, done so that the usual ways it goes wrong
// (orphaned children, blocked stderr pipes, servers killed by a cancelled
// connect) cannot happen.
//
// # Starting
//
// Start builds a fresh exec.Cmd from a Command for every start, with
// exec.Command and never exec.CommandContext: cancelling a connect or call
// context must not kill a running server (guarantee K8). The server runs in its
// own process group (Unix), so signals reach the children it starts. Its
// three pipes are ours, not exec's: exec.Cmd.Wait closes the pipes it made as
// soon as the process exits, which would cut off output still in flight.
//
// # Standard error
//
// stderr is always drained by a goroutine (a server is never blocked on a
// full stderr pipe; mcp-go#956), kept as a bounded tail for error messages
// (64 KiB by default), and optionally copied to a sink through a bounded
// queue: a slow sink loses chunks (StderrDropped) rather than blocking the
// server. stderr output is never treated as an error (guarantee K4).
// (With CombinedOutput there is no stderr pipe to drain: see below.)
//
// # Stopping: the ladder
//
// Shutdown runs the MCP stdio shutdown ladder once (guarantee K7): close the server's stdin
// (the only portable request to exit), wait Grace; SIGTERM to the process
// group, wait Grace; SIGKILL to the group. The result says how it ended
// (Exited, Terminated, Killed) and how long it took; with Grace 0.3 s the
// three kinds of server (exits on EOF, needs SIGTERM, needs SIGKILL) take about 0.01 s, 0.3 s and 0.6 s.
// Afterwards anything left in the group is killed, so a server that exited on
// EOF cannot leave a grandchild running.
//
// Terminate is the same ladder without the stdin step, for a command that
// is not asked to exit through its input (an ACP client's terminals): SIGTERM
// to the group, wait the given grace, SIGKILL to the group, reap, kill the
// leftovers. It shares Shutdown's once and result, so calling both is safe,
// and it leaves Stdout open so that what the group wrote before it died can
// still be read to EOF. Processes of the group that were not our children
// are reaped by init (or a subreaper); until then they are zombies, which
// run nothing and hold no pipe. A process that called setsid, or moved to
// another group, has left the group and is not reached.
//
// On Windows there is no group and no SIGTERM: the terminate step only
// waits, the last step is TerminateProcess, and children are not reached.
//
// # Combined output
//
// With Options.CombinedOutput, stderr is the stdout pipe itself: a
// terminal-like command's output arrives in the order the kernel received
// it, with no stderr drain, tail or sink.
//
// # Exit
//
// ExitError reports how the process ended with the stderr tail, and the
// signal that ended it by name ("SIGKILL", "SIGTERM"; empty when it exited
// by itself); a client puts it in the connection-lost error of the calls a
// crash failed (guarantee K5).
//
// Numbers such as C3 cite the guarantees in the repository's
// docs/guarantees.md.
package process
