package redisstate

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"
)

// TestMain checks that no test leaves a goroutine behind: a State's, a
// subscriber's, or a client's.
// go-redis logs a failed dial on its own (a test that stops Redis makes
// many): quiet here.
func TestMain(m *testing.M) {
	redis.SetLogger(quietRedis{})
	goleak.VerifyTestMain(m)
}

type quietRedis struct{}

func (quietRedis) Printf(context.Context, string, ...any) {}

var quiet = slog.New(slog.DiscardHandler)

// redisBin is the redis-server binary and the environment it runs in,
// found (or fetched) once per test binary.
var redisBin struct {
	once sync.Once
	path string
	env  []string
	skip string
	err  error
}

// redisBinary finds redis-server on PATH or in /usr/bin, or fetches
// Debian's packages (redis-server, redis-tools, and the libraries
// redis-tools links that may be missing: libjemalloc2, liblzf1) into a
// cache directory of the tests' own, keyed by the package's version, and
// unpacks them there (no system install, no service started).
func redisBinary(t *testing.T) (string, []string) {
	t.Helper()
	redisBin.once.Do(func() {
		if p, err := exec.LookPath("redis-server"); err == nil {
			redisBin.path = p
			return
		}
		if _, err := os.Stat("/usr/bin/redis-server"); err == nil {
			redisBin.path = "/usr/bin/redis-server"
			return
		}
		if _, err := exec.LookPath("apt-get"); err != nil {
			redisBin.skip = "these tests need redis-server, from Debian's packages (no apt-get here)"
			return
		}
		redisBin.path, redisBin.env, redisBin.err = fetchRedis()
	})
	if redisBin.skip != "" {
		t.Skip(redisBin.skip)
	}
	if redisBin.err != nil {
		t.Fatal(redisBin.err)
	}
	return redisBin.path, redisBin.env
}

func fetchRedis() (string, []string, error) {
	version := func() string {
		out, _ := exec.Command("apt-cache", "show", "--no-all-versions", "redis-server").Output()
		for line := range strings.Lines(string(out)) {
			if v, ok := strings.CutPrefix(strings.TrimSpace(line), "Version:"); ok {
				return strings.NewReplacer(":", "_", "/", "_", "~", "_").Replace(strings.TrimSpace(v))
			}
		}
		return ""
	}
	v := version()
	if v == "" {
		// A fresh machine may have no package lists yet.
		if out, err := exec.Command("apt-get", "update", "-q").CombinedOutput(); err != nil {
			return "", nil, fmt.Errorf("apt-get update: %v\n%s", err, out)
		}
		if v = version(); v == "" {
			return "", nil, fmt.Errorf("apt-cache knows no redis-server package")
		}
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	dir := filepath.Join(cache, "agentwire-test", "redis", v)
	root := filepath.Join(dir, "root")
	bin := filepath.Join(root, "usr", "bin", "redis-server")
	env := func() []string {
		libs, _ := filepath.Glob(filepath.Join(root, "usr", "lib", "*-linux-gnu"))
		libs = append(libs, filepath.Join(root, "usr", "lib"))
		return []string{"LD_LIBRARY_PATH=" + strings.Join(libs, ":")}
	}
	if _, err := os.Stat(bin); err == nil {
		return bin, env(), nil
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return "", nil, err
	}
	tmp, err := os.MkdirTemp(filepath.Dir(dir), "fetch-")
	if err != nil {
		return "", nil, err
	}
	defer os.RemoveAll(tmp)
	cmd := exec.Command("apt-get", "download", "-q", "redis-server", "redis-tools", "libjemalloc2", "liblzf1")
	cmd.Dir = tmp
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", nil, fmt.Errorf("apt-get download redis-server redis-tools: %v\n%s", err, out)
	}
	debs, _ := filepath.Glob(filepath.Join(tmp, "*.deb"))
	for _, deb := range debs {
		if out, err := exec.Command("dpkg-deb", "-x", deb, filepath.Join(tmp, "root")).CombinedOutput(); err != nil {
			return "", nil, fmt.Errorf("dpkg-deb -x %s: %v\n%s", filepath.Base(deb), err, out)
		}
	}
	// Into place in one step: a concurrent run finds it whole or not at all.
	if err := os.Rename(filepath.Join(tmp, "root"), root); err != nil {
		if _, serr := os.Stat(bin); serr != nil {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return "", nil, err
			}
			if err := os.Rename(filepath.Join(tmp, "root"), root); err != nil {
				return "", nil, err
			}
		}
	}
	if _, err := os.Stat(bin); err != nil {
		return "", nil, fmt.Errorf("no usr/bin/redis-server in the packages fetched: %v", err)
	}
	return bin, env(), nil
}

