package process

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Defaults of Options.
const (
	DefaultGrace      = 2 * time.Second
	DefaultStderrTail = 64 << 10
)

// Command describes how to start the server. A fresh exec.Cmd is built from
// it for every start, so a restarted server runs exactly like the first.
type Command struct {
	Path string   // program; looked up in PATH when it has no separator
	Args []string // arguments, not including the program
	Env  []string // environment; nil means the parent's
	Dir  string   // working directory; empty means the parent's
}

// Options configures Start. The zero value (or nil) means the defaults.
type Options struct {
	// Grace is each waiting step of the shutdown ladder: after closing
	// stdin, and after SIGTERM. Default 2 s.
	Grace time.Duration
	// Stderr, if set, receives the server's standard error as it arrives.
	// It is fed through a bounded queue by the draining goroutine, so a slow
	// sink loses chunks (counted in StderrDropped) instead of blocking the
	// server on a full pipe.
	Stderr io.Writer
	// StderrTail is how many of the last bytes of stderr are kept for error
	// messages. Default 64 KiB.
	StderrTail int
	// Logger receives diagnostics. Nil means slog.Default().
	Logger *slog.Logger
	// CombinedOutput gives the process one pipe for stdout and stderr, so
	// what it writes to either arrives on Stdout in the kernel's order (a
	// terminal's output, not a protocol stream). There is then no separate
	// stderr: Stderr and StderrTail are unused, and ExitError carries no
	// tail.
	CombinedOutput bool
}

// Outcome says how the shutdown ladder ended the server (guarantee K7).
type Outcome string

const (
	Exited     Outcome = "exited"     // exited by itself (on stdin EOF, or earlier)
	Terminated Outcome = "terminated" // exited after SIGTERM
	Killed     Outcome = "killed"     // had to be killed
)

// ShutdownResult reports a finished shutdown ladder.
type ShutdownResult struct {
	Outcome  Outcome
	Duration time.Duration // from the start of the ladder to the server's exit
	ExitCode int           // -1 when ended by a signal
	Err      error         // the exit error from the OS, if any
}

// ExitError describes how a server process ended. It is carried by the
// connection-lost error of a client whose server died (guarantee K5).
type ExitError struct {
	ExitCode int    // -1 when killed by a signal
	Status   string // the OS's description, e.g. "exit status 3" or "signal: killed"
	// Signal names the signal that ended the process ("SIGKILL",
	// "SIGTERM", ...); empty when it exited by itself, and on systems
	// without signals.
	Signal     string
	StderrTail string // the last bytes the server wrote to stderr
}

func (e *ExitError) Error() string {
	if e.StderrTail == "" {
		return "server " + e.Status
	}
	return fmt.Sprintf("server %s; stderr tail:\n%s", e.Status, strings.TrimRight(e.StderrTail, "\n"))
}

// ErrNotStarted is returned for a Command that cannot be started.
var ErrNotStarted = errors.New("process: server could not be started")

// Process is a running server: its stdin and stdout carry the protocol,
// its stderr is always drained (guarantee K4) unless CombinedOutput puts it
// on stdout's pipe, and it runs in its own process group so that shutdown
// reaches its children too.
type Process struct {
	cmd    *exec.Cmd
	opts   Options
	stdin  io.WriteCloser
	stdout io.ReadCloser
	stderr io.ReadCloser
	tail   *tailBuffer
	sink   *sinkQueue

	exited  chan struct{} // closed when the process has been reaped
	exitErr error
	state   *os.ProcessState
	drained chan struct{} // closed when stderr reached EOF

	shutdownOnce sync.Once
	result       ShutdownResult
	ladderDone   chan struct{}
	stdinOnce    sync.Once
	started      time.Time
}

