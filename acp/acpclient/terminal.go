package acpclient

// The terminal runtime: what serves terminal/create, terminal/output,
// terminal/wait_for_exit, terminal/kill and terminal/release when
// Options.Terminals is set.
//
// What it is:
//
//   - Each terminal is one command started with process.Start: exec
//     without a shell, in its own process group, never tied to a request's
//     context (a cancelled create must not kill what it started). Its stdin
//     is closed at once; stdout and stderr share one pipe
//     (process.Options.CombinedOutput), so output keeps the kernel's order.
//   - One reader goroutine per terminal (per command, not per message)
//     copies the pipe into a ring of at most min(outputByteLimit,
//     MaxOutputBytes) bytes, dropping from the front. It never waits for a
//     consumer, so a flooding command is always drained: its pipe never
//     fills, memory stays at the limit, and the cost is CPU only.
//     terminal/output cuts what it returns at a character boundary, so it
//     is valid UTF-8 and never longer than the limit.
//   - kill, release and the end of a session or connection run
//     process.Terminate: SIGTERM to the group, KillGrace, SIGKILL to the
//     group, reap, SIGKILL to whatever is left in it. They return only
//     after that, so a terminal never outlives its release, its session or
//     its connection.
//   - At most MaxLive terminals are live (created and not yet released) per
//     connection; the excess is refused with -33000 (never -32000, which
//     ACP clients read as "authentication required").
//
// What it is not:
//
//   - Not a sandbox. The command runs with this process's user and rights;
//     the check that cwd lies under the session's roots is lexical and
//     only picks where the command starts (it can cd anywhere, and follow
//     any symlink).
//   - Not a complete process tracker. A process that calls setsid (or
//     setpgid) has left the group and is not reached; neither are double
//     forks that do so. Processes of the group that were not our children
//     are reaped by init (or a subreaper), after the runtime returns: they
//     are zombies by then, running nothing and holding no pipe.
//   - Not a PTY. Programs see a pipe: no colours, full buffering, no
//     terminal size, and anything that insists on a tty fails as it would
//     under a pipe.
//
// Two choices agents handle better than errors: a command line put whole
// into "command" (no args, not an executable, a space in it) runs as
// /bin/sh -c command, counted in ShellFallbacks; and a command that is not
// found still makes a terminal, whose output is "agentwire: command not
// found: X" and whose exit code is 127, as a shell would say.

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/agentwire/agentwire/acp"
	"github.com/agentwire/agentwire/internal/refusal"
	"github.com/agentwire/agentwire/jsonrpc"
	"github.com/agentwire/agentwire/process"
	"github.com/agentwire/agentwire/rpc"
)

// TerminalStats counts what the terminal runtime did.
type TerminalStats struct {
	Created        int64 // terminals made (a command not found makes one too)
	Live           int64 // created (or being created) and not yet released
	Killed         int64 // commands still running when kill, release or a close ended them
	Released       int64 // terminals released (by the agent, or by a session's or the connection's end)
	Refused        int64 // creates refused because MaxLive terminals were live
	ShellFallbacks int64 // commands run as /bin/sh -c COMMAND
}

// ExitStatus is how a terminal's command ended: ExitCode is nil when a
// signal ended it, and Signal ("SIGKILL", "SIGTERM", ...) is empty when it
// exited by itself.
type ExitStatus struct {
	ExitCode *int
	Signal   string
}

// Terminal is one command an agent runs through terminal/create. A UI
// renders a {"type":"terminal"} tool call content from it
// (Conn.Terminal). Its methods are safe for concurrent use; after the
// terminal is released the object keeps its last output and status, but the
// connection no longer knows it.
type Terminal struct {
	id      string
	command string
	session *Session
	proc    *process.Process // nil when the command could not be found
	limit   int

	mu      sync.Mutex
	buf     []byte // the ring: at most limit bytes, the oldest at head once full
	head    int
	dropped bool
	exited  bool
	status  ExitStatus

	done       chan struct{} // closed once the command exited and its output was read
	readerDone chan struct{} // closed when the reader stopped (nil without a process)
	killOnce   sync.Once
	killed     bool // the command was still running when Terminate ran (set in killOnce)
}

