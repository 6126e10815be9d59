package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/agentwire/agentwire/jsonrpc"
)

// tapLogLineLimit bounds what the tap keeps of one line for logging; the
// bytes themselves always pass through whole.
const tapLogLineLimit = 16 << 20

// runTap is `agentwire tap`: a transparent stdio proxy in front of a
// server. Bytes pass through unchanged and at once in both directions;
// every line is logged as JSON Lines on the side.
func runTap(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("tap", flag.ContinueOnError)
	fs.SetOutput(stderr)
	logPath := fs.String("log", "", "write the JSON Lines log to FILE (default: standard error)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	argv := fs.Args()
	if len(argv) == 0 {
		fmt.Fprintln(stderr, "agentwire tap: missing the server command (agentwire tap [--log FILE] -- CMD [ARGS...])")
		return 2
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

	cmd := exec.Command(argv[0], argv[1:]...)
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
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(stderr, "agentwire tap:", err)
		return 127
	}
	inR.Close()
	outW.Close()
	errW.Close()
	log.event(map[string]any{"event": "start", "pid": cmd.Process.Pid, "argv": argv})

	// Signals go to the server; its exit ends the tap.
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer close(sigs)
	defer signal.Stop(sigs)
	go func() {
		for s := range sigs {
			cmd.Process.Signal(s)
		}
	}()

	go func() {
		pipeThrough(stdin, childIn, "in", log)
		childIn.Close() // stdin EOF propagates
	}()
	copied := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() { pipeThrough(childOut, stdout, "out", log) })
	wg.Go(func() { pipeThrough(childErr, stderrPassthrough{stderr, logOut}, "stderr", log) })
	go func() {
		wg.Wait()
		close(copied)
	}()
	err := cmd.Wait()
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
	log.event(map[string]any{"event": "exit", "status": code})
	return code
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
