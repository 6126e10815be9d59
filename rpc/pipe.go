package rpc

import "io"

// Pipe connects two Conns in memory over a pair of io.Pipes (guarantee W9): no
// subprocess, no sockets. server serves the client's requests; client
// (which may be nil) serves requests the server sends back. The client side
// is quiet on bad input, as a client must be. Close either side to end both.
func Pipe(server, client Handler, serverOpts, clientOpts *Options) (clientConn, serverConn *Conn) {
	c2sR, c2sW := io.Pipe()
	s2cR, s2cW := io.Pipe()
	var co Options
	if clientOpts != nil {
		co = *clientOpts
	}
	co.QuietOnBadInput = true
	serverConn = New(c2sR, s2cW, server, serverOpts)
	clientConn = New(s2cR, c2sW, client, &co)
	return clientConn, serverConn
}
