package main

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/agentwire/agentwire/internal/debpkg"
)

// ----- redis-server for -fleet: found on PATH, or Debian's package -----

// redisBin is the redis-server binary and the environment it runs in,
// found (or fetched from Debian's packages, into the cache the tests use)
// once per run.
var redisBin = sync.OnceValues(func() (redisBinary, error) {
	path, env, err := debpkg.Find(debpkg.RedisServer)
	return redisBinary{path: path, env: env}, err
})

type redisBinary struct {
	path string
	env  []string // LD_LIBRARY_PATH for an unpacked package
}

// redisProc is a redis-server of the bench's own, on a free loopback
// port, without persistence, stopped (killed) at the end.
type redisProc struct {
	addr   string
	pid    int
	dir    string
	cmd    *exec.Cmd
	exited chan error
	out    *tailBuffer
}

func startRedisServer() (*redisProc, error) {
	b, err := redisBin()
	if err != nil {
		return nil, err
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "bench-redis-")
	if err != nil {
		return nil, err
	}
	r := &redisProc{addr: "127.0.0.1:" + strconv.Itoa(port), dir: dir, out: &tailBuffer{max: 8 << 10}, exited: make(chan error, 1)}
	r.cmd = exec.Command(b.path, "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
		"--dir", dir, "--loglevel", "warning")
	r.cmd.Env = append(os.Environ(), b.env...)
	r.cmd.Stdout, r.cmd.Stderr = r.out, r.out
	dieWithParent(r.cmd)
	if err := r.cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	r.pid = r.cmd.Process.Pid
	go func() { r.exited <- r.cmd.Wait() }()
	for deadline := time.Now().Add(10 * time.Second); ; {
		if _, err := r.do("PING"); err == nil {
			return r, nil
		}
		select {
		case err := <-r.exited:
			os.RemoveAll(dir)
			return nil, fmt.Errorf("redis-server exited: %v: %s", err, r.out.String())
		default:
		}
		if time.Now().After(deadline) {
			r.stop()
			return nil, fmt.Errorf("redis-server does not answer on %s: %s", r.addr, r.out.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (r *redisProc) url() string { return "redis://" + r.addr }

func (r *redisProc) stop() {
	r.cmd.Process.Kill()
	<-r.exited
	os.RemoveAll(r.dir)
}

// version is what the server says it is (INFO server's redis_version).
func (r *redisProc) version() string {
	s, err := r.do("INFO", "server")
	if err != nil {
		return "unknown"
	}
	for line := range strings.Lines(s) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "redis_version:"); ok {
			return v
		}
	}
	return "unknown"
}

// do sends one command on a connection of its own and returns a simple,
// integer or bulk-string reply (all INFO, CONFIG RESETSTAT and PING need).
func (r *redisProc) do(args ...string) (string, error) {
	return debpkg.Do(r.addr, 5*time.Second, args...)
}

// commandStat is one line of INFO commandstats.
type commandStat struct {
	name  string
	calls int64
	usec  int64
}

// commandStats reads INFO commandstats, busiest command first.
func (r *redisProc) commandStats() ([]commandStat, error) {
	s, err := r.do("INFO", "commandstats")
	if err != nil {
		return nil, err
	}
	var out []commandStat
	for line := range strings.Lines(s) {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":")
		name, isCmd := strings.CutPrefix(name, "cmdstat_")
		if !ok || !isCmd {
			continue
		}
		st := commandStat{name: name}
		for _, kv := range strings.Split(rest, ",") {
			k, v, _ := strings.Cut(kv, "=")
			n, _ := strconv.ParseInt(v, 10, 64)
			switch k {
			case "calls":
				st.calls = n
			case "usec":
				st.usec = n
			}
		}
		out = append(out, st)
	}
	slices.SortFunc(out, func(a, b commandStat) int { return int(b.usec - a.usec) })
	return out, nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