// outputSettle bounds how long the exit of a command waits for the reader
// to reach EOF: a background process of the command may hold the pipe for
// ever, and the exit must still be reported.
const outputSettle = 200 * time.Millisecond

// readChunk is what the reader asks the pipe for at a time.
const readChunk = 32 << 10

// ID returns the terminal's id, as in terminalId.
func (t *Terminal) ID() string { return t.id }

// Command returns the command line as text (arguments quoted as a shell
// would need them), for display.
func (t *Terminal) Command() string { return t.command }

// Output returns the output kept so far and whether some was dropped to
// stay within the terminal's byte limit. The text is valid UTF-8, cut at a
// character boundary, and no longer than the limit.
func (t *Terminal) Output() (text string, truncated bool) {
	t.mu.Lock()
	b := make([]byte, len(t.buf))
	n := copy(b, t.buf[t.head:])
	copy(b[n:], t.buf[:t.head])
	dropped, running := t.dropped, !t.exited
	t.mu.Unlock()
	return renderOutput(b, dropped, running, t.limit)
}

// Exited returns the exit status once the command has exited.
func (t *Terminal) Exited() (ExitStatus, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.status, t.exited
}

// Done is closed once the command has exited and its output has been read
// (or outputSettle passed, when a background process keeps the pipe open).
func (t *Terminal) Done() <-chan struct{} { return t.done }

// renderOutput makes the kept bytes valid UTF-8 within limit bytes:
// leading continuation bytes left by dropping from the front are skipped
// (the schema's "character boundary"), a trailing incomplete character is
// held back while the command runs (its rest may be in the next read), and
// invalid bytes become U+FFFD, cut again if that grew past the limit.
func renderOutput(b []byte, dropped, running bool, limit int) (string, bool) {
	truncated := dropped
	if dropped {
		for i := 0; i < utf8.UTFMax-1 && len(b) > 0 && !utf8.RuneStart(b[0]); i++ {
			b = b[1:]
		}
	}
	if running {
		for i := len(b) - 1; i >= 0 && i >= len(b)-utf8.UTFMax; i-- {
			if utf8.RuneStart(b[i]) {
				if !utf8.FullRune(b[i:]) {
					b = b[:i]
				}
				break
			}
		}
	}
	s := strings.ToValidUTF8(string(b), "\uFFFD")
	if len(s) > limit {
		cut := limit
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s, truncated = s[:cut], true
	}
	return s, truncated
}

// write appends p to the ring, dropping the oldest bytes past the limit.
// The ring grows up to the limit as output comes, so a quiet command costs
// nothing. Called with mu held.
func (t *Terminal) write(p []byte) {
	if len(p) > t.limit {
		t.dropped = true
		p = p[len(p)-t.limit:]
	}
	if room := t.limit - len(t.buf); room > 0 {
		n := min(room, len(p))
		if cap(t.buf)-len(t.buf) < n {
			grown := make([]byte, len(t.buf), min(t.limit, max(2*cap(t.buf), len(t.buf)+n, 4096)))
			copy(grown, t.buf)
			t.buf = grown
		}
		t.buf = append(t.buf, p[:n]...)
		p = p[n:]
	}
	for len(p) > 0 { // the ring is full: overwrite the oldest
		t.dropped = true
		n := copy(t.buf[t.head:], p)
		p = p[n:]
		t.head = (t.head + n) % t.limit
	}
}

// read copies the command's output into the ring until EOF (every writer
// gone) or until release closes the pipe.
func (t *Terminal) read(r io.Reader) {
	defer close(t.readerDone)
	buf := make([]byte, readChunk)
	for {
		n, err := r.Read(buf)
		if n > 0 {
			t.mu.Lock()
			t.write(buf[:n])
			t.mu.Unlock()
		}
		if err != nil {
			return
		}
	}
}

