package acpclient

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/agentwire/agentwire/acp"
	"github.com/agentwire/agentwire/jsonrpc"
	"github.com/agentwire/agentwire/rpc"
)

const testKillGrace = 300 * time.Millisecond

// termWire serves a terminal runtime on a real rpc connection: the test
// writes raw request lines and reads raw response lines, as an agent would.
type termWire struct {
	t        *testing.T
	rt       *terminals
	sessions map[string]*Session
	in       *io.PipeWriter

	mu      sync.Mutex
	next    int
	waiting map[string]chan string
	pgids   []int
}

func newTermWire(t *testing.T, o TerminalOptions, sessions ...*Session) *termWire {
	t.Helper()
	return newTermWireLog(t, o, nil, sessions...)
}

func newTermWireLog(t *testing.T, o TerminalOptions, log *slog.Logger, sessions ...*Session) *termWire {
	t.Helper()
	if o.KillGrace == 0 {
		o.KillGrace = testKillGrace
	}
	w := &termWire{t: t, rt: newTerminals(o, log), sessions: map[string]*Session{}, waiting: map[string]chan string{}}
	for _, s := range sessions {
		w.sessions[s.id] = s
	}
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	w.in = inW
	// What the connection's dispatcher does: find the session, then serve.
	h := rpc.HandlerFunc(func(ctx context.Context, req *rpc.Request) (any, error) {
		var p struct {
			SessionID string `json:"sessionId"`
		}
		if err := req.UnmarshalParams(&p); err != nil {
			return nil, err
		}
		s, ok := w.sessions[p.SessionID]
		if !ok {
			return nil, jsonrpc.NewError(acp.CodeResourceNotFound, "session not found", map[string]string{"sessionId": p.SessionID})
		}
		return w.rt.serve(ctx, s, req)
	})
	conn := rpc.New(inR, outW, h, nil)
	readerDone := make(chan struct{})
	go func() {
		defer close(readerDone)
		sc := bufio.NewScanner(outR)
		sc.Buffer(nil, 4<<20)
		for sc.Scan() {
			var m struct {
				ID json.RawMessage `json:"id"`
			}
			if json.Unmarshal(sc.Bytes(), &m) != nil || len(m.ID) == 0 {
				continue
			}
			w.mu.Lock()
			ch := w.waiting[string(m.ID)]
			delete(w.waiting, string(m.ID))
			w.mu.Unlock()
			if ch != nil {
				ch <- sc.Text()
			}
		}
	}()
	t.Cleanup(func() {
		w.rt.closeAll()
		inW.Close()
		conn.Wait()
		outW.Close()
		<-readerDone
		// No test may leave a process group behind.
		for _, g := range w.pgids {
			if err := waitGroupGone(g, 5*time.Second); err != nil {
				syscall.Kill(-g, syscall.SIGKILL)
				t.Errorf("process group %d left behind: %v", g, err)
			}
		}
	})
	return w
}

