//go:build unix

package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentwire/agentwire/internal/testserver"
)

// signalled is the agentwire binary running a command in front of this
// test binary re-executed as a server, to be sent real signals.
type signalled struct {
	t        *testing.T
	cmd      *exec.Cmd
	stdin    io.WriteCloser
	stdout   lockedBuffer
	stderr   lockedBuffer
	state    string
	exited   chan struct{}
	code     int
	finished time.Time
}

// startSignalled runs `agentwire args... -- SELF` with the server in mode;
// the server records its pid (its process group's id) in a state file.
func startSignalled(t *testing.T, mode string, args ...string) *signalled {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	r := &signalled{t: t, state: t.TempDir(), exited: make(chan struct{})}
	r.cmd = exec.Command(binary, append(args, "--", self)...)
	r.cmd.Env = testserver.Command(mode, testserver.StateEnv+"="+r.state)
	r.cmd.Stdout, r.cmd.Stderr = &r.stdout, &r.stderr
	if r.stdin, err = r.cmd.StdinPipe(); err != nil { // held open: tap passes it on
		t.Fatal(err)
	}
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		err := r.cmd.Wait()
		r.finished = time.Now()
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			r.code = ee.ExitCode()
		}
		close(r.exited)
	}()
	t.Cleanup(func() {
		select {
		case <-r.exited:
		default:
			r.cmd.Process.Kill()
			<-r.exited
		}
		r.stdin.Close()
	})
	return r
}

// serverGroup waits for the server to start and returns its process group.
func (r *signalled) serverGroup() int {
	r.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		b, _ := os.ReadFile(filepath.Join(r.state, "starts"))
		if first, _, ok := strings.Cut(string(b), "\n"); ok {
			pgid, err := strconv.Atoi(first)
			if err != nil {
				r.t.Fatalf("starts file %q", b)
			}
			r.t.Cleanup(func() { syscall.Kill(-pgid, syscall.SIGKILL) })
			return pgid
		}
		select {
		case <-r.exited:
			r.t.Fatalf("agentwire exited %d before the server started; stderr:\n%s", r.code, r.stderr.String())
		case <-time.After(10 * time.Millisecond):
		}
	}
	r.t.Fatal("the server did not start")
	return 0
}

func (r *signalled) signal(s syscall.Signal) {
	r.t.Helper()
	if err := r.cmd.Process.Signal(s); err != nil {
		r.t.Fatal(err)
	}
}

// wait waits for agentwire to exit, at most within d.
func (r *signalled) wait(d time.Duration) int {
	r.t.Helper()
	select {
	case <-r.exited:
		return r.code
	case <-time.After(d):
		r.t.Fatalf("agentwire still running %v after the signal; stderr:\n%s", d, r.stderr.String())
		return 0
	}
}

// groupAlive reports whether a process of group pgid is still running
// (kill -0 on the group; a zombie waiting for its reaper does not count).
func groupAlive(pgid int) bool {
	if err := syscall.Kill(-pgid, 0); errors.Is(err, syscall.ESRCH) {
		return false
	}
	if runtime.GOOS != "linux" {
		return true
	}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		s := string(b)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(f) > 2 && f[2] == strconv.Itoa(pgid) && f[0] != "Z" {
			return true
		}
	}
	return false
}

