package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"github.com/agentwire/agentwire/jsonrpc"
	"github.com/agentwire/agentwire/process"
	"github.com/agentwire/agentwire/telemetry"
)

// tapLogLineLimit bounds what the tap keeps of one line for logging; the
// bytes themselves always pass through whole.
const tapLogLineLimit = 16 << 20

// runTap is `agentwire tap`: a transparent stdio proxy in front of a
// server. Bytes pass through unchanged and at once in both directions;
// every line is logged as JSON Lines on the side.
func runTap(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := newFlags("tap")
	logPath := fs.String("log", "", "write the JSON Lines log to FILE (default: standard error)")
	grace := fs.Duration("grace", process.DefaultGrace, "each wait of the shutdown ladder run on SIGINT/SIGTERM/SIGHUP")
	of := addOTelFlags(fs, false)
	if code, done := parseFlags(fs, args, tapSynopsis, stdout, stderr); done {
		return code
	}
	argv := fs.Args()
	if len(argv) == 0 {
		return usageError(stderr, "tap", tapSynopsis, "missing the server command")
	}
	if *grace <= 0 {
		return usageError(stderr, "tap", tapSynopsis, "--grace must be positive")
	}
	if err := of.check(); err != nil {
		return usageError(stderr, "tap", tapSynopsis, "%v", err)
	}
	logOut := stderr
	if *logPath != "" {
		f, err := os.OpenFile(*logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			fmt.Fprintln(stderr, "agentwire tap:", err)
			return 2
		}
		defer f.Close()
		logOut = f
	}
	log := newTapLog(logOut)
	defer log.close()
	obs, obsCode, obsErr := startTelemetry(of, "tap", "tap", stderr)
	if obsErr != nil {
		fmt.Fprintln(stderr, "agentwire tap:", obsErr)
		return obsCode
	}
	defer obs.close()
	// With tracing on, each request through the tap is a span of its own
	// between the client's and the server's; without, the bytes pass
	// untouched (relay is nil).
	var relay *telemetry.Relay
	if obs.active() && obs.setup.Tracing {
		relay = telemetry.NewRelay(obs.options(telemetry.MCP, telemetry.Pipe, false, ""))
		defer relay.Close()
	}

	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = obs.childEnv()
	// Our own pipes, so that waiting for the server does not wait for a
	// child it left behind holding its stdout or stderr.
	inR, childIn, err1 := os.Pipe()
	childOut, outW, err2 := os.Pipe()
	childErr, errW, err3 := os.Pipe()
	if err := errors.Join(err1, err2, err3); err != nil {
		fmt.Fprintln(stderr, "agentwire tap:", err)
		return 2
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, errW
	ownGroup(cmd)
	// Signals are watched before the server starts, so that none ends the
	// tap without the ladder.
	intr := watchInterrupts()
	defer intr.stop()
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(stderr, "agentwire tap:", err)
		return 127
	}
	inR.Close()
	outW.Close()
	errW.Close()
	log.event(map[string]any{"event": "start", "pid": cmd.Process.Pid, "argv": argv})

	// The server's exit ends the tap. The first signal runs the ladder on
	// it (close its stdin, SIGTERM its group, SIGKILL), a second one kills
	// the group at once.
	defer intr.onSecond(func() { killGroup(cmd) })()
	exited := make(chan struct{})
	var err error
	go func() {
		err = cmd.Wait()
		close(exited)
	}()

	go func() {
		if relay != nil {
			pipeRelay(stdin, childIn, "in", log, relay, telemetry.FromClient)
		} else {
			pipeThrough(stdin, childIn, "in", log)
		}
		childIn.Close() // stdin EOF propagates
	}()
	copied := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		if relay != nil {
			pipeRelay(childOut, stdout, "out", log, relay, telemetry.FromServer)
		} else {
			pipeThrough(childOut, stdout, "out", log)
		}
	})
	wg.Go(func() { pipeThrough(childErr, stderrPassthrough{stderr, logOut}, "stderr", log) })
	go func() {
		wg.Wait()
		close(copied)
	}()
	shutdown := ""
	select {
	case <-exited:
	case <-intr.ctx.Done():
		log.event(map[string]any{"event": "signal", "signal": signalName(intr.signal())})
		shutdown = tapLadder(cmd, childIn, exited, *grace)
	}
	killGroup(cmd) // what the server left in its group
	// What the server wrote before it exited is still in the pipes: let
	// it through, but do not wait for a leftover child that holds them.
	t := time.NewTimer(200 * time.Millisecond)
	select {
	case <-copied:
	case <-t.C:
		childOut.Close()
		childErr.Close()
		<-copied
	}
	t.Stop()
	childIn.Close()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
		if code < 0 {
			code = 128 + int(ee.Sys().(syscall.WaitStatus).Signal())
		}
	}
	exit := map[string]any{"event": "exit", "status": code}
	if shutdown != "" {
		exit["shutdown"] = shutdown
		code = intr.code()
	}
	log.event(exit)
	// The spans of requests left unanswered end now, and everything is
	// flushed while the signals are still watched.
	if relay != nil {
		relay.Close()
	}
	obs.close()
	return code
}

