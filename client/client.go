package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentwire/agentwire/internal/wait"
	"github.com/agentwire/agentwire/jsonrpc"
	"github.com/agentwire/agentwire/process"
	"github.com/agentwire/agentwire/rpc"
)

// ErrConnectionLost is matched (errors.Is) by the error of every call that
// could not be answered because the connection or the server went away.
var ErrConnectionLost = rpc.ErrConnectionLost

// ErrClosed is returned by calls made after Close.
var ErrClosed = errors.New("client: closed")

// Defaults of RestartPolicy.
const (
	DefaultMaxRestarts = 3
	DefaultBackoff     = 100 * time.Millisecond
	maxBackoff         = 10 * time.Second
)

// RestartPolicy says whether and how a crashed server is started again
// (guarantee K6). The zero value restarts up to 3 times, waiting 100 ms before the
// first restart and twice as long before each next one.
type RestartPolicy struct {
	MaxRestarts int
	Backoff     time.Duration
}

// Options configures a Client. The zero value (or nil) means the defaults.
type Options struct {
	// Cancel is the notification sent when a call's context ends first
	// (guarantee K2). Nil means rpc.MCPCancel (notifications/cancelled with
	// requestId and reason); use rpc.ACPCancel for $/cancel_request.
	Cancel *rpc.CancelMethod
	// NoCancel sends no cancellation at all.
	NoCancel bool
	// Strict ends the connection at the first line from the server that is
	// not a valid message or that answers no call of ours. Default: such
	// lines are counted, logged and offered to OnViolation (guarantee K3).
	Strict bool
	// OnViolation observes every such line.
	OnViolation func(rpc.Violation)
	// Handler serves notifications (and requests, where the protocol has
	// them) from the server. Nil ignores notifications and answers requests
	// with -32601.
	Handler rpc.Handler
	// Admit, if set, sees every request and notification from the server
	// in the order it was read, on the reading goroutine, before Handler
	// can run (rpc.Options.Admit): what must stay in step with the
	// responses read after it (an MCP call's progress) is routed there.
	// Keep it short; it must not block.
	Admit func(req *rpc.Request) error
	// InboundCancel lists the notifications that cancel a request the
	// server sent us (see rpc.Options.Cancel). Nil means rpc's default; an
	// empty slice passes every notification to Handler.
	InboundCancel []rpc.CancelMethod
	// MaxMessageBytes bounds one line from the server. Default 16 MiB.
	MaxMessageBytes int
	// IsBarrier marks the server's methods whose handler must finish before
	// anything read after them is dispatched (rpc.Options.IsBarrier): ACP's
	// session/update, whose order is the protocol's. Nil means none.
	IsBarrier func(method string) bool
	// RejectBatches answers a JSON array from the server with one -32600
	// (ACP has no batches). Default: accepted.
	RejectBatches bool
	// MaxQueuedRequests and MaxQueuedBytes bound what the server sent that
	// waits for a handler (rpc.Options); past them a request is refused
	// with BusyError and a notification pauses reading. Defaults: rpc's.
	MaxQueuedRequests int
	MaxQueuedBytes    int
	// BusyError answers a server request refused for want of a place
	// (rpc.Options.BusyError). Default: rpc's -32000.
	BusyError *jsonrpc.Error
	// Logger receives diagnostics. Nil means slog.Default().
	Logger *slog.Logger
	// Outbound wraps every call and notification the client sends
	// (rpc.Options.Outbound): logging, limits, tracing of outbound calls.
	Outbound []rpc.OutboundMiddleware
	// Middleware wraps Handler, which serves what the server sends
	// (rpc.Options.Middleware).
	Middleware []rpc.Middleware

	// Process configures a server started by Start.
	Process *process.Options
	// Restart, when set, restarts a server that exits or crashes. Nil
	// never restarts.
	Restart *RestartPolicy
	// OnRestart is called after a crashed server was started again, with
	// the number of restarts so far and the error that ended the previous
	// one. Anything tied to the old process (a subscription stream, say)
	// must be set up again.
	OnRestart func(restarts int, lost error)
	// Handshake, when set, runs on every restarted server before any call
	// can reach it (an MCP legacy initialize, say), within 30 s. If it
	// fails, the restart counts as failed.
	Handshake func(ctx context.Context, conn *rpc.Conn) error
}