// send writes one request and returns where its response line will arrive.
func (w *termWire) send(method, params string) (id int, resp <-chan string) {
	w.mu.Lock()
	w.next++
	id = w.next
	ch := make(chan string, 1)
	w.waiting[strconv.Itoa(id)] = ch
	w.mu.Unlock()
	w.write(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":%q,"params":%s}`, id, method, params))
	return id, ch
}

func (w *termWire) write(line string) {
	if _, err := io.WriteString(w.in, line+"\n"); err != nil {
		w.t.Fatal(err)
	}
}

func (w *termWire) call(method, params string) string {
	w.t.Helper()
	_, ch := w.send(method, params)
	select {
	case line := <-ch:
		return line
	case <-time.After(20 * time.Second):
		w.t.Fatalf("no response to %s %s", method, params)
		return ""
	}
}

// create makes a terminal and returns its id; it records the process group
// for the leak check.
func (w *termWire) create(session, params string) string {
	w.t.Helper()
	line := w.call(acp.MethodTerminalCreate, `{"sessionId":"`+session+`",`+params+`}`)
	var r struct {
		Result struct {
			TerminalID string `json:"terminalId"`
		} `json:"result"`
	}
	if json.Unmarshal([]byte(line), &r) != nil || r.Result.TerminalID == "" {
		w.t.Fatalf("terminal/create %s: %s", params, line)
	}
	if term, ok := w.rt.get(r.Result.TerminalID); ok && term.proc != nil {
		w.mu.Lock()
		w.pgids = append(w.pgids, term.proc.Pid())
		w.mu.Unlock()
	}
	return r.Result.TerminalID
}

func (w *termWire) on(method, session, id string) string {
	w.t.Helper()
	return w.call(method, `{"sessionId":"`+session+`","terminalId":"`+id+`"}`)
}

type outputResult struct {
	Result struct {
		Output     string `json:"output"`
		Truncated  bool   `json:"truncated"`
		ExitStatus *struct {
			ExitCode *int    `json:"exitCode"`
			Signal   *string `json:"signal"`
		} `json:"exitStatus"`
	} `json:"result"`
}

func (w *termWire) output(session, id string) outputResult {
	w.t.Helper()
	line := w.on(acp.MethodTerminalOutput, session, id)
	var r outputResult
	if err := json.Unmarshal([]byte(line), &r); err != nil || !strings.Contains(line, `"result"`) {
		w.t.Fatalf("terminal/output: %s", line)
	}
	return r
}

// waitOutput polls terminal/output until cond holds.
func (w *termWire) waitOutput(session, id string, cond func(outputResult) bool) outputResult {
	w.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		r := w.output(session, id)
		if cond(r) {
			return r
		}
		if time.Now().After(deadline) {
			w.t.Fatalf("terminal %s: output never matched; last %+v", id, r.Result)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func newTestSession(t *testing.T, id string) *Session {
	dir := t.TempDir()
	return &Session{id: id, cwd: dir, roots: []string{dir}}
}

// groupState reports whether a process group exists and whether any of its
// members still runs (a zombie runs nothing: it waits for its parent, or
// init, to reap it).
func groupState(pgid int) (exists, running bool) {
	if err := syscall.Kill(-pgid, 0); err == syscall.ESRCH {
		return false, false
	}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		s := string(b)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:]) // state ppid pgrp ...
		if len(f) > 2 && f[2] == strconv.Itoa(pgid) && f[0] != "Z" {
			return true, true
		}
	}
	return true, false
}

// deathWindow is how long a test allows a process sent SIGKILL to finish
// dying: the kernel tears it down asynchronously, after it has closed its
// files (which is what the runtime waits for), so /proc may show it for a
// moment more. A command the runtime failed to kill runs for 600 s.
const deathWindow = time.Second

