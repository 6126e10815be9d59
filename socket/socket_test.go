package socket_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentwire/agentwire/echo"
	"github.com/agentwire/agentwire/rpc"
	"github.com/agentwire/agentwire/socket"
	"go.uber.org/goleak"
	"log/slog"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestParse(t *testing.T) {
	for _, tc := range []struct{ in, network, address string }{
		{"unix:/run/user/x.sock", "unix", "/run/user/x.sock"},
		{"tcp:127.0.0.1:8080", "tcp", "127.0.0.1:8080"},
		{"tcp:[::1]:0", "tcp", "[::1]:0"},
	} {
		n, a, err := socket.Parse(tc.in)
		if err != nil || n != tc.network || a != tc.address {
			t.Errorf("Parse(%q) = %q %q %v", tc.in, n, a, err)
		}
	}
	for _, bad := range []string{"", "x", "udp:1.2.3.4:5", "unix:", "tcp:nohostport", "/run/user/x.sock"} {
		if _, _, err := socket.Parse(bad); !errors.Is(err, socket.ErrBadAddress) {
			t.Errorf("Parse(%q) = %v", bad, err)
		}
	}
}

func echoServer() *socket.Server {
	return &socket.Server{NewConn: func() (rpc.Handler, *rpc.Options) {
		return echo.Handler(), echo.Options(&rpc.Options{Logger: slog.New(slog.DiscardHandler)})
	}}
}

// Each client gets its own connection with the full runtime: replies out of
// order, and end of input is a half-close (admitted requests are answered).
func TestServeUnixAndTCP(t *testing.T) {
	dir := t.TempDir()
	for _, addr := range []string{"unix:" + filepath.Join(dir, "s.sock"), "tcp:127.0.0.1:0"} {
		t.Run(strings.SplitN(addr, ":", 2)[0], func(t *testing.T) {
			l, err := socket.Listen(addr)
			if err != nil {
				t.Fatal(err)
			}
			dialAddr := addr
			if strings.HasPrefix(addr, "tcp:") {
				dialAddr = "tcp:" + l.Addr().String()
			}
			ctx, cancel := context.WithCancel(context.Background())
			served := make(chan error, 1)
			go func() { served <- echoServer().Serve(ctx, l) }()

			var wg sync.WaitGroup
			for client := range 3 {
				wg.Go(func() {
					c, err := socket.Dial(context.Background(), dialAddr)
					if err != nil {
						t.Error(err)
						return
					}
					defer c.Close()
					fmt.Fprintf(c, `{"jsonrpc":"2.0","id":1,"method":"sleep","params":{"ms":100}}`+"\n")
					fmt.Fprintf(c, `{"jsonrpc":"2.0","id":2,"method":"echo","params":[%d]}`+"\n", client)
					c.(interface{ CloseWrite() error }).CloseWrite()
					var lines []string
					sc := bufio.NewScanner(c)
					for sc.Scan() {
						lines = append(lines, sc.Text())
					}
					want := []string{fmt.Sprintf(`{"jsonrpc":"2.0","id":2,"result":[%d]}`, client), `{"jsonrpc":"2.0","id":1,"result":{"slept":100}}`}
					if strings.Join(lines, "\n") != strings.Join(want, "\n") {
						t.Errorf("client %d got %q", client, lines)
					}
				})
			}
			wg.Wait()
			cancel()
			if err := <-served; err != nil {
				t.Errorf("Serve = %v", err)
			}
		})
	}
}

// Cancelling Serve closes the connections still open and returns.
func TestServeStopsOpenConnections(t *testing.T) {
	l, err := socket.Listen("tcp:127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- echoServer().Serve(ctx, l) }()
	c, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintln(c, `{"jsonrpc":"2.0","id":1,"method":"sleep","params":{"ms":60000}}`)
	// The echo's reply says the connection is served and the sleep, read
	// before it, is in flight.
	fmt.Fprintln(c, `{"jsonrpc":"2.0","id":2,"method":"echo","params":{}}`)
	if line, err := bufio.NewReader(c).ReadString('\n'); err != nil || !strings.Contains(line, `"id":2`) {
		t.Fatalf("echo: %q %v", line, err)
	}
	start := time.Now()
	cancel()
	if err := <-served; err != nil || time.Since(start) > 3*time.Second {
		t.Fatalf("Serve = %v after %v", err, time.Since(start))
	}
}

// A stale socket file (its server died) is replaced; a live one is not.
func TestListenReplacesStaleSocket(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.sock")
	l1, err := socket.Listen("unix:" + path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := socket.Listen("unix:" + path); err == nil {
		t.Fatal("a live socket was replaced")
	}
	l1.(*net.UnixListener).SetUnlinkOnClose(false)
	l1.Close() // leaves the file, as a crashed server would
	if _, err := os.Stat(path); err != nil {
		t.Fatal(err)
	}
	l2, err := socket.Listen("unix:" + path)
	if err != nil {
		t.Fatalf("stale socket not replaced: %v", err)
	}
	l2.Close()
	os.WriteFile(path, []byte("x"), 0o644)
	if _, err := socket.Listen("unix:" + path); err == nil {
		t.Fatal("a regular file was replaced")
	}
}