const handshakeTimeout = 30 * time.Second

// ConnectionLostError is the error of a call whose connection ended. When
// the server was a process it carries the exit status and stderr tail
// (guarantee K5).
type ConnectionLostError struct {
	Exit  *process.ExitError // how the server process ended; nil for a stream, or a server still running
	Cause error              // why the connection ended, if it says
	// StderrTail is the server's stderr so far when it had not exited
	// (it closed its stdout and kept running).
	StderrTail string
}

func (e *ConnectionLostError) Error() string {
	msg := "client: connection lost"
	switch {
	case e.Exit != nil:
		return msg + ": " + e.Exit.Error()
	case e.Cause != nil:
		msg += ": " + e.Cause.Error()
	}
	if e.StderrTail != "" {
		msg += "; server still running; stderr tail:\n" + strings.TrimRight(e.StderrTail, "\n")
	}
	return msg
}

// Unwrap makes the error match ErrConnectionLost, the exit error and the cause.
func (e *ConnectionLostError) Unwrap() []error {
	errs := []error{ErrConnectionLost}
	if e.Exit != nil {
		errs = append(errs, e.Exit)
	}
	if e.Cause != nil {
		errs = append(errs, e.Cause)
	}
	return errs
}

// Stats counts what a client has seen, over every server process it ran.
type Stats struct {
	Violations       int64 // lines that were not valid messages (stdout pollution)
	UnknownResponses int64
	LateResponses    int64 // responses to calls already abandoned
	Restarts         int   // servers started again, by the policy or by Restart
	// Lost counts connections to a server that ended before Close: the
	// server exited, crashed or closed its stdout.
	Lost int
	// RestartsFailed counts restarts that did not give a usable server:
	// the process could not be started, or Options.Handshake failed.
	RestartsFailed int
	// RestartsExhausted counts losses the restart policy gave up on,
	// its MaxRestarts used up.
	RestartsExhausted int
	// OutputQueued is what waits for the server in the current
	// connection's output queue now, and BlockedOnOutput the time our
	// writers have waited for room in it, over every connection: a server
	// that does not read its stdin shows here (rpc.Stats).
	OutputQueued    int64
	BlockedOnOutput time.Duration
	// Promotions counts the handlers of the server's messages (requests,
	// notifications) handed off the read loop for running long.
	Promotions int64
}

// generation is one connection (and, for Start, one server process).
type generation struct {
	conn     *rpc.Conn
	proc     *process.Process
	next     chan struct{} // closed when the client has moved on from this generation
	lost     error         // why it ended, set before next is closed
	counted  bool          // its stats are in Client.past (guarded by Client.mu)
	answered atomic.Bool   // a call on it has had a response
}

// Client is the calling side of a JSON-RPC connection: over any stream
// (New), or to a server it starts and looks after (Start).
type Client struct {
	opts    Options
	command process.Command
	log     *slog.Logger

	mu       sync.Mutex
	cur      *generation
	closing  bool
	failed   error // the client gave up: no more restarts
	restarts int
	lastLost error     // why the last server was lost
	past     rpc.Stats // stats of ended generations
	closed   chan struct{}
	ended    chan struct{} // Done: closed or failed for good
	endOnce  sync.Once
	monitors sync.WaitGroup

	// What became of lost servers besides restarts (Stats), under mu.
	lost, restartsFailed, restartsExhausted int
}

func resolve(o *Options) Options {
	var s Options
	if o != nil {
		s = *o
	}
	if s.Logger == nil {
		s.Logger = slog.Default()
	}
	if s.Restart != nil {
		r := *s.Restart
		if r.MaxRestarts <= 0 {
			r.MaxRestarts = DefaultMaxRestarts
		}
		if r.Backoff <= 0 {
			r.Backoff = DefaultBackoff
		}
		s.Restart = &r
	}
	return s
}

