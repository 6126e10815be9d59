package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentwire/agentwire/internal/testserver"
	"go.uber.org/goleak"
)

// binary is the agentwire command, built once without the race detector so
// the black-box tests measure what users run.
var binary string

func TestMain(m *testing.M) {
	testserver.Run() // when re-executed as a misbehaving server
	dir, err := os.MkdirTemp("", "agentwire-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "agentwire")
	if runtime.GOOS == "windows" {
		binary += ".exe"
	}
	goTool := filepath.Join(runtime.GOROOT(), "bin", "go")
	build := exec.Command(goTool, "build", "-o", binary, ".")
	build.Stderr = os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building agentwire:", err)
		os.Exit(1)
	}
	code := 0
	func() {
		defer func() {
			if err := goleak.Find(); err != nil {
				fmt.Fprintln(os.Stderr, "goleak:", err)
				code = 1
			}
		}()
		code = m.Run()
	}()
	os.RemoveAll(dir)
	os.Exit(code)
}

// server is a running `agentwire serve echo`.
type server struct {
	t      *testing.T
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stdout *bufio.Reader
	stderr bytes.Buffer
}

func startServer(t *testing.T, args ...string) *server {
	t.Helper()
	s := &server{t: t}
	s.cmd = exec.Command(binary, append([]string{"serve", "echo"}, args...)...)
	var err error
	if s.stdin, err = s.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	out, err := s.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	s.stdout = bufio.NewReaderSize(out, 1<<20)
	s.cmd.Stderr = &s.stderr
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if s.cmd.ProcessState == nil {
			s.cmd.Process.Kill()
			s.cmd.Wait()
		}
	})
	return s
}

func (s *server) send(lines ...string) {
	s.t.Helper()
	for _, l := range lines {
		if _, err := io.WriteString(s.stdin, l+"\n"); err != nil {
			s.t.Fatalf("writing to the server: %v", err)
		}
	}
}

// readLines reads until EOF and returns every line.
func (s *server) readLines() []string {
	var out []string
	for {
		line, err := s.stdout.ReadString('\n')
		if line != "" {
			out = append(out, strings.TrimSuffix(line, "\n"))
		}
		if err != nil {
			return out
		}
	}
}

func (s *server) wait() (int, time.Duration) {
	start := time.Now()
	err := s.cmd.Wait()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		s.t.Fatal(err)
	}
	return code, time.Since(start)
}

// Acceptance: a session of 100 mixed good and bad lines gets exactly one
// reply per request and per bad line, in any order, and the server keeps
// serving.
func TestMixedSessionOneReplyPerRequestAndBadLine(t *testing.T) {
	s := startServer(t)
	rng := rand.New(rand.NewPCG(1, 2))
	want := map[string]int{} // id or "null" -> replies expected
	expected := 0
	for i := range 100 {
		switch rng.IntN(8) {
		case 0:
			s.send("garbage line " + strconv.Itoa(i))
			want["null"]++
		case 1:
			s.send(`{"jsonrpc":"2.0","id":` + strconv.Itoa(i) + `,"method":"echo"`) // truncated
			want["null"]++
		case 2:
			s.send(`{"hello":` + strconv.Itoa(i) + `}`)
			want["null"]++
		case 3:
			s.send(`{"jsonrpc":"2.0","method":"echo","params":[` + strconv.Itoa(i) + `]}`) // notification
			continue
		case 4:
			s.send(`{"jsonrpc":"2.0","id":"s` + strconv.Itoa(i) + `","method":"sleep","params":{"ms":` + strconv.Itoa(rng.IntN(30)) + `}}`)
			want[`"s`+strconv.Itoa(i)+`"`]++
		case 5:
			s.send(`{"jsonrpc":"2.0","id":` + strconv.Itoa(i) + `,"method":"no/such/method"}`)
			want[strconv.Itoa(i)]++
		case 6:
			s.send(`{"jsonrpc":"2.0","id":` + strconv.Itoa(i) + `,"method":"panic"}`)
			want[strconv.Itoa(i)]++
		default:
			s.send(`{"jsonrpc":"2.0","id":` + strconv.Itoa(i) + `,"method":"echo","params":{"i":` + strconv.Itoa(i) + `}}`)
			want[strconv.Itoa(i)]++
		}
		expected++
	}
	s.send(`{"jsonrpc":"2.0","id":"last","method":"echo","params":["still serving"]}`)
	want[`"last"`]++
	expected++
	s.stdin.Close()
	lines := s.readLines()
	if code, _ := s.wait(); code != 0 {
		t.Errorf("exit status %d; stderr:\n%s", code, s.stderr.String())
	}
	if len(lines) != expected {
		t.Fatalf("got %d replies, want %d", len(lines), expected)
	}
	got := map[string]int{}
	for _, l := range lines {
		var m struct{ ID json.RawMessage }
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("reply is not JSON: %q", l)
		}
		got[string(m.ID)]++
		if string(m.ID) == `"last"` && !strings.Contains(l, "still serving") {
			t.Errorf("last reply %q", l)
		}
	}
	for id, n := range want {
		if got[id] != n {
			t.Errorf("id %s: %d replies, want %d", id, got[id], n)
		}
	}
}

