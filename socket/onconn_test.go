package socket_test

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"testing"

	"github.com/agentwire/agentwire/rpc"
	"github.com/agentwire/agentwire/socket"
)

// OnConn is told of each client's connection while it runs, and its
// function is called once the connection has ended.
func TestOnConnSeesEachConnectionStartAndEnd(t *testing.T) {
	l, err := socket.Listen("tcp:127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	started, ended := make(chan *rpc.Conn, 1), make(chan *rpc.Conn, 1)
	srv := echoServer()
	srv.OnConn = func(c *rpc.Conn) func() {
		started <- c
		return func() { ended <- c }
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx, l) }()
	defer func() { cancel(); <-served }()

	nc, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintln(nc, `{"jsonrpc":"2.0","id":1,"method":"echo","params":{"x":1}}`)
	if _, err := bufio.NewReader(nc).ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	c := <-started
	nc.Close()
	if got := <-ended; got != c {
		t.Fatal("the end was told of another connection")
	}
}