func (c *Client) connOptions() *rpc.Options {
	o := &rpc.Options{
		QuietOnBadInput: true, // a client never writes responses to bad server output
		FatalViolations: c.opts.Strict,
		OnViolation:     c.opts.OnViolation,
		MaxMessageBytes: c.opts.MaxMessageBytes,
		Logger:          c.log,
		Cancel:          c.opts.InboundCancel,
		Admit:           c.opts.Admit,
		IsBarrier:       c.opts.IsBarrier,
		RejectBatches:   c.opts.RejectBatches,
		// A lost server leaves nothing to wait for.
		EndOfStreamTimeout: time.Millisecond,
		MaxQueuedRequests:  c.opts.MaxQueuedRequests,
		MaxQueuedBytes:     c.opts.MaxQueuedBytes,
		BusyError:          c.opts.BusyError,
		Outbound:           c.opts.Outbound,
		Middleware:         c.opts.Middleware,
	}
	if c.opts.Process != nil && c.opts.Process.Grace > 0 {
		// Draining our last messages to a server that does not read is
		// bounded like the ladder's steps.
		o.ShutdownTimeout = c.opts.Process.Grace
	}
	switch {
	case c.opts.NoCancel:
	case c.opts.Cancel != nil:
		o.OutboundCancel = c.opts.Cancel
	default:
		o.OutboundCancel = &rpc.MCPCancel
	}
	return o
}

// New returns a client over an existing stream: r carries the server's
// messages, w takes ours. If w has a Close method, Close uses it.
func New(r io.Reader, w io.Writer, opts *Options) *Client {
	c := &Client{opts: resolve(opts), closed: make(chan struct{}), ended: make(chan struct{})}
	c.log = c.opts.Logger
	c.cur = &generation{conn: rpc.New(r, w, c.opts.Handler, c.connOptions()), next: make(chan struct{})}
	c.watch(c.cur)
	return c
}

// Start launches a server (process.Start: exec.Command in its own process
// group, stderr always drained) and returns a client talking to it over its
// stdin and stdout.
func Start(cmd process.Command, opts *Options) (*Client, error) {
	c := &Client{opts: resolve(opts), command: cmd, closed: make(chan struct{}), ended: make(chan struct{})}
	c.log = c.opts.Logger
	g, err := c.spawn()
	if err != nil {
		return nil, err
	}
	c.cur = g
	c.watch(g)
	return c, nil
}

func (c *Client) spawn() (*generation, error) {
	p, err := process.Start(c.command, c.opts.Process)
	if err != nil {
		return nil, err
	}
	conn := rpc.New(p.Stdout(), p.Stdin(), c.opts.Handler, c.connOptions())
	return &generation{conn: conn, proc: p, next: make(chan struct{})}, nil
}

// watch waits for a generation to end and then restarts or gives up. The
// end is the connection's end, or the server's exit: a child the server
// left behind may hold its stdout open, so no end of input would come
// (a crash must still fail pending calls, guarantee K5).
func (c *Client) watch(g *generation) {
	c.monitors.Add(1)
	go func() {
		defer c.monitors.Done()
		c.awaitEnd(g)
		lost := c.lostError(g)
		c.mu.Lock()
		c.lastLost = lost
		c.addStatsLocked(g.conn.Stats())
		g.counted = true
		closing := c.closing
		c.mu.Unlock()
		if g.proc != nil {
			// It may have closed stdout and still run: stop it, without
			// making the callers wait for the ladder.
			c.monitors.Add(1)
			go func() {
				defer c.monitors.Done()
				g.proc.Shutdown()
			}()
		}
		if closing {
			g.lost = lost
			close(g.next)
			return
		}
		c.log.Warn("client: connection to the server lost", "error", lost)
		c.mu.Lock()
		c.lost++
		c.mu.Unlock()
		next, err := c.restart(lost)
		c.mu.Lock()
		g.lost = lost
		if next != nil && c.closing {
			// Closed while restarting: the new server is not wanted.
			defer func() {
				next.proc.Shutdown()
				next.conn.Close()
			}()
			next = nil
		}
		if next != nil {
			c.cur = next
			c.restarts++
		} else {
			if err == nil {
				err = lost
			}
			c.failed = err
		}
		restarts := c.restarts
		c.mu.Unlock()
		if next == nil {
			c.end()
		}
		close(g.next)
		if next != nil {
			c.watch(next)
			if c.opts.OnRestart != nil {
				// Not on the monitor: the callback may call Close, which
				// waits for the monitors.
				go c.opts.OnRestart(restarts, lost)
			}
		}
	}()
}