// watch records the exit status once the command has been reaped and its
// output read.
func (t *Terminal) watch() {
	<-t.proc.Exited()
	timer := time.NewTimer(outputSettle)
	select {
	case <-t.readerDone:
	case <-timer.C:
	}
	timer.Stop()
	var st ExitStatus
	if e := t.proc.ExitError(); e.Signal != "" {
		st.Signal = e.Signal
	} else {
		code := e.ExitCode
		st.ExitCode = &code
	}
	t.mu.Lock()
	t.status, t.exited = st, true
	t.mu.Unlock()
	close(t.done)
}

// terminate runs the ladder (once; a kill and a release share it) and waits
// for the exit to be recorded. It reports whether this call ended a running
// command.
func (t *Terminal) terminate(grace time.Duration) bool {
	if t.proc == nil {
		return false
	}
	first := false
	t.killOnce.Do(func() {
		first = true
		t.killed = t.proc.Terminate(grace).Outcome != process.Exited
	})
	<-t.done
	return first && t.killed
}

// free ends the command if it still runs and closes its pipe: after it,
// nothing of the terminal runs or reads.
func (t *Terminal) free(grace time.Duration) bool {
	killed := t.terminate(grace)
	if t.proc != nil {
		// The group's last SIGKILL went out after the command exited (or
		// was killed): the pipe reaches EOF once those processes are dead,
		// since each holds it. A writer that left the group may hold it for
		// ever, so after outputSettle our end is closed to stop the reader.
		timer := time.NewTimer(outputSettle)
		select {
		case <-t.readerDone:
		case <-timer.C:
			_ = t.proc.Stdout().Close()
			<-t.readerDone
		}
		timer.Stop()
		_ = t.proc.Stdout().Close()
	}
	return killed
}

// terminals is a connection's terminal runtime.
type terminals struct {
	o   TerminalOptions
	log *slog.Logger

	mu      sync.Mutex
	m       map[string]*Terminal
	pending map[*pendingCreate]struct{}
	live    int // len(m) plus the creates under way
	closed  bool
	seq     int64

	created, killed, released, refused, shellFallbacks atomic.Int64
	refusedLog                                         refusal.Log
}

// pendingCreate is a terminal/create between its reservation and its
// entry in the map, so that a close happening meanwhile can stop it and
// wait for it.
type pendingCreate struct {
	id    string
	s     *Session
	abort bool // set under terminals.mu by a close
	done  chan struct{}
}

func newTerminals(o TerminalOptions, log *slog.Logger) *terminals {
	if o.MaxLive <= 0 {
		o.MaxLive = DefaultMaxTerminals
	}
	if o.MaxOutputBytes <= 0 {
		o.MaxOutputBytes = DefaultMaxTerminalOutput
	}
	if o.KillGrace <= 0 {
		o.KillGrace = DefaultKillGrace
	}
	if log == nil {
		log = slog.Default()
	}
	t := &terminals{o: o, log: log, m: map[string]*Terminal{}, pending: map[*pendingCreate]struct{}{}}
	t.refusedLog.Logger = log
	return t
}

func (t *terminals) stats() TerminalStats {
	t.mu.Lock()
	live := t.live
	t.mu.Unlock()
	return TerminalStats{
		Created:        t.created.Load(),
		Live:           int64(live),
		Killed:         t.killed.Load(),
		Released:       t.released.Load(),
		Refused:        t.refused.Load(),
		ShellFallbacks: t.shellFallbacks.Load(),
	}
}

func (t *terminals) get(id string) (*Terminal, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	term, ok := t.m[id]
	return term, ok
}

