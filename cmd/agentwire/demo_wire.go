package main

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"
)

// demoStep is one line the demo writes, what it shows, and how long to wait
// afterwards so the transcript reads in order.
type demoStep struct {
	note  string
	line  string
	pause time.Duration
}

var demoScript = []demoStep{
	{"a request; the result is the params, byte for byte", `{"jsonrpc":"2.0","id":1,"method":"echo","params":{"hello":"world","n":1.50}}`, 50 * time.Millisecond},
	{"a line that is not JSON: one -32700 with id null, and the server keeps serving", `this is not json`, 50 * time.Millisecond},
	{"JSON that is not JSON-RPC: -32600", `{"hello":1}`, 50 * time.Millisecond},
	{"an unknown method: -32601, the string id echoed", `{"jsonrpc":"2.0","id":"a","method":"nope"}`, 50 * time.Millisecond},
	{"a handler that sends 3 notifications, all before its response", `{"jsonrpc":"2.0","id":2,"method":"notify","params":{"count":3}}`, 50 * time.Millisecond},
	{"a handler that panics: -32603, the connection survives", `{"jsonrpc":"2.0","id":3,"method":"panic"}`, 50 * time.Millisecond},
	{"a slow request...", `{"jsonrpc":"2.0","id":4,"method":"sleep","params":{"ms":5000}}`, 30 * time.Millisecond},
	{"...cancelled: it gets no response at all", `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":4,"reason":"demo"}}`, 50 * time.Millisecond},
	{"a batch: one request and one notification, so a one-element array comes back", `[{"jsonrpc":"2.0","id":5,"method":"echo","params":[1,2,3]},{"jsonrpc":"2.0","method":"echo"}]`, 50 * time.Millisecond},
	{"two sleeps in flight; the shorter one answers first", `{"jsonrpc":"2.0","id":12345678901234567890,"method":"sleep","params":{"ms":300}}`, 0},
	{"", `{"jsonrpc":"2.0","id":6,"method":"sleep","params":{"ms":100}}`, 20 * time.Millisecond},
}

func runWireDemo(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("demo wire", flag.ContinueOnError)
	fs.SetOutput(stderr)
	if err := fs.Parse(args); err != nil {
		return 2
	}
	self, err := os.Executable()
	if err != nil {
		fmt.Fprintln(stderr, "agentwire demo: cannot find my own executable:", err)
		return 1
	}
	cmd := exec.Command(self, "serve", "echo", "--grace", "2s")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		fmt.Fprintln(stderr, "agentwire demo:", err)
		return 1
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		fmt.Fprintln(stderr, "agentwire demo:", err)
		return 1
	}
	cmd.Stderr = io.Discard
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(stderr, "agentwire demo: starting the echo server:", err)
		return 1
	}
	start := time.Now()
	var mu sync.Mutex
	show := func(format string, a ...any) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintf(stdout, "%6.3fs  ", time.Since(start).Seconds())
		fmt.Fprintf(stdout, format, a...)
		fmt.Fprintln(stdout)
	}
	fmt.Fprintf(stdout, "agentwire demo: a session with `agentwire serve echo` (pid %d) over stdio\n", cmd.Process.Pid)
	fmt.Fprintln(stdout, "  -> is what the demo writes to the server's stdin, <- what the server writes to its stdout")
	fmt.Fprintln(stdout)

	readDone := make(chan int)
	go func() {
		n := 0
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 64<<10), 32<<20)
		for sc.Scan() {
			n++
			show("<- %s", sc.Text())
		}
		readDone <- n
	}()

	for _, s := range demoScript {
		if s.note != "" {
			show("   # %s", s.note)
		}
		show("-> %s", s.line)
		if _, err := io.WriteString(stdin, s.line+"\n"); err != nil {
			fmt.Fprintln(stderr, "agentwire demo: writing to the server:", err)
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			return 1
		}
		time.Sleep(s.pause)
	}
	show("   # closing stdin while both sleeps run: EOF is a half-close, their replies still arrive")
	_ = stdin.Close()
	eof := time.Now()
	replies := <-readDone
	err = cmd.Wait()
	code := 0
	var exitErr *exec.ExitError
	if errors.As(err, &exitErr) {
		code = exitErr.ExitCode()
	} else if err != nil {
		fmt.Fprintln(stderr, "agentwire demo:", err)
		return 1
	}
	show("   # server exited with status %d, %s after EOF; %d lines received", code,
		time.Since(eof).Round(time.Millisecond), replies)
	fmt.Fprintln(stdout)
	fmt.Fprintln(stdout, strings.TrimSpace(`
Try it yourself:  go run ./cmd/agentwire serve echo
then type a line such as {"jsonrpc":"2.0","id":1,"method":"echo","params":[1]}`))
	if code != 0 {
		return 1
	}
	return 0
}