// awaitEnd returns when the generation's connection has ended. If the
// server exits first, what its group left behind is killed so its pipes
// close, and the connection is closed if they still do not.
func (c *Client) awaitEnd(g *generation) {
	var exited <-chan struct{}
	if g.proc != nil {
		exited = g.proc.Exited()
	}
	select {
	case <-g.conn.Done():
		return
	case <-exited:
	}
	if wait.Closed(g.conn.Done(), 200*time.Millisecond) {
		return // the rest of its output was read; input ended normally
	}
	g.proc.KillGroup()
	if wait.Closed(g.conn.Done(), 300*time.Millisecond) {
		return
	}
	g.conn.Close()
}

// restart starts a new server per the policy, or returns nil.
func (c *Client) restart(lost error) (*generation, error) {
	if c.opts.Restart == nil || c.command.Path == "" {
		return nil, nil
	}
	c.mu.Lock()
	n := c.restarts
	if n >= c.opts.Restart.MaxRestarts {
		c.restartsExhausted++
	}
	c.mu.Unlock()
	if n >= c.opts.Restart.MaxRestarts {
		return nil, fmt.Errorf("client: server lost and %d restarts used up: %w", n, lost)
	}
	backoff := c.opts.Restart.Backoff << n
	if backoff > maxBackoff || backoff <= 0 {
		backoff = maxBackoff
	}
	t := time.NewTimer(backoff)
	defer t.Stop()
	select {
	case <-t.C:
	case <-c.closed:
		return nil, ErrClosed
	}
	g, err := c.spawn()
	if err != nil {
		c.restartFailed()
		c.log.Error("client: restarting the server failed", "error", err)
		return nil, fmt.Errorf("client: restarting the server: %w", err)
	}
	if err := c.handshake(context.Background(), g); err != nil {
		c.restartFailed()
		return nil, err
	}
	return g, nil
}

// restartFailed counts a restart that gave no usable server (Stats);
// one that Close cut short is not a failure.
func (c *Client) restartFailed() {
	c.mu.Lock()
	if !c.closing {
		c.restartsFailed++
	}
	c.mu.Unlock()
}

// lostError describes why a generation ended. For a process it waits (a
// little) for the exit status, so the error can say how the server died.
func (c *Client) lostError(g *generation) error {
	e := &ConnectionLostError{Cause: g.conn.Wait()}
	if g.proc != nil {
		if wait.Closed(g.proc.Exited(), 250*time.Millisecond) {
			e.Exit = g.proc.ExitError()
		} else {
			e.StderrTail = g.proc.StderrTail()
		}
	}
	return e
}

func (c *Client) current() (*generation, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.closing:
		return nil, ErrClosed
	case c.failed != nil:
		return nil, c.failed
	}
	return c.cur, nil
}

// Ready returns once a server is running: at once normally; after the
// server was lost, when the restart policy has started a new one (nil) or
// given up (the loss). It lets something tied to the old process, a
// subscription say, be set up again on the new one.
func (c *Client) Ready(ctx context.Context) error {
	_, err := c.live(ctx)
	return err
}

// live returns the generation to send a new message on. A server that is
// already known to be dead is skipped: the message waits for the restart
// and goes to the new process, since it was never sent to the old one.
func (c *Client) live(ctx context.Context) (*generation, error) {
	for {
		g, err := c.current()
		if err != nil {
			return nil, err
		}
		select {
		case <-g.conn.Done():
		default:
			return g, nil
		}
		select {
		case <-g.next:
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		}
	}
}

// handshake runs Options.Handshake on a new server before it is used,
// within handshakeTimeout, ctx, and the client's life: Close does not wait
// for a handshake the server never answers. A failed handshake stops the
// new server.
func (c *Client) handshake(ctx context.Context, g *generation) error {
	if c.opts.Handshake == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, handshakeTimeout)
	defer cancel()
	go func() {
		select {
		case <-c.closed:
			cancel()
		case <-ctx.Done():
		}
	}()
	if err := c.opts.Handshake(ctx, g.conn); err != nil {
		c.log.Error("client: the handshake with the restarted server failed", "error", err)
		g.conn.Close()
		g.proc.Shutdown()
		return fmt.Errorf("client: handshake with the restarted server: %w", err)
	}
	return nil
}