// tapLadder stops the server the way the process package does: close its
// stdin, wait grace; SIGTERM its group, wait grace; SIGKILL the group. It
// says how the server ended: exited, terminated or killed.
func tapLadder(cmd *exec.Cmd, stdin *os.File, exited <-chan struct{}, grace time.Duration) string {
	stdin.Close()
	wait := func() bool {
		t := time.NewTimer(grace)
		defer t.Stop()
		select {
		case <-exited:
			return true
		case <-t.C:
			return false
		}
	}
	if wait() {
		return string(process.Exited)
	}
	terminateGroup(cmd)
	if wait() {
		return string(process.Terminated)
	}
	killGroup(cmd)
	<-exited
	return string(process.Killed)
}

// stderrPassthrough writes the server's stderr to ours, unless our stderr
// is also the log (then the log entries carry it).
type stderrPassthrough struct {
	w   io.Writer
	log io.Writer
}

func (s stderrPassthrough) Write(p []byte) (int, error) {
	if s.w == s.log {
		return len(p), nil
	}
	return s.w.Write(p)
}

// pipeThrough copies r to w chunk by chunk as it arrives (no waiting for a
// newline, no re-encoding) and hands each complete line to the log.
func pipeThrough(r io.Reader, w io.Writer, dir string, log *tapLog) {
	buf := make([]byte, 32<<10)
	var line []byte
	size := 0 // bytes of the current line, including what was not kept
	for {
		n, err := r.Read(buf)
		if n > 0 {
			chunk := buf[:n]
			if _, werr := w.Write(chunk); werr != nil {
				log.event(map[string]any{"event": "write_error", "dir": dir, "error": werr.Error()})
				io.Copy(io.Discard, r)
				return
			}
			for len(chunk) > 0 {
				i := bytes.IndexByte(chunk, '\n')
				part := chunk
				if i >= 0 {
					part = chunk[:i]
				}
				size += len(part)
				if len(line) < tapLogLineLimit {
					line = append(line, part[:min(len(part), tapLogLineLimit-len(line))]...)
				}
				if i < 0 {
					break
				}
				log.line(dir, line, size+1, size > len(line))
				line, size = line[:0], 0
				chunk = chunk[i+1:]
			}
		}
		if err != nil {
			if size > 0 {
				log.line(dir, line, size, size > len(line))
			}
			return
		}
	}
}

