//go:build unix

package debpkg

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Redis is a redis-server of one test's own, on a port of its own,
// without persistence: started again (Start, Restart) it is empty, on the
// same port. It is stopped at the end of the test.
type Redis struct {
	t    testing.TB
	bin  string
	env  []string
	dir  string
	port int

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan error
	out    *lockedBuffer
}

// StartRedis fetches redis-server if need be (Binary with RedisServer),
// runs it on a free loopback port and returns once it answers PING.
func StartRedis(t testing.TB) *Redis {
	t.Helper()
	bin, env := Binary(t, RedisServer)
	r := &Redis{t: t, bin: bin, env: env, dir: t.TempDir(), port: FreePort(t)}
	r.Start()
	t.Cleanup(r.Stop)
	return r
}

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func FreePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// Addr is the server's host:port.
func (r *Redis) Addr() string { return fmt.Sprintf("127.0.0.1:%d", r.port) }

// URL is the server's redis:// URL (database 0).
func (r *Redis) URL() string { return "redis://" + r.Addr() + "/0" }

// Start runs redis-server, unless it runs already, and waits until it
// answers PING (failing the test after 10 s or when it exits).
func (r *Redis) Start() {
	r.t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cmd != nil {
		return
	}
	cmd := exec.Command(r.bin, "--port", strconv.Itoa(r.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
		"--dir", r.dir, "--loglevel", "warning")
	cmd.Env = append(os.Environ(), r.env...)
	r.out = &lockedBuffer{}
	cmd.Stdout, cmd.Stderr = r.out, r.out
	if err := cmd.Start(); err != nil {
		r.t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	r.cmd, r.exited = cmd, exited
	for deadline := time.Now().Add(10 * time.Second); ; {
		if r.Ping() {
			return
		}
		select {
		case err := <-exited:
			r.cmd = nil
			r.t.Fatalf("redis-server exited: %v\n%s", err, r.out.String())
		default:
		}
		if time.Now().After(deadline) {
			r.t.Fatalf("redis-server does not answer on %s\n%s", r.Addr(), r.out.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Stop shuts redis-server down (SIGTERM: it closes its connections and
// exits, saving nothing) and waits for it to exit; after 10 s it is
// killed.
func (r *Redis) Stop() { r.end(syscall.SIGTERM) }

// Kill kills redis-server (SIGKILL, as a crash would) and waits for it
// to exit.
func (r *Redis) Kill() { r.end(syscall.SIGKILL) }

// Restart stops redis-server and starts it again: the same port, empty.
func (r *Redis) Restart() {
	r.t.Helper()
	r.Stop()
	r.Start()
}

func (r *Redis) end(sig syscall.Signal) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cmd == nil {
		return
	}
	r.cmd.Process.Signal(syscall.SIGCONT) // a paused one cannot act on SIGTERM
	r.cmd.Process.Signal(sig)
	select {
	case <-r.exited:
	case <-time.After(10 * time.Second):
		r.cmd.Process.Kill()
		<-r.exited
	}
	r.cmd = nil
}

// Pause stops redis-server without closing its connections (SIGSTOP): a
// hung Redis, whose commands get no answer. Resume lets it go on.
func (r *Redis) Pause() { r.signal(syscall.SIGSTOP) }

// Resume undoes Pause (SIGCONT).
func (r *Redis) Resume() { r.signal(syscall.SIGCONT) }

func (r *Redis) signal(sig syscall.Signal) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cmd != nil {
		r.cmd.Process.Signal(sig)
	}
}

// Ping reports whether the server answers PING within a second.
func (r *Redis) Ping() bool {
	s, err := r.Do("PING")
	return err == nil && s == "PONG"
}

// Do sends one command on a connection of its own (bounded by a second
// of silence) and returns its reply: a status, an integer or a bulk
// string as text; an error reply as an error. Arrays are not read.
func (r *Redis) Do(args ...string) (string, error) { return Do(r.Addr(), time.Second, args...) }

// Do sends one command to the Redis at addr on a connection of its own,
// bounded by timeout, and returns its reply as Redis.Do does: for the
// tests and for programs (the benchmarks) that need a command or two and
// no client library.
func Do(addr string, timeout time.Duration, args ...string) (string, error) {
	c, err := net.DialTimeout("tcp", addr, timeout)
	if err != nil {
		return "", err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(timeout))
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := io.WriteString(c, b.String()); err != nil {
		return "", err
	}
	rd := bufio.NewReader(c)
	line, err := rd.ReadString('\n')
	if err != nil {
		return "", err
	}
	line = strings.TrimSuffix(line, "\r\n")
	if line == "" {
		return "", errors.New("redis: an empty reply")
	}
	switch line[0] {
	case '+', ':':
		return line[1:], nil
	case '-':
		return "", errors.New("redis: " + line[1:])
	case '$':
		n, err := strconv.Atoi(line[1:])
		if err != nil || n < 0 {
			return "", err // a nil bulk string: "", nil
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(rd, buf); err != nil {
			return "", err
		}
		return string(buf[:n]), nil
	}
	return "", fmt.Errorf("redis: a reply this client does not read: %q", line)
}

// Int is Do for a command whose reply is an integer (DBSIZE, ZCARD).
func (r *Redis) Int(args ...string) (int64, error) {
	s, err := r.Do(args...)
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(s, 10, 64)
}

// Output is what redis-server has written since it was last started.
func (r *Redis) Output() string {
	r.mu.Lock()
	out := r.out
	r.mu.Unlock()
	return out.String()
}

// lockedBuffer is a process's output, read while it is written.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
