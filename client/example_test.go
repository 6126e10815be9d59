package client_test

import (
	"context"
	"fmt"
	"io"

	"github.com/agentwire/agentwire/client"
	"github.com/agentwire/agentwire/echo"
	"github.com/agentwire/agentwire/rpc"
)

// A client over a stream; here the server is in memory. To start a stdio
// server instead: client.Start(process.Command{Path: "my-server"}, nil).
func ExampleNew() {
	c2sR, c2sW := io.Pipe()
	s2cR, s2cW := io.Pipe()
	server := rpc.New(c2sR, s2cW, echo.Handler(), echo.Options(nil))

	c := client.New(s2cR, c2sW, nil)
	res, err := c.Call(context.Background(), "echo", map[string]string{"hello": "wire"})
	fmt.Println(string(res), err)

	c.Close()
	server.Wait()
	// Output: {"hello":"wire"} <nil>
}