// Acceptance: closing stdin while 50 sleep {"ms":300} requests run: all 50
// replies arrive, then the process exits 0 within about a second.
func TestEOFWithRunningSleepsExitsCleanly(t *testing.T) {
	s := startServer(t)
	for i := range 50 {
		s.send(`{"jsonrpc":"2.0","id":` + strconv.Itoa(i) + `,"method":"sleep","params":{"ms":300}}`)
	}
	closed := time.Now()
	s.stdin.Close()
	lines := s.readLines()
	code, _ := s.wait()
	elapsed := time.Since(closed)
	if len(lines) != 50 {
		t.Fatalf("got %d replies, want 50", len(lines))
	}
	for _, l := range lines {
		if !strings.Contains(l, `"result":{"slept":300}`) {
			t.Errorf("reply %q", l)
		}
	}
	if code != 0 {
		t.Errorf("exit status %d; stderr:\n%s", code, s.stderr.String())
	}
	if elapsed > 1500*time.Millisecond {
		t.Errorf("exited %v after EOF, want about 0.3 s (well under the 5 s grace)", elapsed)
	}
}

// peakRSS returns the peak resident set of a process in bytes (Linux), or
// -1 once the process has exited.
func peakRSS(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return -1
	}
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "VmHWM:") {
			kb, _ := strconv.ParseInt(strings.Fields(l)[1], 10, 64)
			return kb << 10
		}
	}
	return -1
}

// sampleRSS records the largest peak RSS of pid until stop is called.
func sampleRSS(pid int) (stop func() int64) {
	var peak atomic.Int64
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		for {
			if v := peakRSS(pid); v > peak.Load() {
				peak.Store(v)
			}
			select {
			case <-done:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	return func() int64 {
		close(done)
		<-finished
		return peak.Load()
	}
}

// Acceptance: a client that writes 200 MiB of requests without reading
// keeps the server's resident memory under 64 MiB, and once it reads it
// receives every reply (guarantees C3, P6).
func TestPeerThatDoesNotReadKeepsMemoryBounded(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("memory is measured through /proc")
	}
	cases := []struct {
		name  string
		total int64
		size  int
	}{
		{"200 MiB of 16 KiB requests", 200 << 20, 16 << 10},
		{"16 MiB of small requests", 16 << 20, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := startServer(t)
			stopSampling := sampleRSS(s.cmd.Process.Pid)
			var line []byte
			if tc.size > 0 {
				line = []byte(`{"jsonrpc":"2.0","id":1,"method":"echo","params":["` + strings.Repeat("p", tc.size) + `"]}` + "\n")
			} else {
				line = []byte(`{"jsonrpc":"2.0","id":1,"method":"echo","params":{"k":"v"}}` + "\n")
			}
			n := int(tc.total / int64(len(line)))
			var written atomic.Int64
			writeErr := make(chan error, 1)
			go func() {
				w := bufio.NewWriterSize(s.stdin, 64<<10)
				for i := 0; i < n; i++ {
					if _, err := w.Write(line); err != nil {
						writeErr <- err
						return
					}
					written.Add(int64(len(line)))
				}
				err := w.Flush()
				s.stdin.Close()
				writeErr <- err
			}()
			// Wait until the writer is stuck: the server has stopped reading.
			last := int64(-1)
			for written.Load() != last {
				last = written.Load()
				time.Sleep(300 * time.Millisecond)
			}
			if last >= tc.total-int64(len(line)) {
				t.Fatalf("the server read all %d bytes without any reply being read", last)
			}
			stalledRSS := peakRSS(s.cmd.Process.Pid)
			// Now read every reply.
			replies := 0
			for {
				l, err := s.stdout.ReadSlice('\n')
				if err == bufio.ErrBufferFull {
					continue
				}
				if len(l) > 0 {
					replies++
				}
				if err != nil {
					break
				}
			}
			peak := stopSampling()
			if err := <-writeErr; err != nil {
				t.Fatalf("writing: %v", err)
			}
			if code, _ := s.wait(); code != 0 {
				t.Errorf("exit status %d; stderr:\n%s", code, s.stderr.String())
			}
			if replies != n {
				t.Errorf("got %d replies, want %d", replies, n)
			}
			t.Logf("read %d bytes before stalling; peak RSS %d MiB while stalled, %d MiB overall", last, stalledRSS>>20, peak>>20)
			if peak <= 0 {
				t.Fatal("could not read the server's memory use")
			}
			if peak >= 64<<20 {
				t.Errorf("peak RSS %d MiB, want under 64 MiB", peak>>20)
			}
		})
	}
}

