//go:build !unix

package streamable

import "net"

// openFileLimit is the process's limit on open files, or 0 when it is
// unknown.
func openFileLimit() int { return 0 }

// hasInput reports whether the peer has sent bytes waiting to be read;
// here it cannot tell.
func hasInput(net.Conn) bool { return false }
