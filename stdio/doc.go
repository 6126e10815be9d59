// Package stdio runs an rpc.Conn on a process's standard input and output,
// the MCP stdio transport.
//
// Standard output carries protocol messages only; diagnostics go to
// standard error (guarantee C9). GuardStdout enforces that for code the server
// author does not control: it keeps a private duplicate of file descriptor 1
// for the protocol and points descriptor 1 at standard error, so a stray
// fmt.Println, a library that logs to stdout, or a child process that
// inherits stdout writes to stderr instead of corrupting the stream. Serve
// installs the guard unless Config.NoGuard is set.
//
// The guard changes the process, so it belongs to main packages; library
// code never calls it and never writes to stdout. On systems without dup2
// GuardStdout returns os.Stdout unchanged.
//
// Input EOF (the client closing our stdin) starts the connection's graceful
// shutdown; the caller waits for the connection and then exits, which is the
// "exits promptly on EOF" that clients' shutdown ladders expect.
//
// Numbers such as C3 cite the guarantees in the repository's
// docs/guarantees.md.
package stdio