// serve answers one terminal/* request of session s.
func (t *terminals) serve(ctx context.Context, s *Session, req *rpc.Request) (any, error) {
	if req.Method == acp.MethodTerminalCreate {
		return t.create(s, req)
	}
	var p struct {
		TerminalID string `json:"terminalId"`
	}
	if err := req.UnmarshalParams(&p); err != nil {
		return nil, err
	}
	term, err := t.lookup(s, p.TerminalID)
	if err != nil {
		return nil, err
	}
	switch req.Method {
	case acp.MethodTerminalOutput:
		text, truncated := term.Output()
		res := struct {
			Output     string          `json:"output"`
			Truncated  bool            `json:"truncated"`
			ExitStatus *exitStatusWire `json:"exitStatus,omitempty"`
		}{Output: text, Truncated: truncated}
		if st, ok := term.Exited(); ok {
			res.ExitStatus = st.wire()
		}
		return res, nil
	case acp.MethodTerminalWait:
		// The wait may last as long as the command: it gives back its
		// handler slot so that it cannot starve other requests.
		if err := req.Detach(); errors.Is(err, rpc.ErrTooManyStreams) {
			return nil, jsonrpc.NewError(acp.CodeResourceLimit, "resource limit exceeded: too many open streams",
				map[string]any{"reason": "too_many_streams"})
		}
		select {
		case <-term.done:
			st, _ := term.Exited()
			return st.wire(), nil
		case <-ctx.Done():
			// The rpc layer answers a peer's $/cancel_request with -32800.
			return nil, ctx.Err()
		}
	case acp.MethodTerminalKill:
		if term.terminate(t.o.KillGrace) {
			t.killed.Add(1)
		}
		return struct{}{}, nil
	case acp.MethodTerminalRelease:
		t.mu.Lock()
		if t.m[term.id] != term { // a concurrent release won
			t.mu.Unlock()
			return nil, terminalNotFound(term.id)
		}
		delete(t.m, term.id)
		t.mu.Unlock()
		t.release(term)
		return struct{}{}, nil
	}
	return nil, jsonrpc.Errorf(jsonrpc.CodeMethodNotFound, "method not found: %s", req.Method)
}

type exitStatusWire struct {
	ExitCode *int    `json:"exitCode"`
	Signal   *string `json:"signal"`
}

func (st ExitStatus) wire() *exitStatusWire {
	w := &exitStatusWire{ExitCode: st.ExitCode}
	if st.Signal != "" {
		sig := st.Signal
		w.Signal = &sig
	}
	return w
}

func terminalNotFound(id string) *jsonrpc.Error {
	return jsonrpc.NewError(acp.CodeResourceNotFound, "terminal not found: "+id, map[string]string{"terminalId": id})
}

// lookup finds a terminal of s; one of another session is as unknown as
// one that never existed.
func (t *terminals) lookup(s *Session, id string) (*Terminal, error) {
	t.mu.Lock()
	term, ok := t.m[id]
	t.mu.Unlock()
	if !ok || term.session != s {
		return nil, terminalNotFound(id)
	}
	return term, nil
}

// release frees a terminal already removed from the map.
func (t *terminals) release(term *Terminal) {
	if term.free(t.o.KillGrace) {
		t.killed.Add(1)
	}
	t.mu.Lock()
	t.live--
	t.mu.Unlock()
	t.released.Add(1)
}

type createParams struct {
	Command string   `json:"command"`
	Args    []string `json:"args"`
	Env     []struct {
		Name  string `json:"name"`
		Value string `json:"value"`
	} `json:"env"`
	Cwd             *string `json:"cwd"`
	OutputByteLimit *int64  `json:"outputByteLimit"`
}

func invalidTerminal(reason, msg string) *jsonrpc.Error {
	return jsonrpc.NewError(jsonrpc.CodeInvalidParams, msg, map[string]string{"reason": reason})
}