// pipeRelay is pipeThrough for a tap that traces: whole lines pass, each
// handed to the relay first (which may give a request the trace context
// of the tap's span in its _meta), and each is logged as it was passed
// on. A line longer than tapLogLineLimit is not held: it passes as it
// comes, untouched.
func pipeRelay(r io.Reader, w io.Writer, dir string, log *tapLog, relay *telemetry.Relay, d telemetry.Direction) {
	br := bufio.NewReaderSize(r, 64<<10)
	var pending []byte
	raw, size := false, 0 // the current line passes as it comes; its length
	write := func(b []byte) bool {
		if _, err := w.Write(b); err != nil {
			log.event(map[string]any{"event": "write_error", "dir": dir, "error": err.Error()})
			io.Copy(io.Discard, br)
			return false
		}
		return true
	}
	pass := func(line []byte, newline bool) bool {
		text := line
		var end []byte
		if newline {
			text, end = line[:len(line)-1], line[len(line)-1:]
			if n := len(text); n > 0 && text[n-1] == '\r' {
				text, end = text[:n-1], line[n-1:]
			}
		}
		out := relay.Message(d, text)
		if !write(out) || (len(end) > 0 && !write(end)) {
			return false
		}
		log.line(dir, out, len(out)+len(end), false)
		return true
	}
	for {
		chunk, err := br.ReadSlice('\n')
		if len(chunk) > 0 {
			newline := chunk[len(chunk)-1] == '\n'
			size += len(chunk)
			switch {
			case raw:
				if !write(chunk) {
					return
				}
			case len(pending)+len(chunk) > tapLogLineLimit:
				if !write(pending) || !write(chunk) {
					return
				}
				raw = true
			default:
				pending = append(pending, chunk...)
			}
			if newline {
				if raw {
					log.line(dir, pending, size, true)
				} else if !pass(pending, true) {
					return
				}
				pending, raw, size = pending[:0], false, 0
			}
		}
		if err == bufio.ErrBufferFull {
			continue
		}
		if err != nil {
			if size > 0 {
				if raw {
					log.line(dir, pending, size, true)
				} else {
					pass(pending, false)
				}
			}
			return
		}
	}
}

// tapLog writes log entries as the copiers produce them, after the bytes
// they describe have been passed on: the message is never held for its log
// entry, and a per-line hand-off to a logging goroutine (a wake-up per
// message) is avoided. A mutex keeps entries whole.
type tapLog struct {
	mu     sync.Mutex
	w      io.Writer
	closed bool
}

func newTapLog(w io.Writer) *tapLog { return &tapLog{w: w} }

func (l *tapLog) event(m map[string]any) {
	m["time"] = time.Now().UTC().Format(time.RFC3339Nano)
	b, _ := json.Marshal(m)
	l.send(append(b, '\n'))
}

// send writes one entry; entries after close (a copier still draining)
// are dropped.
func (l *tapLog) send(b []byte) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.closed {
		l.w.Write(b)
	}
}

// line logs one line: its direction, size, and what JSON-RPC says of it.
func (l *tapLog) line(dir string, line []byte, size int, truncated bool) {
	entry := map[string]any{"dir": dir, "size": size}
	if dir == "stderr" {
		entry["text"] = string(bytes.TrimSuffix(line, []byte("\r")))
	} else {
		text := bytes.TrimSuffix(line, []byte("\r"))
		m, err := jsonrpc.Decode(text, nil)
		switch {
		case truncated:
			entry["valid"] = false
			entry["note"] = "line too long to inspect"
		case len(bytes.TrimSpace(text)) == 0:
			entry["blank"] = true
		case err != nil:
			entry["valid"] = false
			entry["error"] = err.Error()
		default:
			entry["valid"] = true
			entry["kind"] = m.Kind.String()
			if m.Method != nil {
				entry["method"] = m.MethodName()
			}
			if m.ID != nil {
				entry["id"] = json.RawMessage(m.ID)
			}
		}
	}
	l.event(entry)
}

func (l *tapLog) close() {
	l.mu.Lock()
	l.closed = true
	l.mu.Unlock()
}