// ErrNotRestartable is returned by Restart for a client made with New.
var ErrNotRestartable = errors.New("client: not a server process; cannot restart")

// Restart replaces a server that has died with a new process, whatever the
// restart policy says: for a caller that knows the death was expected (an
// MCP server that exits on a probe it does not understand, say). It does
// nothing when the current server is still running.
func (c *Client) Restart(ctx context.Context) error {
	if c.command.Path == "" {
		return ErrNotRestartable
	}
	c.mu.Lock()
	g := c.cur
	c.mu.Unlock()
	select {
	case <-g.conn.Done():
	default:
		return nil // still running
	}
	select {
	case <-g.next: // the monitor is done with it (a restart policy may have acted)
	case <-ctx.Done():
		return context.Cause(ctx)
	}
	next, err := c.spawn()
	if err != nil {
		c.restartFailed()
		return err
	}
	if err := c.handshake(ctx, next); err != nil {
		c.restartFailed()
		return err
	}
	c.mu.Lock()
	if c.closing {
		c.mu.Unlock()
		next.proc.Shutdown()
		next.conn.Close()
		return ErrClosed
	}
	if c.cur != g {
		c.mu.Unlock() // someone else restarted it meanwhile
		next.proc.Shutdown()
		next.conn.Close()
		return nil
	}
	c.cur = next
	c.failed = nil
	c.restarts++
	c.mu.Unlock()
	c.watch(next)
	return nil
}

// LastLoss returns why the most recently lost server was lost (a
// *ConnectionLostError with its exit status and stderr tail), or nil.
func (c *Client) LastLoss() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lastLost
}

// Fresh reports whether the current server process has not answered
// anything yet (its first request may need a start-up allowance).
func (c *Client) Fresh() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cur != nil && c.cur.proc != nil && !c.cur.answered.Load()
}

// CallOption modifies one call.
type CallOption func(*callOptions)

type callOptions struct{ retry bool }

// Retryable marks a call as safe to send twice (read-only): if the server
// is lost before it answers and the restart policy starts a new one, the call
// is retried once on the new server (guarantee K6).
func Retryable() CallOption { return func(o *callOptions) { o.retry = true } }

// IsRetryable reports whether opts include Retryable, for transports that
// carry calls their own way (MCP over HTTP re-sends a read-only request
// whose response stream broke).
func IsRetryable(opts ...CallOption) bool {
	var o callOptions
	for _, f := range opts {
		f(&o)
	}
	return o.retry
}

// Call sends a request and waits for its response. The result is returned
// raw; an error response is a *jsonrpc.Error. If ctx ends first, the
// cancellation notification is sent without waiting, the id is forgotten and
// Call returns ctx's error at once (guarantee K2). If the server is lost, the
// error is a *ConnectionLostError matching ErrConnectionLost.
func (c *Client) Call(ctx context.Context, method string, params any, opts ...CallOption) (json.RawMessage, error) {
	var co callOptions
	for _, o := range opts {
		o(&co)
	}
	g, err := c.live(ctx)
	if err != nil {
		return nil, err
	}
	res, err := c.callOn(ctx, g, method, params)
	if err == nil || !co.retry || !errors.Is(err, ErrConnectionLost) {
		return res, err
	}
	select {
	case <-g.next:
	case <-ctx.Done():
		return nil, context.Cause(ctx)
	}
	ng, nerr := c.current()
	if nerr != nil || ng == g {
		return nil, err
	}
	return c.callOn(ctx, ng, method, params)
}

func (c *Client) callOn(ctx context.Context, g *generation, method string, params any) (json.RawMessage, error) {
	res, err := g.conn.Call(ctx, method, params)
	var je *jsonrpc.Error
	if err == nil || errors.As(err, &je) {
		g.answered.Store(true)
	}
	if err != nil && errors.Is(err, ErrConnectionLost) && ctx.Err() == nil {
		<-g.conn.Done()
		return nil, c.lostError(g)
	}
	return res, err
}

// CallWithID is Call (without retries) that first tells onID the request's
// id; see rpc.Conn.CallWithID.
func (c *Client) CallWithID(ctx context.Context, method string, params any, onID func(jsonrpc.ID)) (json.RawMessage, error) {
	g, err := c.live(ctx)
	if err != nil {
		return nil, err
	}
	res, err := g.conn.CallWithID(ctx, method, params, onID)
	if err != nil && errors.Is(err, ErrConnectionLost) && ctx.Err() == nil {
		<-g.conn.Done()
		return nil, c.lostError(g)
	}
	return res, err
}

