package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"
)

// serverProc is an HTTP server running in a process of its own.
type serverProc struct {
	name   string
	url    string
	pid    int
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stderr *tailBuffer
}

// startHTTPServer runs the named server on a loopback port and waits for
// its URL. maxStreams > 0 raises the server's stream limits (agentwire).
func startHTTPServer(s httpServer, maxStreams int) (*serverProc, error) {
	var cmd *exec.Cmd
	if s.node {
		if err := ensureNodeModules(); err != nil {
			return nil, err
		}
		cmd = exec.Command("node", "ts-server.mjs")
	} else {
		self, err := os.Executable()
		if err != nil {
			return nil, err
		}
		cmd = exec.Command(self, "-serve-http", s.name, "-addr", "127.0.0.1:0", "-max-streams", strconv.Itoa(maxStreams))
	}
	p := &serverProc{name: s.name, cmd: cmd, stderr: &tailBuffer{max: 8 << 10}}
	cmd.Stderr = p.stderr
	var err error
	if p.stdin, err = cmd.StdinPipe(); err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p.pid = cmd.Process.Pid
	got := make(chan error, 1)
	go func() {
		var err error
		p.url, err = readURL(out)
		got <- err
		io.Copy(io.Discard, out)
	}()
	select {
	case err = <-got:
	case <-time.After(20 * time.Second):
		err = errors.New("no address within 20 s")
	}
	if err != nil {
		p.stop()
		return nil, fmt.Errorf("%s: %w; stderr: %s", s.name, err, p.stderr.String())
	}
	return p, nil
}

// stop ends the server: stdin's end, then a kill if it lingers.
func (p *serverProc) stop() error {
	p.stdin.Close()
	done := make(chan error, 1)
	go func() { done <- p.cmd.Wait() }()
	select {
	case err := <-done:
		var exit *exec.ExitError
		if errors.As(err, &exit) && exit.ExitCode() == 0 {
			return nil
		}
		return err
	case <-time.After(5 * time.Second):
		p.cmd.Process.Kill()
		<-done
		return nil
	}
}

// ----- /proc: CPU time and resident memory of a process -----

var clkTck = sync.OnceValue(func() float64 {
	// The kernel's USER_HZ; getconf asks libc, which asks the kernel
	// (sysconf(_SC_CLK_TCK)). It is 100 on every Linux there is.
	out, err := exec.Command("getconf", "CLK_TCK").Output()
	if err == nil {
		if v, err := strconv.ParseFloat(strings.TrimSpace(string(out)), 64); err == nil && v > 0 {
			return v
		}
	}
	return 100
})

// cpuSeconds is the user+system CPU time a process has used.
func cpuSeconds(pid int) (float64, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	// The command name (field 2) may hold spaces: fields are counted
	// after its closing parenthesis. utime and stime are fields 14, 15.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, errors.New("malformed /proc stat")
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0, errors.New("malformed /proc stat")
	}
	ut, err1 := strconv.ParseFloat(f[11], 64)
	st, err2 := strconv.ParseFloat(f[12], 64)
	if err1 != nil || err2 != nil {
		return 0, errors.New("malformed /proc stat")
	}
	return (ut + st) / clkTck(), nil
}

// rssBytes is a process's resident set (VmRSS).
func rssBytes(pid int) (int64, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10, err
		}
	}
	return 0, errors.New("no VmRSS")
}

// ----- the TypeScript server's packages -----

var nodeModules struct {
	once sync.Once
	err  error
}

// haveNode reports whether node and npm are installed.
func haveNode() bool {
	_, err1 := exec.LookPath("node")
	_, err2 := exec.LookPath("npm")
	return err1 == nil && err2 == nil
}

// ensureNodeModules installs bench/package-lock.json's packages (npm ci)
// once per run, unless node_modules is already there.
func ensureNodeModules() error {
	nodeModules.once.Do(func() {
		if !haveNode() {
			nodeModules.err = errors.New("node or npm is not installed")
			return
		}
		if _, err := os.Stat("node_modules/@modelcontextprotocol/server/package.json"); err == nil {
			return
		}
		cmd := exec.Command("npm", "ci", "--no-audit", "--no-fund", "--loglevel=error")
		if out, err := cmd.CombinedOutput(); err != nil {
			nodeModules.err = fmt.Errorf("npm ci: %v: %s", err, out)
		}
	})
	return nodeModules.err
}