// stillRunning reports whether a member of the group still runs once
// deathWindow has passed.
func stillRunning(pgid int) bool {
	deadline := time.Now().Add(deathWindow)
	for {
		if _, running := groupState(pgid); !running || time.Now().After(deadline) {
			return running
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// stillRunningIn is runningIn once deathWindow has passed.
func stillRunningIn(dir string) []string {
	deadline := time.Now().Add(deathWindow)
	for {
		if left := runningIn(dir); len(left) == 0 || time.Now().After(deadline) {
			return left
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// waitGroupGone waits until nothing of the group runs, then until the
// group has disappeared (ESRCH); init may take a moment to reap the
// zombies of members that were not our children.
func waitGroupGone(pgid int, d time.Duration) error {
	deadline := time.Now().Add(d)
	for {
		exists, running := groupState(pgid)
		if !exists {
			return nil
		}
		if time.Now().After(deadline) {
			if running {
				return fmt.Errorf("a member still runs")
			}
			return fmt.Errorf("only zombies left, never reaped")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func jsonArgs(args ...string) string {
	b, _ := json.Marshal(args)
	return string(b)
}

// Output is cut at a character boundary: dropping from the front never
// leaves half a character, and the result is valid UTF-8 within the limit.
func TestTerminalOutputIsValidUTF8AtACharacterBoundary(t *testing.T) {
	s := newTestSession(t, "s1")
	w := newTermWire(t, TerminalOptions{}, s)
	text := "ééé€😀" // 13 bytes: 2+2+2+3+4
	for _, tc := range []struct {
		limit int
		want  string
	}{{7, "€😀"}, {6, "😀"}, {5, "😀"}, {3, ""}, {0, ""}, {13, text}} {
		id := w.create("s1", `"command":"printf","args":`+jsonArgs(text)+`,"outputByteLimit":`+strconv.Itoa(tc.limit))
		w.on(acp.MethodTerminalWait, "s1", id)
		r := w.output("s1", id).Result
		if r.Output != tc.want || !utf8.ValidString(r.Output) || len(r.Output) > tc.limit || r.Truncated != (tc.limit < 13) {
			t.Errorf("limit %d: output %q truncated %v, want %q truncated %v", tc.limit, r.Output, r.Truncated, tc.want, tc.limit < 13)
		}
	}
}

// The rendering rules on their own: a trailing partial character is held
// back while the command runs (its rest may come), invalid bytes become
// U+FFFD, and the replacement growing past the limit is cut again.
func TestTerminalOutputRenderingRules(t *testing.T) {
	e := "é" // 0xC3 0xA9
	for _, tc := range []struct {
		name             string
		in               string
		dropped, running bool
		limit            int
		want             string
		truncated        bool
	}{
		{"partial character held back while running", "ab" + e[:1], false, true, 10, "ab", false},
		{"partial character replaced once exited", "ab" + e[:1], false, false, 10, "ab\uFFFD", false},
		{"leading continuation bytes skipped after a drop", e[1:] + "xy", true, false, 10, "xy", true},
		{"invalid byte kept as U+FFFD", "a\xffb", false, false, 10, "a\uFFFDb", false},
		{"replacement cut back under the limit", "a\xff", false, false, 2, "a", true},
	} {
		got, truncated := renderOutput([]byte(tc.in), tc.dropped, tc.running, tc.limit)
		if got != tc.want || truncated != tc.truncated || !utf8.ValidString(got) || len(got) > tc.limit {
			t.Errorf("%s: %q %v, want %q %v", tc.name, got, truncated, tc.want, tc.truncated)
		}
	}
}

// A flooding command is drained without end into a ring at the limit, and
// kill still works.
func TestTerminalFloodStaysWithinTheLimitAndKillWorks(t *testing.T) {
	s := newTestSession(t, "s1")
	w := newTermWire(t, TerminalOptions{}, s)
	id := w.create("s1", `"command":"yes","outputByteLimit":4096`)
	r := w.waitOutput("s1", id, func(r outputResult) bool { return r.Result.Truncated })
	if len(r.Result.Output) > 4096 || strings.Trim(r.Result.Output, "y\n") != "" || r.Result.ExitStatus != nil {
		t.Fatalf("flood output: %d bytes, exit %v", len(r.Result.Output), r.Result.ExitStatus)
	}
	term, _ := w.rt.get(id)
	term.mu.Lock()
	size := cap(term.buf)
	term.mu.Unlock()
	if size > 4096 {
		t.Errorf("ring capacity %d, want at most the 4096-byte limit", size)
	}
	if line := w.on(acp.MethodTerminalKill, "s1", id); !strings.HasSuffix(line, `,"result":{}}`) {
		t.Fatalf("kill: %s", line)
	}
	r = w.output("s1", id)
	if es := r.Result.ExitStatus; es == nil || es.ExitCode != nil || es.Signal == nil || *es.Signal != "SIGTERM" {
		t.Fatalf("after kill: %+v", r.Result.ExitStatus)
	}
	if len(r.Result.Output) == 0 {
		t.Error("kill dropped the output; it must stay")
	}
}

// A command that ignores SIGTERM, with a child that inherits the ignore,
// is killed with SIGKILL after KillGrace, and its whole group with it.
func TestTerminalKillReachesACommandThatIgnoresSIGTERM(t *testing.T) {
	s := newTestSession(t, "s1")
	w := newTermWire(t, TerminalOptions{}, s)
	id := w.create("s1", `"command":"sh","args":["-c","trap '' TERM; echo ready; sleep 600 & wait"]`)
	w.waitOutput("s1", id, func(r outputResult) bool { return r.Result.Output == "ready\n" })
	term, _ := w.rt.get(id)
	pgid := term.proc.Pid()
	_, wait := w.send(acp.MethodTerminalWait, `{"sessionId":"s1","terminalId":"`+id+`"}`)
	start := time.Now()
	w.on(acp.MethodTerminalKill, "s1", id)
	took := time.Since(start)
	if took < testKillGrace || took > testKillGrace+time.Second {
		t.Errorf("kill took %v, want KillGrace (%v) to KillGrace + 1 s", took, testKillGrace)
	}
	if line := <-wait; !strings.Contains(line, `"result":{"exitCode":null,"signal":"SIGKILL"}`) {
		t.Fatalf("wait_for_exit: %s", line)
	}
	if stillRunning(pgid) {
		t.Fatal("a member of the group still runs after kill returned")
	}
	if err := waitGroupGone(pgid, 5*time.Second); err != nil {
		t.Fatalf("group %d: %v", pgid, err)
	}
	if st := w.rt.stats(); st.Killed != 1 {
		t.Errorf("Stats.Killed = %d", st.Killed)
	}
}

// The exit code is reported by wait_for_exit and in terminal/output, with
// stdout and stderr in the order written; stdin is closed.
func TestTerminalReportsTheExitCode(t *testing.T) {
	s := newTestSession(t, "s1")
	w := newTermWire(t, TerminalOptions{}, s)
	id := w.create("s1", `"command":"sh","args":["-c","echo a; echo b >&2; echo c; exit 3"]`)
	if line := w.on(acp.MethodTerminalWait, "s1", id); !strings.Contains(line, `"result":{"exitCode":3,"signal":null}`) {
		t.Fatalf("wait_for_exit: %s", line)
	}
	r := w.output("s1", id).Result
	if r.Output != "a\nb\nc\n" || r.Truncated || r.ExitStatus == nil || *r.ExitStatus.ExitCode != 3 || r.ExitStatus.Signal != nil {
		t.Fatalf("output %+v", r)
	}
	id = w.create("s1", `"command":"cat"`) // reads stdin: EOF at once
	if line := w.on(acp.MethodTerminalWait, "s1", id); !strings.Contains(line, `"exitCode":0`) {
		t.Fatalf("cat with a closed stdin: %s", line)
	}
}

// release of a running command returns once its group is gone; the id is
// unknown afterwards.
func TestTerminalReleaseWhileRunning(t *testing.T) {
	s := newTestSession(t, "s1")
	w := newTermWire(t, TerminalOptions{}, s)
	id := w.create("s1", `"command":"sh","args":["-c","sleep 600 & sleep 600"]`)
	term, _ := w.rt.get(id)
	pgid := term.proc.Pid()
	if line := w.on(acp.MethodTerminalRelease, "s1", id); !strings.Contains(line, `"result":{}`) {
		t.Fatalf("release: %s", line)
	}
	if stillRunning(pgid) {
		t.Fatal("the group still runs after release returned")
	}
	for _, m := range []string{acp.MethodTerminalOutput, acp.MethodTerminalWait, acp.MethodTerminalKill, acp.MethodTerminalRelease} {
		if line := w.on(m, "s1", id); !strings.Contains(line, `"error":{"code":-32002,"message":"terminal not found: `+id+`","data":{"terminalId":"`+id+`"}}`) {
			t.Errorf("%s after release: %s", m, line)
		}
	}
	if _, ok := w.rt.get(id); ok {
		t.Error("get still finds a released terminal")
	}
	if st := w.rt.stats(); st.Live != 0 || st.Released != 1 || st.Killed != 1 {
		t.Errorf("stats %+v", st)
	}
}

// MaxLive bounds the live terminals: the 17th gets -33000, and a release
// frees a place.
func TestTerminalTheSeventeenthLiveTerminalIsRefused(t *testing.T) {
	s := newTestSession(t, "s1")
	var logs strings.Builder
	var logMu sync.Mutex
	log := slog.New(slog.NewTextHandler(writerFunc(func(b []byte) (int, error) {
		logMu.Lock()
		defer logMu.Unlock()
		return logs.Write(b)
	}), nil))
	w := newTermWireLog(t, TerminalOptions{}, log, s)
	var ids []string
	for range DefaultMaxTerminals {
		ids = append(ids, w.create("s1", `"command":"sleep","args":["600"]`))
	}
	line := w.call(acp.MethodTerminalCreate, `{"sessionId":"s1","command":"sleep","args":["600"]}`)
	if !strings.Contains(line, `"error":{"code":-33000,"message":"resource limit exceeded: too many terminals","data":{"limit":16,"reason":"too_many_terminals"}}`) {
		t.Fatalf("17th create: %s", line)
	}
	logMu.Lock()
	logged := logs.String()
	logMu.Unlock()
	if !strings.Contains(logged, "terminal refused") || !strings.Contains(logged, "limit=16") {
		t.Errorf("the refusal was not logged: %q", logged)
	}
	w.on(acp.MethodTerminalRelease, "s1", ids[0])
	w.create("s1", `"command":"sleep","args":["600"]`)
	if st := w.rt.stats(); st.Refused != 1 || st.Live != 16 || st.Created != 17 {
		t.Errorf("stats %+v", st)
	}
}

// closeSession releases that session's terminals and no other's; closeAll
// releases the rest and refuses later creates.
func TestTerminalCloseSessionAndCloseAllReleaseEverything(t *testing.T) {
	s1, s2 := newTestSession(t, "s1"), newTestSession(t, "s2")
	w := newTermWire(t, TerminalOptions{}, s1, s2)
	a := w.create("s1", `"command":"sleep","args":["600"]`)
	b := w.create("s1", `"command":"sh","args":["-c","trap '' TERM; sleep 600"]`)
	c := w.create("s2", `"command":"sleep","args":["600"]`)
	pg := func(id string) int { term, _ := w.rt.get(id); return term.proc.Pid() }
	ga, gb, gc := pg(a), pg(b), pg(c)
	w.rt.closeSession(s1)
	for _, g := range []int{ga, gb} {
		if stillRunning(g) {
			t.Errorf("group %d of the closed session still runs", g)
		}
	}
	if _, running := groupState(gc); !running {
		t.Fatal("the other session's terminal was ended")
	}
	if line := w.on(acp.MethodTerminalOutput, "s1", a); !strings.Contains(line, `"code":-32002`) {
		t.Errorf("output after closeSession: %s", line)
	}
	w.rt.closeAll()
	if stillRunning(gc) {
		t.Error("closeAll left a terminal running")
	}
	line := w.call(acp.MethodTerminalCreate, `{"sessionId":"s2","command":"true"}`)
	if !strings.Contains(line, `"error":{"code":-32002`) {
		t.Errorf("create after closeAll: %s", line)
	}
	if st := w.rt.stats(); st.Live != 0 || st.Released != 3 {
		t.Errorf("stats %+v", st)
	}
}

// A wait_for_exit the agent cancels is answered -32800; the command goes
// on running.
func TestTerminalWaitCancelledByTheAgent(t *testing.T) {
	s := newTestSession(t, "s1")
	w := newTermWire(t, TerminalOptions{}, s)
	id := w.create("s1", `"command":"sleep","args":["600"]`)
	rid, wait := w.send(acp.MethodTerminalWait, `{"sessionId":"s1","terminalId":"`+id+`"}`)
	w.write(fmt.Sprintf(`{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":%d}}`, rid))
	select {
	case line := <-wait:
		if !strings.Contains(line, `"error":{"code":-32800`) {
			t.Fatalf("cancelled wait: %s", line)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the cancelled wait was never answered")
	}
	if r := w.output("s1", id); r.Result.ExitStatus != nil {
		t.Fatalf("the command ended with the wait: %+v", r.Result.ExitStatus)
	}
}

// A command that is not found makes a terminal that says so and exits 127;
// a whole command line in "command" runs through /bin/sh -c.
func TestTerminalCommandNotFoundAndShellFallback(t *testing.T) {
	s := newTestSession(t, "s1")
	w := newTermWire(t, TerminalOptions{}, s)
	id := w.create("s1", `"command":"agentwire-no-such-command","args":["x"]`)
	if line := w.on(acp.MethodTerminalWait, "s1", id); !strings.Contains(line, `"result":{"exitCode":127,"signal":null}`) {
		t.Fatalf("wait: %s", line)
	}
	if r := w.output("s1", id).Result; r.Output != "agentwire: command not found: agentwire-no-such-command\n" {
		t.Fatalf("output %q", r.Output)
	}
	id = w.create("s1", `"command":"echo hello   world | tr a-z A-Z"`)
	w.on(acp.MethodTerminalWait, "s1", id)
	if r := w.output("s1", id).Result; r.Output != "HELLO WORLD\n" {
		t.Fatalf("shell fallback output %q", r.Output)
	}
	if term, _ := w.rt.get(id); term.Command() != "echo hello   world | tr a-z A-Z" {
		t.Errorf("Command() = %q", term.Command())
	}
	id = w.create("s1", `"command":"printf","args":["%s|","a b","it's"]`)
	if term, _ := w.rt.get(id); term.Command() != `printf '%s|' 'a b' 'it'\''s'` {
		t.Errorf("Command() = %q", term.Command())
	}
	if st := w.rt.stats(); st.ShellFallbacks != 1 || st.Created != 3 {
		t.Errorf("stats %+v", st)
	}
}

// cwd must be absolute and, by default, under the session's roots; it
// defaults to the session's cwd. The request's env overrides the base.
func TestTerminalCwdAndEnv(t *testing.T) {
	s := newTestSession(t, "s1")
	sub := filepath.Join(s.cwd, "sub")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	base := func(*Session) []string { return []string{"PATH=" + os.Getenv("PATH"), "FOO=base", "BAR=base"} }
	w := newTermWire(t, TerminalOptions{Env: base}, s)
	for _, tc := range []struct{ params, want string }{
		{`"cwd":"relative/dir"`, `"code":-32602,"message":"invalid params: cwd must be an absolute path"`},
		{`"cwd":"/"`, `"code":-32602,"message":"invalid params: cwd is outside the session's roots"`},
		{`"cwd":` + strconv.Quote(s.cwd+"/../"+filepath.Base(s.cwd)+"x"), `"reason":"outside_session_roots"`},
		{`"cwd":` + strconv.Quote(filepath.Join(s.cwd, "missing")), `"reason":"not_a_directory"`},
		{`"outputByteLimit":-1`, `"code":-32602`},
		{`"env":[{"name":"A=B","value":"x"}]`, `"reason":"invalid_env"`},
	} {
		line := w.call(acp.MethodTerminalCreate, `{"sessionId":"s1","command":"pwd",`+tc.params+`}`)
		if !strings.Contains(line, tc.want) {
			t.Errorf("%s: %s, want %s", tc.params, line, tc.want)
		}
	}
	run := func(params string) string {
		id := w.create("s1", params)
		w.on(acp.MethodTerminalWait, "s1", id)
		return w.output("s1", id).Result.Output
	}
	if got := run(`"command":"pwd"`); got != s.cwd+"\n" {
		t.Errorf("default cwd: %q", got)
	}
	if got := run(`"command":"pwd","cwd":` + strconv.Quote(sub)); got != sub+"\n" {
		t.Errorf("cwd %s: %q", sub, got)
	}
	if got := run(`"command":"sh","args":["-c","echo $FOO $BAR"],"env":[{"name":"FOO","value":"request"}]`); got != "request base\n" {
		t.Errorf("env: %q", got)
	}
	outside := newTermWire(t, TerminalOptions{AllowCwdOutsideRoots: true}, s)
	id := outside.create("s1", `"command":"pwd","cwd":"/"`)
	outside.on(acp.MethodTerminalWait, "s1", id)
	if got := outside.output("s1", id).Result.Output; got != "/\n" {
		t.Errorf("AllowCwdOutsideRoots: %q", got)
	}
}

// A terminal of another session is as unknown as one that never existed.
func TestTerminalOfAnotherSessionIsNotFound(t *testing.T) {
	s1, s2 := newTestSession(t, "s1"), newTestSession(t, "s2")
	w := newTermWire(t, TerminalOptions{}, s1, s2)
	id := w.create("s1", `"command":"sleep","args":["600"]`)
	for _, m := range []string{acp.MethodTerminalOutput, acp.MethodTerminalKill, acp.MethodTerminalRelease} {
		if line := w.on(m, "s2", id); !strings.Contains(line, `"data":{"terminalId":"`+id+`"}`) || !strings.Contains(line, `"code":-32002`) {
			t.Errorf("%s from s2: %s", m, line)
		}
	}
	if line := w.on(acp.MethodTerminalOutput, "s1", "term_999"); !strings.Contains(line, `"code":-32002`) {
		t.Errorf("unknown id: %s", line)
	}
	if r := w.output("s1", id); r.Result.ExitStatus != nil {
		t.Error("another session's kill reached the terminal")
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(b []byte) (int, error) { return f(b) }

// runningIn lists the live (not zombie) processes whose working directory
// is dir.
func runningIn(dir string) []string {
	var found []string
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		cwd, err := os.Readlink(filepath.Join("/proc", e.Name(), "cwd"))
		if err != nil || cwd != dir {
			continue
		}
		b, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		s := string(b)
		if f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:]); len(f) > 0 && f[0] != "Z" {
			found = append(found, e.Name())
		}
	}
	return found
}

// Creates racing a close: whatever was started is released before the
// close returns, whether it made it into the table or was still starting.
func TestTerminalCreatesRacingCloseAllLeaveNothingRunning(t *testing.T) {
	s := newTestSession(t, "s1")
	w := newTermWire(t, TerminalOptions{}, s)
	var resps []<-chan string
	for range 12 {
		_, ch := w.send(acp.MethodTerminalCreate, `{"sessionId":"s1","command":"sleep","args":["600"]}`)
		resps = append(resps, ch)
	}
	first := <-resps[0] // the others are being served now
	w.rt.closeAll()
	if left := stillRunningIn(s.cwd); len(left) > 0 {
		t.Fatalf("processes still running after closeAll: %v", left)
	}
	if !strings.Contains(first, `"terminalId"`) {
		t.Fatalf("first create: %s", first)
	}
	for _, ch := range resps[1:] {
		<-ch
	}
	if left := stillRunningIn(s.cwd); len(left) > 0 {
		t.Fatalf("processes running after the racing creates answered: %v", left)
	}
	if st := w.rt.stats(); st.Live != 0 || st.Created != st.Released {
		t.Fatalf("stats %+v: every created terminal must be released", st)
	}
}

// A command that exits leaving a background child: the exit is reported
// (the child holding the pipe does not hide it), and release kills the
// child.
func TestTerminalReleaseKillsWhatAnExitedCommandLeftBehind(t *testing.T) {
	s := newTestSession(t, "s1")
	w := newTermWire(t, TerminalOptions{}, s)
	id := w.create("s1", `"command":"sh","args":["-c","sleep 600 & echo started"]`)
	if line := w.on(acp.MethodTerminalWait, "s1", id); !strings.Contains(line, `"result":{"exitCode":0,"signal":null}`) {
		t.Fatalf("wait: %s", line)
	}
	if r := w.output("s1", id).Result; r.Output != "started\n" {
		t.Fatalf("output %q", r.Output)
	}
	if left := runningIn(s.cwd); len(left) != 1 {
		t.Fatalf("want the background sleep running before release, found %v", left)
	}
	w.on(acp.MethodTerminalRelease, "s1", id)
	if left := stillRunningIn(s.cwd); len(left) > 0 {
		t.Fatalf("release left %v running", left)
	}
	if st := w.rt.stats(); st.Killed != 0 {
		t.Errorf("Killed = %d: the command itself had exited", st.Killed)
	}
}