// The flags of serve echo take effect.
func TestServeEchoFlags(t *testing.T) {
	s := startServer(t, "--max-message-bytes", "100", "--max-concurrent", "1")
	s.send(`{"jsonrpc":"2.0","id":1,"method":"echo","params":["`+strings.Repeat("x", 200)+`"]}`,
		`{"jsonrpc":"2.0","id":2,"method":"sleep","params":{"ms":100}}`,
		`{"jsonrpc":"2.0","id":3,"method":"sleep","params":{"ms":100}}`)
	start := time.Now()
	s.stdin.Close()
	lines := s.readLines()
	s.wait()
	if len(lines) != 3 || !strings.Contains(lines[0], `"id":null,"error":{"code":-32600`) {
		t.Fatalf("got %q", lines)
	}
	if d := time.Since(start); d < 200*time.Millisecond {
		t.Errorf("two 100 ms sleeps with --max-concurrent 1 took %v", d)
	}

	for _, bad := range [][]string{{"--max-concurrent", "0"}, {"--grace", "x"}, {"--log-level", "loud"}, {"extra"}} {
		cmd := exec.Command(binary, append([]string{"serve", "echo"}, bad...)...)
		if err := cmd.Run(); err == nil {
			t.Errorf("serve echo %q succeeded", bad)
		}
	}
}

// The grace flag bounds how long running handlers may go on after EOF.
func TestServeEchoGraceFlag(t *testing.T) {
	s := startServer(t, "--grace", "200ms", "--shutdown-timeout", "200ms")
	s.send(`{"jsonrpc":"2.0","id":1,"method":"sleep","params":{"ms":60000}}`)
	time.Sleep(50 * time.Millisecond)
	s.stdin.Close()
	start := time.Now()
	lines := s.readLines()
	code, _ := s.wait()
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("exited %v after EOF with --grace 200ms", d)
	}
	// The sleep was cancelled when the grace ran out; echo silences it only
	// for a peer's cancel, so it is answered with the cancellation error.
	if len(lines) != 1 || !strings.Contains(lines[0], `"code":-32603`) || code != 0 {
		t.Errorf("exit %d, replies %q", code, lines)
	}
}

// Acceptance: the demo prints all five tables with live figures,
// in well under 10 s, and exits 0.
func TestDemoRuns(t *testing.T) {
	start := time.Now()
	out, err := exec.Command(binary, "demo").CombinedOutput()
	if err != nil {
		t.Fatalf("demo failed: %v\n%s", err, out)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("demo took %v", d)
	}
	for _, want := range []string{
		"DEBUG: looking things up...", "not a message",
		"server exit status 3", "2 times",
		"exited", "terminated", "killed",
		"steps reached", "slow_report: cancelled at step", "none (as the spec requires)",
		"result   modern 2026-07-28", "error    legacy 2025-11-25", "timeout  legacy 2025-11-25",
	} {
		if !bytes.Contains(out, []byte(want)) {
			t.Errorf("demo output lacks %q:\n%s", want, out)
		}
	}
}

func TestWireDemoRuns(t *testing.T) {
	out, err := exec.Command(binary, "demo", "wire").CombinedOutput()
	if err != nil {
		t.Fatalf("demo wire failed: %v\n%s", err, out)
	}
	for _, want := range []string{`"result":{"hello":"world","n":1.50}`, `"code":-32700`, `"method":"notify/tick","params":{"i":3}`, "server exited with status 0"} {
		if !bytes.Contains(out, []byte(want)) {
			t.Errorf("demo wire output lacks %s:\n%s", want, out)
		}
	}
}

func TestUsage(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := run(nil, &out, &errOut); code != 2 || !strings.Contains(errOut.String(), "Usage") {
		t.Errorf("no args: %d %q", code, errOut.String())
	}
	if code := run([]string{"help"}, &out, &errOut); code != 0 || !strings.Contains(out.String(), "serve echo") {
		t.Errorf("help: %d", code)
	}
	if code := run([]string{"bogus"}, &out, &errOut); code != 2 {
		t.Errorf("bogus: %d", code)
	}
}
