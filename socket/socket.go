// Package socket carries agentwire connections over Unix sockets and TCP
// with the stdio framing unchanged: one newline-delimited JSON-RPC stream
// per client, each with the full runtime of package rpc (guarantee T1: a
// transport over any other reliable byte stream reuses the stdio framing).
//
// Addresses are written unix:PATH or tcp:HOST:PORT. A Server accepts
// clients until its context ends, then closes every connection (handler
// contexts cancelled, replies drained within the shutdown bound) and
// returns once they are all done. A socket is both a connection's input and
// its output: at the end of input its read half is shut and its write half
// kept until the last replies are out.
//
// Numbers such as C3 cite the guarantees in the repository's
// docs/guarantees.md.
package socket

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
	"syscall"

	"github.com/agentwire/agentwire/rpc"
)

// ErrBadAddress is matched by the error for an address that is not
// unix:PATH or tcp:HOST:PORT.
var ErrBadAddress = errors.New("socket: address must be unix:PATH or tcp:HOST:PORT")

// Parse splits an address into a network and an address for package net.
func Parse(addr string) (network, address string, err error) {
	network, address, ok := strings.Cut(addr, ":")
	if !ok || address == "" || (network != "unix" && network != "tcp") {
		return "", "", fmt.Errorf("%w: %q", ErrBadAddress, addr)
	}
	if network == "tcp" {
		if _, _, err := net.SplitHostPort(address); err != nil {
			return "", "", fmt.Errorf("%w: %q: %v", ErrBadAddress, addr, err)
		}
	}
	return network, address, nil
}

// Listen listens on a unix: or tcp: address. A stale Unix socket file left
// by a server that died is replaced; any other existing file is an error.
func Listen(addr string) (net.Listener, error) {
	network, address, err := Parse(addr)
	if err != nil {
		return nil, err
	}
	if network == "unix" {
		if fi, err := os.Stat(address); err == nil {
			if fi.Mode()&os.ModeSocket == 0 {
				return nil, fmt.Errorf("socket: %s exists and is not a socket", address)
			}
			c, err := net.Dial("unix", address)
			if err == nil {
				c.Close()
				return nil, fmt.Errorf("socket: %s is in use by a running server", address)
			}
			if !errors.Is(err, syscall.ECONNREFUSED) {
				// Not provably stale (a full backlog, no permission):
				// leave it alone.
				return nil, fmt.Errorf("socket: %s exists and may be in use: %w", address, err)
			}
			os.Remove(address)
		}
	}
	return net.Listen(network, address)
}

// Dial connects to a unix: or tcp: address.
func Dial(ctx context.Context, addr string) (net.Conn, error) {
	network, address, err := Parse(addr)
	if err != nil {
		return nil, err
	}
	var d net.Dialer
	return d.DialContext(ctx, network, address)
}

// Server serves a listener: every accepted client gets its own connection.
type Server struct {
	// NewConn returns the handler and options for one client's
	// connection (per-connection state, such as MCP's legacy handshake or
	// ACP's sessions, lives in the handler).
	NewConn func() (rpc.Handler, *rpc.Options)
	// OnConn, if set, is told of each client's connection once it runs,
	// and the function it returns (if any) is called when the connection
	// has ended: what watches connections (metrics of their output queues)
	// starts and stops there.
	OnConn func(c *rpc.Conn) (ended func())
}

// Serve accepts clients on l until ctx ends or l fails; then it closes the
// listener and every connection and waits for them. It returns nil after a
// cancelled context.
func (s *Server) Serve(ctx context.Context, l net.Listener) error {
	var mu sync.Mutex
	conns := map[*rpc.Conn]struct{}{}
	var wg sync.WaitGroup
	stop := context.AfterFunc(ctx, func() { l.Close() })
	defer stop()
	var acceptErr error
	for {
		nc, err := l.Accept()
		if err != nil {
			if ctx.Err() == nil {
				acceptErr = fmt.Errorf("socket: accept: %w", err)
			}
			break
		}
		h, o := s.NewConn()
		c := rpc.New(nc, nc, h, o)
		var ended func()
		if s.OnConn != nil {
			ended = s.OnConn(c)
		}
		mu.Lock()
		conns[c] = struct{}{}
		mu.Unlock()
		wg.Go(func() {
			c.Wait()
			if ended != nil {
				ended()
			}
			mu.Lock()
			delete(conns, c)
			mu.Unlock()
		})
	}
	l.Close()
	mu.Lock()
	open := make([]*rpc.Conn, 0, len(conns))
	for c := range conns {
		open = append(open, c)
	}
	mu.Unlock()
	for _, c := range open {
		wg.Go(func() { c.Close() })
	}
	wg.Wait()
	return acceptErr
}