func (t *terminals) create(s *Session, req *rpc.Request) (any, error) {
	var p createParams
	if err := req.UnmarshalParams(&p); err != nil {
		return nil, err
	}
	if p.Command == "" {
		return nil, invalidTerminal("invalid_command", "invalid params: command is required")
	}
	if strings.ContainsRune(p.Command, 0) || strings.ContainsRune(strings.Join(p.Args, ""), 0) {
		return nil, invalidTerminal("invalid_command", "invalid params: command or args hold a NUL byte")
	}
	limit := t.o.MaxOutputBytes
	if p.OutputByteLimit != nil {
		if *p.OutputByteLimit < 0 {
			return nil, invalidTerminal("invalid_limit", "invalid params: outputByteLimit is negative")
		}
		limit = int(min(*p.OutputByteLimit, int64(limit)))
	}
	cwd := s.Cwd()
	if p.Cwd != nil && *p.Cwd != "" {
		cwd = *p.Cwd
	}
	if !filepath.IsAbs(cwd) {
		return nil, invalidTerminal("relative_cwd", "invalid params: cwd must be an absolute path")
	}
	cwd = filepath.Clean(cwd)
	if !t.o.AllowCwdOutsideRoots && !cwdUnderRoots(cwd, s.Roots()) {
		return nil, jsonrpc.NewError(jsonrpc.CodeInvalidParams, "invalid params: cwd is outside the session's roots",
			map[string]string{"reason": "outside_session_roots", "cwd": cwd})
	}
	if fi, err := os.Stat(cwd); err != nil || !fi.IsDir() {
		return nil, jsonrpc.NewError(jsonrpc.CodeInvalidParams, "invalid params: cwd is not a directory",
			map[string]string{"reason": "not_a_directory", "cwd": cwd})
	}
	var env []string
	if t.o.Env != nil {
		env = append(env, t.o.Env(s)...)
	} else {
		env = os.Environ()
	}
	for _, e := range p.Env {
		if e.Name == "" || strings.ContainsAny(e.Name, "=\x00") || strings.ContainsRune(e.Value, 0) {
			return nil, invalidTerminal("invalid_env", "invalid params: bad env entry "+strconv.Quote(e.Name))
		}
		// exec keeps the last of duplicate keys: the request overrides.
		env = append(env, e.Name+"="+e.Value)
	}

	pc, err := t.reserve(s)
	if err != nil {
		return nil, err
	}
	term, err := t.start(pc.id, s, p.Command, p.Args, env, cwd, limit)
	t.mu.Lock()
	delete(t.pending, pc)
	abort := pc.abort
	if err == nil && !abort {
		t.m[term.id] = term
	}
	if err != nil {
		t.live--
	}
	t.mu.Unlock()
	defer close(pc.done)
	if err != nil {
		return nil, err
	}
	t.created.Add(1)
	if abort { // the session or the connection closed while it started
		t.release(term)
		return nil, sessionGone(s)
	}
	return struct {
		TerminalID string `json:"terminalId"`
	}{term.id}, nil
}

func sessionGone(s *Session) *jsonrpc.Error {
	return jsonrpc.NewError(acp.CodeResourceNotFound, "session closed: "+s.ID(), map[string]string{"sessionId": s.ID()})
}

// reserve takes a live place for a create, or refuses it.
func (t *terminals) reserve(s *Session) (*pendingCreate, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed || (s.ctx != nil && s.ctx.Err() != nil) {
		return nil, sessionGone(s)
	}
	if t.live >= t.o.MaxLive {
		t.refused.Add(1)
		t.refusedLog.Refused("acpclient: terminal refused: every terminal place is taken (TerminalOptions.MaxLive)",
			"session", s.ID(), "limit", t.o.MaxLive)
		return nil, jsonrpc.NewError(acp.CodeResourceLimit, "resource limit exceeded: too many terminals",
			map[string]any{"reason": "too_many_terminals", "limit": t.o.MaxLive})
	}
	t.live++
	t.seq++
	pc := &pendingCreate{id: "term_" + strconv.FormatInt(t.seq, 10), s: s, done: make(chan struct{})}
	t.pending[pc] = struct{}{}
	return pc, nil
}

