package stdio

import (
	"io"
	"os"

	"github.com/agentwire/agentwire/rpc"
)

// Config configures Serve. The zero value (or nil) guards stdout.
type Config struct {
	// NoGuard leaves file descriptor 1 alone. By default Serve moves the
	// real stdout out of the way for protocol messages and points fd 1 at
	// stderr (see GuardStdout).
	NoGuard bool
	// Stdin and Stdout replace the process's streams (for tests). When
	// Stdout is set no guard is installed.
	Stdin  io.Reader
	Stdout io.Writer
}

// Serve starts a connection on the process's standard input and output and
// returns it; the caller waits on it (conn.Wait) and then exits. Input EOF
// starts the graceful shutdown of rpc.Conn.
func Serve(h rpc.Handler, opts *rpc.Options, cfg *Config) (*rpc.Conn, error) {
	var c Config
	if cfg != nil {
		c = *cfg
	}
	in, out := c.Stdin, c.Stdout
	if in == nil {
		in = os.Stdin
	}
	if out == nil {
		if c.NoGuard {
			out = os.Stdout
		} else {
			guarded, err := GuardStdout()
			if err != nil {
				return nil, err
			}
			out = guarded
		}
	}
	return rpc.New(in, out, h, opts), nil
}