// Notify sends a notification to the server.
func (c *Client) Notify(ctx context.Context, method string, params any) error {
	g, err := c.current()
	if err != nil {
		return err
	}
	return g.conn.Notify(ctx, method, params)
}

// CloseOutput drains what is queued for the server and then closes our
// side of the stream (the server sees end of input), while the server's
// replies are still read: the polite first step of a shutdown that a
// protocol defines as EOF (ACP's agents cancel their turns and answer them).
// Close is still needed afterwards.
func (c *Client) CloseOutput() error {
	g, err := c.current()
	if err != nil {
		return err
	}
	return g.conn.CloseOutput()
}

// Done is closed when the client has closed, or its server is lost for
// good (no restart policy, or the policy gave up); Err then says why.
func (c *Client) Done() <-chan struct{} { return c.ended }

// Err returns why the client ended (ErrClosed, or the loss the restart
// policy could not repair), or nil while it is usable.
func (c *Client) Err() error {
	_, err := c.current()
	return err
}

// end closes Done once.
func (c *Client) end() { c.endOnce.Do(func() { close(c.ended) }) }

// Process returns the server process of the current connection (nil for a
// client made with New).
func (c *Client) Process() *process.Process {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cur == nil {
		return nil
	}
	return c.cur.proc
}

// Stats returns counters over every connection the client has had.
func (c *Client) Stats() Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.past
	if c.cur != nil && !c.cur.counted {
		{
			now := c.cur.conn.Stats()
			s.ParseErrors += now.ParseErrors
			s.InvalidMessages += now.InvalidMessages
			s.TooLong += now.TooLong
			s.UnknownResponses += now.UnknownResponses
			s.LateResponses += now.LateResponses
			s.BlockedOnOutput += now.BlockedOnOutput
			s.Promotions += now.Promotions
			s.OutputQueued = now.OutputQueued
		}
	}
	return Stats{
		OutputQueued:      s.OutputQueued,
		BlockedOnOutput:   s.BlockedOnOutput,
		Promotions:        s.Promotions,
		Violations:        s.ParseErrors + s.InvalidMessages + s.TooLong,
		UnknownResponses:  s.UnknownResponses,
		LateResponses:     s.LateResponses,
		Restarts:          c.restarts,
		Lost:              c.lost,
		RestartsFailed:    c.restartsFailed,
		RestartsExhausted: c.restartsExhausted,
	}
}

func (c *Client) addStatsLocked(s rpc.Stats) {
	c.past.ParseErrors += s.ParseErrors
	c.past.InvalidMessages += s.InvalidMessages
	c.past.TooLong += s.TooLong
	c.past.UnknownResponses += s.UnknownResponses
	c.past.LateResponses += s.LateResponses
	c.past.BlockedOnOutput += s.BlockedOnOutput
	c.past.Promotions += s.Promotions
}

// Close ends the client. For a server it started, it runs the shutdown
// ladder (close stdin, wait, SIGTERM to the group, wait, SIGKILL) and
// returns how that ended; requests still in flight may be answered while
// the server drains. For a stream client the result is zero.
func (c *Client) Close() process.ShutdownResult {
	c.mu.Lock()
	if c.closing {
		c.mu.Unlock()
		c.monitors.Wait()
		return c.shutdownResult()
	}
	c.closing = true
	close(c.closed)
	c.end()
	g := c.cur
	c.mu.Unlock()

	var res process.ShutdownResult
	if g.proc != nil {
		// Drain what we queued last (a cancellation, say) and close the
		// server's stdin through the connection, which keeps reading its
		// final replies; then the ladder.
		_ = g.conn.CloseOutput()
		res = g.proc.Shutdown()
	}
	g.conn.Close()
	c.monitors.Wait()
	return res
}

func (c *Client) shutdownResult() process.ShutdownResult {
	c.mu.Lock()
	g := c.cur
	c.mu.Unlock()
	if g == nil || g.proc == nil {
		return process.ShutdownResult{}
	}
	return g.proc.Shutdown()
}