// Start launches the server with exec.Command, never tied to a context: a
// caller's connect timeout must not kill a running server (guarantee K8; the
// exec.CommandContext footgun of coder/coder#24035).
func Start(c Command, opts *Options) (*Process, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Grace <= 0 {
		o.Grace = DefaultGrace
	}
	if o.StderrTail <= 0 {
		o.StderrTail = DefaultStderrTail
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	cmd := exec.Command(c.Path, c.Args...)
	cmd.Env = c.Env
	cmd.Dir = c.Dir
	setGroup(cmd)
	p := &Process{cmd: cmd, opts: o, tail: newTailBuffer(o.StderrTail),
		exited: make(chan struct{}), drained: make(chan struct{}), ladderDone: make(chan struct{})}
	// Our own pipes rather than exec's: exec.Cmd.Wait closes the pipes it
	// made as soon as the process exits, which would cut off stdout and
	// stderr bytes still in flight.
	var childEnds []*os.File
	fail := func(err error) (*Process, error) {
		for _, f := range childEnds {
			f.Close()
		}
		return nil, fmt.Errorf("%w: %s: %w", ErrNotStarted, c.Path, err)
	}
	inR, inW, err := os.Pipe()
	if err != nil {
		return fail(err)
	}
	childEnds = append(childEnds, inR)
	outR, outW, err := os.Pipe()
	if err != nil {
		inW.Close()
		return fail(err)
	}
	childEnds = append(childEnds, outW)
	// With CombinedOutput stderr is the stdout pipe itself: one pipe keeps
	// the order in which the process wrote to both.
	errW := outW
	var errR *os.File
	if !o.CombinedOutput {
		errR, errW, err = os.Pipe()
		if err != nil {
			inW.Close()
			outR.Close()
			return fail(err)
		}
		childEnds = append(childEnds, errW)
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, errW
	if err := cmd.Start(); err != nil {
		inW.Close()
		outR.Close()
		if errR != nil {
			errR.Close()
		}
		return fail(err)
	}
	for _, f := range childEnds {
		f.Close()
	}
	p.stdin, p.stdout = inW, outR
	p.started = time.Now()
	if errR == nil {
		close(p.drained) // nothing to drain
	} else {
		p.stderr = errR
		if o.Stderr != nil {
			p.sink = newSinkQueue(o.Stderr)
		}
		go p.drainStderr(p.stderr)
	}
	go p.reap()
	return p, nil
}

// Pid returns the server's process id (and process group id on Unix).
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Stdin is the server's standard input: write requests here.
func (p *Process) Stdin() io.WriteCloser { return p.stdin }

// Stdout is the server's standard output: read responses here.
func (p *Process) Stdout() io.ReadCloser { return p.stdout }

// Exited is closed when the server process has ended.
func (p *Process) Exited() <-chan struct{} { return p.exited }

// ExitError returns how the process ended, with the stderr tail; nil while
// it runs.
func (p *Process) ExitError() *ExitError {
	select {
	case <-p.exited:
	default:
		return nil
	}
	// stderr reaches EOF when every holder of its write end is gone; a
	// grandchild may keep it open, so the tail is taken as it is after a
	// short wait.
	t := time.NewTimer(200 * time.Millisecond)
	select {
	case <-p.drained:
	case <-t.C:
	}
	t.Stop()
	e := &ExitError{ExitCode: p.state.ExitCode(), Status: p.state.String(), Signal: signalName(p.state),
		StderrTail: p.StderrTail()}
	return e
}

// StderrTail returns the last bytes the server wrote to stderr.
func (p *Process) StderrTail() string { return p.tail.String() }

// StderrDropped returns how many bytes of stderr a slow sink missed.
func (p *Process) StderrDropped() int64 {
	if p.sink == nil {
		return 0
	}
	return p.sink.dropped.Load()
}

func (p *Process) reap() {
	// Wait returns once the process has exited and its stderr copy (ours)
	// is no concern of exec's: we own the pipes.
	err := p.cmd.Wait()
	p.exitErr = err
	p.state = p.cmd.ProcessState
	close(p.exited)
}

func (p *Process) drainStderr(r io.ReadCloser) {
	defer close(p.drained)
	defer r.Close()
	buf := make([]byte, 4096)
	for {
		n, err := r.Read(buf)
		if n > 0 {
			p.tail.Write(buf[:n])
			if p.sink != nil {
				p.sink.offer(buf[:n])
			}
		}
		if err != nil {
			if p.sink != nil {
				p.sink.close()
			}
			return
		}
	}
}

// CloseStdin closes the server's standard input: the portable request to
// exit.
func (p *Process) CloseStdin() {
	p.stdinOnce.Do(func() { _ = p.stdin.Close() })
}

// Shutdown runs the ladder once (guarantee K7): close stdin, wait Grace; SIGTERM
// to the process group, wait Grace; SIGKILL to the group. Whatever the
// outcome, any process left in the group afterwards is killed, so children
// the server started do not outlive it. Later calls, and calls of Terminate,
// return the same result.
func (p *Process) Shutdown() ShutdownResult { return p.ladder(true, p.opts.Grace) }

// Terminate is the ladder without its stdin step, for a process that is not
// asked to exit through its input (a command run for someone else): SIGTERM
// to the process group, wait grace (zero or less means Options.Grace),
// SIGKILL to the group, reap, then kill whatever is left in the group. It
// returns once the process has been reaped and SIGKILL sent to its group.
// It shares Shutdown's once: whichever runs first decides the result, and
// the other returns it.
//
// Unlike Shutdown it leaves Stdout open, so that what the group wrote
// before it died can still be read; Read reports EOF once every writer is
// gone. A caller that must not wait for a writer that escaped the group
// (setsid) closes Stdout itself.
func (p *Process) Terminate(grace time.Duration) ShutdownResult {
	if grace <= 0 {
		grace = p.opts.Grace
	}
	return p.ladder(false, grace)
}

func (p *Process) ladder(viaStdin bool, grace time.Duration) ShutdownResult {
	p.shutdownOnce.Do(func() {
		defer close(p.ladderDone)
		start := time.Now()
		outcome := Exited
		var gone bool
		if viaStdin {
			p.CloseStdin()
			gone = p.waitExit(grace)
		} else {
			select {
			case <-p.exited:
				gone = true
			default:
			}
		}
		if !gone {
			outcome = Terminated
			if err := terminateGroup(p.cmd); err != nil {
				p.opts.Logger.Debug("process: SIGTERM", "error", err)
			}
			if !p.waitExit(grace) {
				outcome = Killed
				if err := killGroup(p.cmd); err != nil {
					p.opts.Logger.Debug("process: SIGKILL", "error", err)
				}
				<-p.exited
			}
		}
		p.result = ShutdownResult{Outcome: outcome, Duration: time.Since(start), ExitCode: p.state.ExitCode()}
		if p.exitErr != nil {
			var ee *exec.ExitError
			if !errors.As(p.exitErr, &ee) {
				p.result.Err = p.exitErr
			}
		}
		_ = killGroup(p.cmd) // leftovers of the group
		p.CloseStdin()       // nothing can read it any more
		if viaStdin {
			_ = p.stdout.Close()
		}
		// stderr ends when its last writer is gone; one that escaped the
		// group (setsid) must not keep our drain alive.
		t := time.NewTimer(200 * time.Millisecond)
		select {
		case <-p.drained:
		case <-t.C:
			if p.stderr != nil {
				_ = p.stderr.Close()
			}
		}
		t.Stop()
	})
	<-p.ladderDone
	return p.result
}

// KillGroup kills whatever is left in the server's process group (after the
// server itself exited, its children may still hold its pipes).
func (p *Process) KillGroup() { _ = killGroup(p.cmd) }

// Kill ends the server and its group at once, without the ladder.
func (p *Process) Kill() {
	_ = killGroup(p.cmd)
	<-p.exited
}

func (p *Process) waitExit(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-p.exited:
		return true
	case <-t.C:
		return false
	}
}

// tailBuffer keeps the last n bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	buf []byte
	max int
}

func newTailBuffer(n int) *tailBuffer { return &tailBuffer{max: n} }

func (t *tailBuffer) Write(p []byte) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(p) >= t.max {
		t.buf = append(t.buf[:0], p[len(p)-t.max:]...)
		return
	}
	if over := len(t.buf) + len(p) - t.max; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	t.buf = append(t.buf, p...)
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf)
}

// sinkQueue hands stderr chunks to a sink on its own goroutine, through a
// bounded queue, so the drain never waits for the sink.
type sinkQueue struct {
	ch      chan []byte
	dropped atomic.Int64
	done    chan struct{}
}

const sinkChunks = 64

func newSinkQueue(w io.Writer) *sinkQueue {
	q := &sinkQueue{ch: make(chan []byte, sinkChunks), done: make(chan struct{})}
	go func() {
		defer close(q.done)
		for b := range q.ch {
			_, _ = w.Write(b)
		}
	}()
	return q
}

func (q *sinkQueue) offer(b []byte) {
	select {
	case q.ch <- append([]byte(nil), b...):
	default:
		q.dropped.Add(int64(len(b)))
	}
}

func (q *sinkQueue) close() {
	close(q.ch)
	<-q.done
}