// redisServer is a redis-server of one test's own, on a port of its own,
// that the test may stop and start again (the same port, empty: no
// persistence).
type redisServer struct {
	t      *testing.T
	bin    string
	env    []string
	dir    string
	port   int
	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan error
	stderr *strings.Builder
}

func startRedis(t *testing.T) *redisServer {
	t.Helper()
	bin, env := redisBinary(t)
	r := &redisServer{t: t, bin: bin, env: env, dir: t.TempDir(), port: freePort(t)}
	r.Start()
	t.Cleanup(r.Stop)
	return r
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func (r *redisServer) Addr() string { return fmt.Sprintf("127.0.0.1:%d", r.port) }

// Start runs redis-server and waits until it answers PING.
func (r *redisServer) Start() {
	r.t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cmd != nil {
		return
	}
	cmd := exec.Command(r.bin, "--port", fmt.Sprint(r.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
		"--dir", r.dir, "--loglevel", "warning")
	cmd.Env = append(os.Environ(), r.env...)
	r.stderr = &strings.Builder{}
	cmd.Stdout, cmd.Stderr = r.stderr, r.stderr
	if err := cmd.Start(); err != nil {
		r.t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	r.cmd, r.exited = cmd, exited
	for deadline := time.Now().Add(10 * time.Second); ; {
		if ping(r.Addr()) {
			return
		}
		select {
		case err := <-exited:
			r.cmd = nil
			r.t.Fatalf("redis-server exited: %v\n%s", err, r.stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			r.t.Fatalf("redis-server does not answer on %s\n%s", r.Addr(), r.stderr.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Stop kills redis-server (as a crash would: nothing is saved) and waits
// for it to exit.
func (r *redisServer) Stop() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cmd == nil {
		return
	}
	r.cmd.Process.Signal(syscall.SIGKILL)
	<-r.exited
	r.cmd = nil
}

// Pause stops redis-server without closing its connections (SIGSTOP):
// a hung Redis, whose commands get no answer. Resume lets it go on.
func (r *redisServer) Pause() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.cmd.Process.Signal(syscall.SIGSTOP)
}

func (r *redisServer) Resume() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.cmd.Process.Signal(syscall.SIGCONT)
}

func ping(addr string) bool {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return false
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(time.Second))
	if _, err := io.WriteString(c, "PING\r\n"); err != nil {
		return false
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	return err == nil && strings.HasPrefix(line, "+PONG")
}

// client returns a go-redis client to r, closed at cleanup: short
// timeouts, and ContextTimeoutEnabled so that OpTimeout bounds every
// command.
func (r *redisServer) client(t *testing.T) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{
		Addr: r.Addr(), ContextTimeoutEnabled: true,
		DialTimeout: time.Second, ReadTimeout: time.Second, WriteTimeout: time.Second,
		MaxRetries: 1, DialerRetries: 1,
	})
	t.Cleanup(func() { c.Close() })
	return c
}

// newState returns a State over a client of its own to r, closed at
// cleanup (before its client).
func newState(t *testing.T, r *redisServer, o Options) *State {
	t.Helper()
	c := r.client(t)
	if o.Logger == nil {
		o.Logger = quiet
	}
	if o.OpTimeout == 0 {
		o.OpTimeout = 500 * time.Millisecond
	}
	if o.Prefix == "" {
		o.Prefix = "test:"
	}
	s := New(c, &o)
	t.Cleanup(func() { s.Close() })
	return s
}

// eventually polls cond until it holds or the deadline passes.
func eventually(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %v: %s", within, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// waitListening waits until the State's Pub/Sub connection is subscribed.
func waitListening(t *testing.T, s *State) {
	t.Helper()
	eventually(t, 5*time.Second, "the Pub/Sub connection is subscribed", func() bool { return s.Stats().Listening })
}

func dbsize(t *testing.T, r *redisServer) int64 {
	t.Helper()
	c := r.client(t)
	n, err := c.DBSize(context.Background()).Result()
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// A smoke test of the helper itself: a server that answers, stops and
// starts again on the same port.
func TestTheRedisHelperStartsStopsAndRestarts(t *testing.T) {
	r := startRedis(t)
	c := r.client(t)
	ctx := context.Background()
	if err := c.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	r.Stop()
	if ping(r.Addr()) {
		t.Fatal("still answering after Stop")
	}
	r.Start()
	if v, err := c.Get(ctx, "k").Result(); err != redis.Nil {
		t.Fatalf("after a restart without persistence: %q %v", v, err)
	}
}