// start runs the command (or makes the terminal of a command not found).
func (t *terminals) start(id string, s *Session, command string, args, env []string, cwd string, limit int) (*Terminal, error) {
	term := &Terminal{id: id, session: s, limit: limit, done: make(chan struct{}), command: commandLine(command, args)}
	path, argv := command, args
	if len(args) == 0 && strings.ContainsRune(command, ' ') {
		if _, err := exec.LookPath(command); err != nil {
			// A whole command line in "command": what the agent meant.
			path, argv = "/bin/sh", []string{"-c", command}
			term.command = command
			t.shellFallbacks.Add(1)
			t.log.Debug("acpclient: terminal command run through /bin/sh -c", "session", s.ID())
		}
	}
	proc, err := process.Start(process.Command{Path: path, Args: argv, Env: env, Dir: cwd},
		&process.Options{CombinedOutput: true, Grace: t.o.KillGrace, Logger: t.log})
	if err != nil {
		code, what := 0, ""
		switch {
		case errors.Is(err, exec.ErrNotFound), errors.Is(err, exec.ErrDot), errors.Is(err, fs.ErrNotExist):
			code, what = 127, "command not found"
		case errors.Is(err, fs.ErrPermission):
			code, what = 126, "permission denied"
		default:
			return nil, jsonrpc.NewError(jsonrpc.CodeInternalError, "cannot start the command: "+err.Error(), nil)
		}
		// As a shell would: a terminal whose output says so, with the
		// shell's exit code, which agents handle better than an error.
		term.mu.Lock()
		term.write([]byte("agentwire: " + what + ": " + command + "\n"))
		term.status, term.exited = ExitStatus{ExitCode: &code}, true
		term.mu.Unlock()
		close(term.done)
		return term, nil
	}
	_ = proc.Stdin().Close() // the command reads nothing: no PTY, no input
	term.proc = proc
	term.readerDone = make(chan struct{})
	go term.read(proc.Stdout())
	go term.watch()
	return term, nil
}

// closeSession releases every terminal of s, in parallel, and returns when
// all their groups are gone; creates under way for s are stopped too.
func (t *terminals) closeSession(s *Session) {
	t.closeWhere(func(x *Session) bool { return x == s }, false)
}

// closeAll releases every terminal; later creates are refused.
func (t *terminals) closeAll() { t.closeWhere(func(*Session) bool { return true }, true) }

func (t *terminals) closeWhere(match func(*Session) bool, all bool) {
	t.mu.Lock()
	if all {
		t.closed = true
	}
	var terms []*Terminal
	for id, term := range t.m {
		if match(term.session) {
			terms = append(terms, term)
			delete(t.m, id)
		}
	}
	var waits []chan struct{}
	for pc := range t.pending {
		if match(pc.s) {
			pc.abort = true
			waits = append(waits, pc.done)
		}
	}
	t.mu.Unlock()
	var wg sync.WaitGroup
	for _, term := range terms {
		wg.Go(func() { t.release(term) })
	}
	wg.Wait()
	for _, w := range waits {
		<-w // the create releases its own terminal
	}
}

// cwdUnderRoots reports whether cwd (clean, absolute) lies lexically under
// one of roots.
func cwdUnderRoots(cwd string, roots []string) bool {
	for _, r := range roots {
		if !filepath.IsAbs(r) {
			continue
		}
		r = filepath.Clean(r)
		if cwd == r || strings.HasPrefix(cwd, r) && (strings.HasSuffix(r, string(filepath.Separator)) || cwd[len(r)] == filepath.Separator) {
			return true
		}
	}
	return false
}

// commandLine renders a command and its arguments as a shell line, for
// display.
func commandLine(command string, args []string) string {
	parts := make([]string, 0, 1+len(args))
	for _, a := range append([]string{command}, args...) {
		parts = append(parts, shellQuote(a))
	}
	return strings.Join(parts, " ")
}

func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_@%+=:,./-") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