// assertGroupGone fails unless no process of the group is left once
// agentwire has exited (a killed orphan may take its reaper a moment).
func assertGroupGone(t *testing.T, pgid int) {
	t.Helper()
	for range 100 {
		if !groupAlive(pgid) {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("a process of the server's group %d survived agentwire", pgid)
}

// Defect: Ctrl-C made call exit at once (130), skipping the ladder and the
// report, and the server, in its own process group, kept running. The
// server here ignores stdin EOF and SIGTERM and has a child: the first
// SIGINT runs the whole ladder (grace 0.2 s: killed at about 0.4 s), the
// report is written, and nothing of the group is left.
func TestCtrlCLeavesTheServerRunningCall(t *testing.T) {
	t.Parallel()
	r := startSignalled(t, "stubborn-tree", "call", "--era", "none", "--grace", "0.2s", "--report",
		"--method", "sleep", "--params", `{"ms":60000}`)
	pgid := r.serverGroup()
	time.Sleep(100 * time.Millisecond) // the request is in flight
	sent := time.Now()
	r.signal(syscall.SIGINT)
	if code := r.wait(5 * time.Second); code != 130 {
		t.Errorf("exit %d, want 130; stderr:\n%s", code, r.stderr.String())
	}
	took := r.finished.Sub(sent)
	var rep callReport
	tail := strings.TrimSpace(r.stderr.String())
	json.Unmarshal([]byte(tail[strings.LastIndex(tail, "\n{")+1:]), &rep)
	if rep.Shutdown != "killed" || !strings.Contains(r.stderr.String(), "interrupted by SIGINT") {
		t.Errorf("report %+v; stderr:\n%s", rep, r.stderr.String())
	}
	if took < 350*time.Millisecond {
		t.Errorf("exited %v after SIGINT: the ladder (2 × 0.2 s) did not run", took)
	}
	assertGroupGone(t, pgid)
}

// The second signal does not wait for the ladder: the group is killed at
// once.
func TestCtrlCLeavesTheServerRunningCallSecondSignal(t *testing.T) {
	t.Parallel()
	r := startSignalled(t, "stubborn-tree", "call", "--era", "none", "--grace", "10s", "--report",
		"--method", "sleep", "--params", `{"ms":60000}`)
	pgid := r.serverGroup()
	time.Sleep(100 * time.Millisecond)
	r.signal(syscall.SIGINT)
	time.Sleep(200 * time.Millisecond) // the ladder waits on the closed stdin
	sent := time.Now()
	r.signal(syscall.SIGINT)
	if code := r.wait(3 * time.Second); code != 130 {
		t.Errorf("exit %d, want 130; stderr:\n%s", code, r.stderr.String())
	}
	if took := r.finished.Sub(sent); took > 1500*time.Millisecond {
		t.Errorf("exited %v after the second SIGINT", took)
	}
	if !strings.Contains(r.stderr.String(), `"shutdown":"`) {
		t.Errorf("no report; stderr:\n%s", r.stderr.String())
	}
	assertGroupGone(t, pgid)
}

// The same for check: the battery stops, the report is printed, and
// nothing of the server's group is left.
func TestCtrlCLeavesTheServerRunningCheck(t *testing.T) {
	t.Parallel()
	r := startSignalled(t, "mcp-stubborn-tree", "check", "--json", "--grace", "0.2s")
	pgid := r.serverGroup()
	started := time.Now()
	time.Sleep(50 * time.Millisecond) // in the battery, or its shutdown
	r.signal(syscall.SIGINT)
	if code := r.wait(5 * time.Second); code != 130 {
		t.Errorf("exit %d, want 130; stderr:\n%s", code, r.stderr.String())
	}
	var rep checkReport
	if err := json.Unmarshal([]byte(r.stdout.String()), &rep); err != nil {
		t.Errorf("no report on stdout (%v):\n%s", err, r.stdout.String())
	}
	// The ladder ran to its end: the server ignores EOF and SIGTERM, so
	// that is 2 × 0.2 s after it began; killing it at once would have
	// ended the run some 50 ms after the server started.
	if took := r.finished.Sub(started); took < 380*time.Millisecond {
		t.Errorf("agentwire exited %v after the server started: the ladder did not run; stdout:\n%s", took, r.stdout.String())
	}
	assertGroupGone(t, pgid)
}

// tap used to forward the signal to the server alone and wait for it: a
// server that ignores it (and its children) outlived the tap's caller.
// Now SIGTERM runs the ladder on the group.
func TestCtrlCLeavesTheServerRunningTap(t *testing.T) {
	t.Parallel()
	logPath := filepath.Join(t.TempDir(), "tap.jsonl")
	r := startSignalled(t, "stubborn-tree", "tap", "--grace", "0.2s", "--log", logPath)
	pgid := r.serverGroup()
	time.Sleep(50 * time.Millisecond)
	r.signal(syscall.SIGTERM)
	if code := r.wait(5 * time.Second); code != 143 {
		t.Errorf("exit %d, want 143; stderr:\n%s", code, r.stderr.String())
	}
	log, _ := os.ReadFile(logPath)
	if !strings.Contains(string(log), `"shutdown":"killed"`) || !strings.Contains(string(log), `"signal":"SIGTERM"`) {
		t.Errorf("log:\n%s", log)
	}
	assertGroupGone(t, pgid)
}

// bridge: SIGINT stops serving and runs the ladder on the shared server.
func TestCtrlCLeavesTheServerRunningBridge(t *testing.T) {
	t.Parallel()
	r := startSignalled(t, "mcp-stubborn-tree", "bridge", "--http", "127.0.0.1:0", "--grace", "0.2s")
	pgid := r.serverGroup()
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(r.stderr.String(), "serving MCP") {
		if time.Now().After(deadline) {
			t.Fatalf("bridge not serving; stderr:\n%s", r.stderr.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	r.signal(syscall.SIGINT)
	if code := r.wait(5 * time.Second); code != 0 {
		t.Errorf("exit %d, want 0; stderr:\n%s", code, r.stderr.String())
	}
	assertGroupGone(t, pgid)
}

// Defect: --listen did not say where it listened (with tcp:HOST:0 the
// port could not be known).
func TestListenSaysWhere(t *testing.T) {
	t.Parallel()
	cmd := exec.Command(binary, "serve", "echo", "--listen", "tcp:127.0.0.1:0")
	errPipe, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, _ := bufio.NewReader(errPipe).ReadString('\n')
	cmd.Process.Signal(syscall.SIGINT)
	err = cmd.Wait()
	if !strings.HasPrefix(line, "agentwire serve echo: listening on tcp:127.0.0.1:") || strings.HasSuffix(strings.TrimSpace(line), ":0") {
		t.Errorf("first stderr line %q", line)
	}
	if err != nil {
		t.Errorf("exit after SIGINT: %v", err)
	}
}

// A signal during the ladder that follows the result: the first lets the
// ladder go on, the second kills the group; call exits 130 either way.
func TestCtrlCLeavesTheServerRunningCallDuringShutdown(t *testing.T) {
	t.Parallel()
	r := startSignalled(t, "stubborn-tree", "call", "--era", "none", "--grace", "10s", "--report",
		"--method", "echo", "--params", `{"x":1}`)
	pgid := r.serverGroup()
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(r.stdout.String(), `{"x":1}`) {
		if time.Now().After(deadline) {
			t.Fatalf("no result; stderr:\n%s", r.stderr.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
	r.signal(syscall.SIGINT)
	time.Sleep(150 * time.Millisecond)
	select {
	case <-r.exited:
		t.Fatalf("the first signal ended call (exit %d) before the ladder did", r.code)
	default:
	}
	sent := time.Now()
	r.signal(syscall.SIGINT)
	if code := r.wait(3 * time.Second); code != 130 {
		t.Errorf("exit %d, want 130; stderr:\n%s", code, r.stderr.String())
	}
	if took := r.finished.Sub(sent); took > 1500*time.Millisecond {
		t.Errorf("exited %v after the second SIGINT", took)
	}
	if !strings.Contains(r.stderr.String(), `"shutdown":"killed"`) {
		t.Errorf("report: %s", r.stderr.String())
	}
	assertGroupGone(t, pgid)
}
