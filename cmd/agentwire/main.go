// Command agentwire is the command-line face of the agentwire runtime.
//
//	agentwire demo                 run the built-in demonstration
//	agentwire serve echo [flags]   a JSON-RPC 2.0 test server on stdio
//
// Run `agentwire help` for the flags of each command.
package main

import (
	"fmt"
	"io"
	"os"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

const usage = `agentwire: the transport runtime for agent protocols (JSON-RPC 2.0 over stdio)

Usage:
  agentwire demo                  start an echo server as a subprocess and show a
                                  session with it on the wire (good and bad lines,
                                  notifications, cancellation, batches, clean EOF)
  agentwire serve echo [flags]    serve the echo test server on stdin/stdout
  agentwire help                  show this text

Flags of serve echo:
  --max-concurrent N       handlers running at once (default 256)
  --max-message-bytes N    largest accepted line (default 16777216)
  --grace D                end-of-stream grace for running handlers (default 5s)
  --shutdown-timeout D     bound on cancelled handlers and the final drain (default 5s)
  --log-level L            debug, info, warn or error; logs go to stderr (default warn)
`

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	switch args[0] {
	case "demo":
		return runDemo(args[1:], stdout, stderr)
	case "serve":
		return runServe(args[1:], stderr)
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return 0
	default:
		fmt.Fprintf(stderr, "agentwire: unknown command %q\n\n%s", args[0], usage)
		return 2
	}
}
