package host

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/agentwire/agentwire/mcp"
	"io"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentwire/agentwire/client"
	"github.com/agentwire/agentwire/internal/relay"
	"github.com/agentwire/agentwire/jsonrpc"
	"github.com/agentwire/agentwire/process"
	"github.com/agentwire/agentwire/rpc"
)

// ProbeOutcome says what the server/discover probe found.
type ProbeOutcome string

const (
	ProbeResult      ProbeOutcome = "result"       // a DiscoverResult: modern
	ProbeModernError ProbeOutcome = "modern-error" // -32022: modern, another version
	ProbeError       ProbeOutcome = "error"        // any other error, or a malformed answer: legacy
	ProbeTimeout     ProbeOutcome = "timeout"      // silence past the probe timeout: legacy
	ProbeExit        ProbeOutcome = "exit"         // the server died on the probe: restarted, legacy
	ProbeCached      ProbeOutcome = "cached"       // the era cache answered; no probe
	ProbeNone        ProbeOutcome = "none"         // LegacyOnly: no probe
)

// Defaults of Options (guarantee E3).
const (
	DefaultProbeTimeout            = 5 * time.Second
	DefaultProcessStartupAllowance = 10 * time.Second
	DefaultConnectTimeout          = 30 * time.Second
)

// Errors a connect can fail with.
var (
	// ErrNoCommonVersion: the server is modern but shares no version with
	// us (a -32022 whose supported list has none of ours). Never a reason
	// to fall back to initialize.
	ErrNoCommonVersion = errors.New("mcp: the server supports no protocol version we speak")
	// ErrNotModern: a ModernOnly client met a server that is not modern.
	ErrNotModern = errors.New("mcp: the server did not answer as a 2026-07-28 server")
)

// Options configures a client session. The zero value (or nil) means
// BothEras (probe, then fall back) with the documented timeouts and no era
// cache.
type Options struct {
	// Eras is which eras the client will speak (guarantee E2). Default
	// BothEras: probe with server/discover, fall back to initialize only on
	// evidence that the server is not modern. ModernOnly never falls back;
	// LegacyOnly goes straight to initialize, without a probe.
	Eras mcp.Eras
	// Info identifies this client. Default {"agentwire", "1"}.
	Info mcp.Implementation
	// Capabilities are this client's capabilities. Default {}.
	Capabilities map[string]any
	// ProbeTimeout bounds the server/discover probe. Default 5 s.
	ProbeTimeout time.Duration
	// ProcessStartupAllowance is added to the first probe of a freshly
	// started process. Default 10 s; negative means none.
	ProcessStartupAllowance time.Duration
	// ConnectTimeout bounds the whole connect. Default 30 s.
	ConnectTimeout time.Duration
	// LegacyVersion is the version initialize offers. Default the latest
	// legacy version (2025-11-25); the server may answer an older one,
	// which is then used.
	LegacyVersion string
	// Cache remembers eras across connects, keyed by CacheKey. Nil: none.
	Cache EraCache
	// CacheKey identifies the server. Default for StartServer: its
	// command line and arguments; for streamable.Connect: its URL.
	CacheKey string
	// Transport configures the underlying client (cancellation style,
	// stderr sink, shutdown grace, restart policy, ...).
	Transport *client.Options
	// OnInput serves what a server asks of the client while a request
	// runs: elicitation/create, sampling/createMessage, roots/list (with
	// Params as json.RawMessage). The same function serves a legacy
	// server's requests and a 2026-07-28 server's input_required results,
	// whose requests are answered and the request retried (up to 10
	// rounds). Declare the matching Capabilities (elicitation, sampling,
	// roots). Nil: requests get -32601 and input_required is
	// ErrInputRequired.
	OnInput func(ctx context.Context, req mcp.InputRequest) (any, error)
	// OnLog receives the server's log messages (notifications/message):
	// a legacy server sends them after SetLogLevel (or at its default), a
	// 2026-07-28 server for calls made WithLogLevel.
	OnLog func(level, logger string, data json.RawMessage)
	// OnNotification receives the server's notifications that nothing
	// else takes (no call's progress, no subscription's event, no log
	// message for OnLog): a legacy server's list changes
	// (notifications/tools/list_changed, ...) and resource updates
	// (notifications/resources/updated), which over HTTP come on the
	// session's standalone GET stream or an HTTP+SSE server's event
	// stream. It is called on the goroutine that reads them, in the order
	// they were read: keep it short. Nil: they are dropped.
	OnNotification func(method string, params json.RawMessage)
}

func (o *Options) resolve() Options {
	var s Options
	if o != nil {
		s = *o
	}
	if s.Info.Name == "" {
		s.Info = mcp.Implementation{Name: "agentwire", Version: "1"}
	}
	if s.Capabilities == nil {
		s.Capabilities = map[string]any{}
	}
	if s.ProbeTimeout <= 0 {
		s.ProbeTimeout = DefaultProbeTimeout
	}
	switch {
	case s.ProcessStartupAllowance == 0:
		s.ProcessStartupAllowance = DefaultProcessStartupAllowance
	case s.ProcessStartupAllowance < 0:
		s.ProcessStartupAllowance = 0
	}
	if s.ConnectTimeout <= 0 {
		s.ConnectTimeout = DefaultConnectTimeout
	}
	return s
}

// Session is a negotiated MCP connection.
type Session struct {
	c    *client.Client // nil over another transport (HTTP)
	t    Transport
	opts Options

	metaJSON atomic.Pointer[encodedMeta] // the modern _meta, encoded (encodedMeta)

	era          mcp.Era // Modern or Legacy, once negotiated
	version      string
	serverInfo   mcp.Implementation
	capabilities json.RawMessage
	instructions string
	probe        ProbeOutcome
	probeTime    time.Duration // spent in server/discover probes
	connectTime  time.Duration

	connected atomic.Bool // set once connect succeeded: era and version are fixed
	nextToken atomic.Int64
	progress  sync.Map // progress token (raw JSON) -> *relay.Relay[progressEvent]
	subs      sync.Map // listen request id (raw JSON) -> *Subscription

	// hearers are OnNotification's functions, copied on write: the read
	// path (every notification) takes no lock.
	hearersMu sync.Mutex
	hearers   atomic.Pointer[[]*hearer]
}

type hearer struct {
	f func(method string, params json.RawMessage)
}

// OnNotification calls f with each notification from the server that
// belongs to no call and no listen stream (a legacy server's list
// changes, resource updates and log messages, the last after
// Options.OnLog), besides Options.OnNotification, on the goroutine that
// read it: f must not wait. It is how a bridge fans a legacy server's
// notifications out to its own clients. stop removes f.
func (s *Session) OnNotification(f func(method string, params json.RawMessage)) (stop func()) {
	h := &hearer{f: f}
	s.hearersMu.Lock()
	var next []*hearer
	if cur := s.hearers.Load(); cur != nil {
		next = append(next, *cur...)
	}
	next = append(next, h)
	s.hearers.Store(&next)
	s.hearersMu.Unlock()
	return func() {
		s.hearersMu.Lock()
		defer s.hearersMu.Unlock()
		cur := s.hearers.Load()
		if cur == nil {
			return
		}
		next := make([]*hearer, 0, len(*cur))
		for _, x := range *cur {
			if x != h {
				next = append(next, x)
			}
		}
		s.hearers.Store(&next)
	}
}

func (s *Session) tellHearers(method string, params json.RawMessage) {
	if hs := s.hearers.Load(); hs != nil {
		for _, h := range *hs {
			h.f(method, params)
		}
	}
}

// ProgressFunc receives notifications/progress for one call. It is called
// on a goroutine of its own, once per notification, in the order the
// server sent them, and every call has happened by the time the call (or
// WatchProgress's stop) returns. A function slower than the server's
// progress misses some once 256 are waiting (each says how far the call
// has got).
type ProgressFunc func(progress, total float64, message string)

// ConnectError is the error of a failed connect. It keeps what the
// negotiation found, for reports: the probe outcome, how long it took, and
// the (closed) client with its stats and server process.
type ConnectError struct {
	Err      error
	Probe    ProbeOutcome
	Duration time.Duration
	// ProbeDuration is the part of Duration spent waiting for the
	// server/discover probe (zero when none was sent).
	ProbeDuration time.Duration
	Shutdown      process.ShutdownResult // how the started server was stopped
	Client        *client.Client
}

func (e *ConnectError) Error() string { return e.Err.Error() }
func (e *ConnectError) Unwrap() error { return e.Err }

func (s *Session) connectFailed(err error) error {
	return &ConnectError{Err: err, Probe: s.probe, Duration: s.connectTime, ProbeDuration: s.probeTime, Shutdown: s.t.Close(), Client: s.c}
}

// StartServer launches a stdio MCP server and negotiates with it. A failed
// negotiation is a *ConnectError, and the server has been shut down.
func StartServer(ctx context.Context, cmd process.Command, opts *Options) (*Session, error) {
	s := &Session{opts: opts.resolve()}
	if s.opts.CacheKey == "" {
		key, _ := json.Marshal(append([]string{cmd.Path}, cmd.Args...))
		s.opts.CacheKey = string(key)
	}
	c, err := client.Start(cmd, s.transportOptions())
	if err != nil {
		return nil, err
	}
	s.c, s.t = c, streamTransport{c}
	if err := s.connect(ctx); err != nil {
		return nil, s.connectFailed(err)
	}
	return s, nil
}

// NewClient negotiates over an existing stream (r: the server's messages,
// w: ours).
func NewClient(ctx context.Context, r io.Reader, w io.Writer, opts *Options) (*Session, error) {
	s := &Session{opts: opts.resolve()}
	s.c = client.New(r, w, s.transportOptions())
	s.t = streamTransport{s.c}
	if err := s.connect(ctx); err != nil {
		return nil, s.connectFailed(err)
	}
	return s, nil
}

// Peer is what a Session gives the transport that NewSession opens: where
// the server's messages to the client go.
type Peer struct {
	// Notification receives a notification from the server (progress,
	// log messages, subscription events), routed as on a stream.
	Notification func(method string, params json.RawMessage)
	// Input serves a server's own request: elicitation/create,
	// sampling/createMessage and roots/list go to Options.OnInput,
	// anything else is -32601. Nil when OnInput is.
	Input func(ctx context.Context, method string, params json.RawMessage) (any, error)
	// Reinitialize starts a new legacy session, at the version agreed the
	// first time, with a server that forgot ours (over HTTP: a 404 to a
	// request with an Mcp-Session-Id, or the end of a 2024-11-05 HTTP+SSE
	// server's event stream).
	Reinitialize func(ctx context.Context) error
	// ProbeTimeout is Options.ProbeTimeout (resolved): it also bounds what
	// a transport does to find the server's transport (over HTTP, the
	// wait for an HTTP+SSE server's endpoint event).
	ProbeTimeout time.Duration
}

// NewSession negotiates over the transport that open returns, given the
// session's Peer (guarantees E2–E5): how another package (streamable)
// builds a Session over its own transport. A failed negotiation is a
// *ConnectError, and the transport has been closed.
func NewSession(ctx context.Context, opts *Options, open func(Peer) Transport) (*Session, error) {
	s := &Session{opts: opts.resolve()}
	p := Peer{Notification: s.inbound, Reinitialize: s.reinitialize, ProbeTimeout: s.opts.ProbeTimeout}
	if s.opts.OnInput != nil {
		p.Input = func(ctx context.Context, method string, params json.RawMessage) (any, error) {
			if !isInputMethod(method) {
				return nil, jsonrpc.Errorf(jsonrpc.CodeMethodNotFound, "method not found: %s", method)
			}
			return s.opts.OnInput(ctx, mcp.InputRequest{Method: method, Params: params})
		}
	}
	s.t = open(p)
	if err := s.connect(ctx); err != nil {
		return nil, s.connectFailed(err)
	}
	return s, nil
}

func (s *Session) transportOptions() *client.Options {
	var o client.Options
	if s.opts.Transport != nil {
		o = *s.opts.Transport
	}
	o.Handler = rpc.HandlerFunc(s.handle)
	// Progress is routed as it is read, so that it keeps its place before
	// the response that follows it (a handler may run late, off the read
	// loop); the handler then has nothing left to do with it.
	o.Admit = func(r *rpc.Request) error {
		if r.Method == mcp.MethodProgress {
			s.routeProgress(r.Params)
		}
		return nil
	}
	// A restarted legacy server knows nothing of our initialize: it is
	// repeated before any call reaches the new process (guarantee K6).
	o.Handshake = func(ctx context.Context, conn *rpc.Conn) error {
		if !s.connected.Load() || s.era != mcp.Legacy {
			return nil
		}
		if _, err := conn.Call(ctx, mcp.MethodInitialize, map[string]any{
			"protocolVersion": s.version,
			"capabilities":    s.opts.Capabilities,
			"clientInfo":      s.opts.Info,
		}); err != nil {
			return fmt.Errorf("mcp: initialize: %w", err)
		}
		return conn.Notify(ctx, mcp.MethodInitialized, nil)
	}
	// The server's notifications/cancelled ends a listen stream (and we
	// serve no server requests that it could cancel): let it through.
	o.InboundCancel = []rpc.CancelMethod{}
	return &o
}

// handle serves what the server sends us: progress for our calls.
func (s *Session) handle(ctx context.Context, r *rpc.Request) (any, error) {
	if r.IsNotification() {
		if r.Method != mcp.MethodProgress { // routed by Admit
			s.inbound(r.Method, r.Params)
		}
		return nil, nil
	}
	if r.Method == mcp.MethodPing {
		// "The receiver MUST respond promptly with an empty response."
		return map[string]any{}, nil
	}
	if s.opts.OnInput != nil && isInputMethod(r.Method) {
		return s.opts.OnInput(ctx, mcp.InputRequest{Method: r.Method, Params: json.RawMessage(r.Params)})
	}
	return nil, jsonrpc.Errorf(jsonrpc.CodeMethodNotFound, "method not found: %s", r.Method)
}

// inbound routes a notification from the server: progress to its call,
// anything else to the subscription it names.
func (s *Session) inbound(method string, params json.RawMessage) {
	if method == "notifications/message" {
		if s.opts.OnLog != nil {
			var m struct {
				Level  string          `json:"level"`
				Logger string          `json:"logger"`
				Data   json.RawMessage `json:"data"`
			}
			if json.Unmarshal(params, &m) == nil {
				s.opts.OnLog(m.Level, m.Logger, m.Data)
			}
		}
		s.tellHearers(method, params)
		return
	}
	if method == mcp.MethodProgress {
		s.routeProgress(params)
		return
	}
	if !s.routeSubscription(method, params) {
		if s.opts.OnNotification != nil {
			s.opts.OnNotification(method, params)
		}
		s.tellHearers(method, params)
	}
}

// Era is the era negotiated with the server: Modern or Legacy.
func (s *Session) Era() mcp.Era { return s.era }

// ProtocolVersion is the version agreed with the server.
func (s *Session) ProtocolVersion() string { return s.version }

// ServerInfo is what the server said about itself.
func (s *Session) ServerInfo() mcp.Implementation { return s.serverInfo }

// Capabilities are the server's capabilities, raw.
func (s *Session) Capabilities() json.RawMessage { return s.capabilities }

// Probe says how the era was found.
func (s *Session) Probe() ProbeOutcome { return s.probe }

// ConnectDuration is how long the negotiation took.
func (s *Session) ConnectDuration() time.Duration { return s.connectTime }

// ProbeDuration is the part of ConnectDuration spent waiting for the
// server/discover probe, every attempt included (a retry at another
// version, say); zero when none was sent (ProbeCached, ProbeNone).
func (s *Session) ProbeDuration() time.Duration { return s.probeTime }

// Instructions are what the server said about how to use it.
func (s *Session) Instructions() string { return s.instructions }

// ModernMeta is the per-request _meta this session sends a modern server:
// the agreed version, the client's identity and capabilities.
func (s *Session) ModernMeta() map[string]any { return s.meta(s.version) }

// Send sends a request as it is, for a proxy: no _meta is added and an
// input_required result is returned as it is (Request does both).
func (s *Session) Send(ctx context.Context, method string, params any, opts ...client.CallOption) (json.RawMessage, error) {
	return s.t.Call(ctx, method, params, nil, opts...)
}

// WatchProgress passes the server's notifications/progress for token (raw
// JSON, as sent in _meta.progressToken) to f until stop is called: for a
// request sent with Send.
func (s *Session) WatchProgress(token json.RawMessage, f ProgressFunc) (stop func()) {
	r := newProgressRelay(f)
	s.progress.Store(string(token), r)
	return func() {
		s.progress.Delete(string(token))
		r.Finish()
	}
}

// routeProgress hands a notifications/progress to the relay of its token.
// It runs where the notification is read — the stream's reading goroutine
// (through Admit), the event stream's reader over HTTP — before anything
// read after it, the call's response included, so a call's progress is
// never overtaken by its result; it never blocks.
func (s *Session) routeProgress(params json.RawMessage) {
	var p struct {
		Token    json.RawMessage `json:"progressToken"`
		Progress float64         `json:"progress"`
		Total    float64         `json:"total"`
		Message  string          `json:"message"`
	}
	if json.Unmarshal(params, &p) != nil {
		return
	}
	if r, ok := s.progress.Load(string(p.Token)); ok {
		r.(*relay.Relay[progressEvent]).Send(progressEvent{p.Progress, p.Total, p.Message})
	}
}

// progressEvent is one notifications/progress on its way to a
// ProgressFunc.
type progressEvent struct {
	progress, total float64
	message         string
}

// progressQueue bounds the progress waiting for a slow ProgressFunc;
// beyond it progress is dropped (each notification says how far the call
// has got, so a later one makes up for it).
const progressQueue = 256

// newProgressRelay calls one call's ProgressFunc, in the order the
// progress was read, on a goroutine of its own: the reader that routes
// progress must not wait for the caller's function. Finish waits until
// everything routed has been delivered, so the call returns after its
// progress.
func newProgressRelay(f ProgressFunc) *relay.Relay[progressEvent] {
	return relay.New(progressQueue, func(e progressEvent) { f(e.progress, e.total, e.message) }, nil)
}

// Client is the underlying JSON-RPC client (stats, the server process);
// nil for a session over HTTP.
func (s *Session) Client() *client.Client { return s.c }

// Close ends the session, shutting a started server down with the ladder.
func (s *Session) Close() process.ShutdownResult { return s.t.Close() }

// ----- negotiation (guarantees E2–E5) -----

func (s *Session) meta(version string) map[string]any {
	return map[string]any{
		mcp.MetaProtocolVersion:    version,
		mcp.MetaClientInfo:         s.opts.Info,
		mcp.MetaClientCapabilities: s.opts.Capabilities,
	}
}

func (s *Session) connect(ctx context.Context) error {
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, s.opts.ConnectTimeout)
	defer cancel()
	err := s.negotiate(ctx)
	s.connectTime = time.Since(start)
	if err == nil {
		s.t.Negotiated(s.era, s.version)
		s.t.Connected(ctx)
		s.connected.Store(true)
	}
	return err
}

func (s *Session) negotiate(ctx context.Context) error {
	switch s.opts.Eras {
	case mcp.LegacyOnly:
		s.probe = ProbeNone
		return s.initialize(ctx)
	case mcp.BothEras:
		if s.opts.Cache != nil {
			if e, ok := s.opts.Cache.Get(s.opts.CacheKey); ok && e.Era == mcp.Legacy {
				s.probe = ProbeCached
				err := s.legacyHandshake(ctx)
				var je *jsonrpc.Error
				if err == nil || !errors.As(err, &je) || s.t.Evidence(err) != EvidenceAnswer {
					return err
				}
				// The server no longer takes initialize (it was upgraded,
				// say): the cached assumption failed; forget it and probe.
				s.forget()
			}
		}
	}
	return s.probeAndDecide(ctx)
}

// legacyHandshake is initialize, once more on a restarted server when the
// first one died after answering the probe (some legacy servers reply with
// an error and exit).
func (s *Session) legacyHandshake(ctx context.Context) error {
	err := s.initialize(ctx)
	if err == nil || !errors.Is(err, client.ErrConnectionLost) {
		return err
	}
	if rerr := s.t.Restart(ctx); rerr != nil {
		return fmt.Errorf("%w (restarting the server: %v)", err, rerr)
	}
	return s.initialize(ctx)
}

// probeAndDecide sends server/discover and reads the outcome (the probe of
// the MCP 2026-07-28 stdio transport's backward compatibility): a result is modern; -32022 is modern at another version,
// never a fallback; any other error, silence or the server dying is legacy.
// The fallback is never keyed to one error code.
func (s *Session) probeAndDecide(ctx context.Context) error {
	version := mcp.ModernVersions[0]
	if s.opts.Cache != nil && s.opts.Eras == mcp.BothEras {
		// A modern entry names the version to try first; it is checked by
		// the probe like any assumption.
		if e, ok := s.opts.Cache.Get(s.opts.CacheKey); ok && e.Era == mcp.Modern && mcp.IsModern(e.Version) {
			version = e.Version
		}
	}
	retried := false
	for {
		outcome, res, perr := s.discover(ctx, version)
		s.probe = outcome
		if perr.fatal {
			return fmt.Errorf("mcp: connect: server/discover: %w", perr.err)
		}
		switch outcome {
		case ProbeResult:
			return s.modernFromDiscover(ctx, res)
		case ProbeModernError:
			next := mutualModern(perr.supported)
			if next == "" && s.opts.Eras != mcp.ModernOnly && slices.ContainsFunc(perr.supported, func(v string) bool { return slices.Contains(mcp.LegacyVersions, v) }) {
				// It speaks only legacy versions, and says so.
				s.probe = ProbeError
				s.put(EraEntry{Era: mcp.Legacy})
				return s.legacyHandshake(ctx)
			}
			if next == "" {
				s.forget()
				return fmt.Errorf("%w: the server supports %v", ErrNoCommonVersion, perr.supported)
			}
			if retried {
				// Once more, even with the same version: a server may have
				// refused a version it supports (a gateway that lagged).
				s.forget()
				return fmt.Errorf("%w: the server rejected %s", ErrNoCommonVersion, version)
			}
			version, retried = next, true
			continue
		}
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("mcp: connect: %w", err)
		}
		if s.opts.Eras == mcp.ModernOnly {
			return fmt.Errorf("%w: probe %s: %v", ErrNotModern, outcome, perr.err)
		}
		switch outcome {
		case ProbeError:
			if perr.definitive {
				s.put(EraEntry{Era: mcp.Legacy}) // a definitive rejection (guarantee E4)
			}
		case ProbeExit:
			if err := s.t.Restart(ctx); err != nil {
				return fmt.Errorf("mcp: the server exited on the probe and could not be restarted: %w", err)
			}
		}
		return s.legacyHandshake(ctx)
	}
}

type probeError struct {
	err        error
	supported  []string
	definitive bool // an error reply to the probe
	fatal      bool // an error that ends the connect: no fallback
}

// discover sends one probe and classifies what came back.
func (s *Session) discover(ctx context.Context, version string) (ProbeOutcome, json.RawMessage, probeError) {
	timeout := s.opts.ProbeTimeout
	if s.t.Fresh() {
		timeout += s.opts.ProcessStartupAllowance
	}
	pctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	start := time.Now()
	res, err := s.t.Call(pctx, mcp.MethodDiscover, map[string]any{"_meta": s.meta(version)}, nil)
	s.probeTime += time.Since(start)
	ev := EvidenceAnswer
	if err != nil {
		ev = s.t.Evidence(err)
	}
	var je *jsonrpc.Error
	switch {
	case err == nil:
		return ProbeResult, res, probeError{}
	case ev == EvidenceNone:
		// 401, 403, 5xx, a network failure...: the server (or something
		// before it) refused us, or we never reached it; that says nothing
		// about its era (guarantee E2).
		return ProbeError, nil, probeError{err: err, fatal: true}
	case ev == EvidenceNotModern:
		// 400/404/405 with no JSON-RPC error: not a modern server (one
		// would explain itself), so try initialize.
		return ProbeError, nil, probeError{err: err}
	case errors.As(err, &je) && je.Code == mcp.CodeUnsupportedProtocolVersion:
		var data struct {
			Supported []string `json:"supported"`
		}
		if json.Unmarshal(je.Data, &data) == nil && len(data.Supported) > 0 {
			return ProbeModernError, nil, probeError{err: err, supported: data.Supported}
		}
		// -32022 without a usable list is no modern evidence.
		return ProbeError, nil, probeError{err: err}
	case errors.As(err, &je) && (je.Code == mcp.CodeHeaderMismatch || je.Code == mcp.CodeMissingRequiredClientCapability):
		// A modern server refusing this request: no reason to fall back.
		return ProbeModernError, nil, probeError{err: err, fatal: true}
	case errors.As(err, &je):
		return ProbeError, nil, probeError{err: err, definitive: true}
	case errors.Is(err, client.ErrConnectionLost):
		return ProbeExit, nil, probeError{err: err}
	case pctx.Err() != nil && ctx.Err() == nil:
		if ev == EvidenceFault {
			// Silence over HTTP is a network or server fault, not a
			// legacy server (which would answer the POST somehow).
			return ProbeTimeout, nil, probeError{err: fmt.Errorf("no answer to server/discover within %v", timeout), fatal: true}
		}
		return ProbeTimeout, nil, probeError{err: err}
	case ev == EvidenceFault:
		// A 200 that is not the response (another id, HTML, too large):
		// not an answer of an MCP server of any era.
		return ProbeError, nil, probeError{err: err, fatal: true}
	}
	return ProbeError, nil, probeError{err: err}
}

type discoverResult struct {
	SupportedVersions []string        `json:"supportedVersions"`
	Capabilities      json.RawMessage `json:"capabilities"`
	Instructions      string          `json:"instructions"`
	Meta              struct {
		ServerInfo mcp.Implementation `json:"io.modelcontextprotocol/serverInfo"`
	} `json:"_meta"`
}

func (s *Session) modernFromDiscover(ctx context.Context, raw json.RawMessage) error {
	var r discoverResult
	if err := json.Unmarshal(raw, &r); err != nil || len(r.SupportedVersions) == 0 {
		// A malformed probe response is not modern evidence, and teaches
		// the cache nothing (guarantee E4).
		s.probe = ProbeError
		if s.opts.Eras == mcp.ModernOnly {
			return fmt.Errorf("%w: malformed server/discover result", ErrNotModern)
		}
		return s.legacyHandshake(ctx)
	}
	if v := mutualModern(r.SupportedVersions); v != "" {
		s.era, s.version = mcp.Modern, v
		s.serverInfo, s.capabilities, s.instructions = r.Meta.ServerInfo, r.Capabilities, r.Instructions
		s.put(EraEntry{Era: mcp.Modern, Version: v})
		return nil
	}
	// It answered, but lists no modern version of ours.
	if s.opts.Eras == mcp.ModernOnly || !slices.ContainsFunc(r.SupportedVersions, func(v string) bool { return slices.Contains(mcp.LegacyVersions, v) }) {
		s.forget()
		return fmt.Errorf("%w: the server lists %v", ErrNoCommonVersion, r.SupportedVersions)
	}
	if !slices.ContainsFunc(r.SupportedVersions, mcp.IsModern) {
		s.put(EraEntry{Era: mcp.Legacy}) // an explicit legacy-only list (guarantee E4)
	}
	return s.legacyHandshake(ctx)
}

func mutualModern(theirs []string) string {
	for _, v := range mcp.ModernVersions {
		if slices.Contains(theirs, v) {
			return v
		}
	}
	return ""
}

func (s *Session) put(e EraEntry) {
	if s.opts.Cache != nil && s.opts.Eras == mcp.BothEras {
		s.opts.Cache.Put(s.opts.CacheKey, e)
	}
}

func (s *Session) forget() {
	if s.opts.Cache != nil {
		s.opts.Cache.Forget(s.opts.CacheKey)
	}
}

type initializeResult struct {
	ProtocolVersion string             `json:"protocolVersion"`
	Capabilities    json.RawMessage    `json:"capabilities"`
	ServerInfo      mcp.Implementation `json:"serverInfo"`
	Instructions    string             `json:"instructions"`
}

// initialize is the legacy handshake.
func (s *Session) initialize(ctx context.Context) error {
	offer := s.opts.LegacyVersion
	if offer == "" {
		offer = mcp.LatestLegacyVersion
	}
	res, err := s.t.Call(ctx, mcp.MethodInitialize, map[string]any{
		"protocolVersion": offer,
		"capabilities":    s.opts.Capabilities,
		"clientInfo":      s.opts.Info,
	}, nil)
	if err != nil {
		return fmt.Errorf("mcp: initialize: %w", err)
	}
	var r initializeResult
	if err := json.Unmarshal(res, &r); err != nil {
		return fmt.Errorf("mcp: initialize: malformed result: %w", err)
	}
	if !slices.Contains(mcp.LegacyVersions, r.ProtocolVersion) {
		return fmt.Errorf("%w: initialize answered %q", ErrNoCommonVersion, r.ProtocolVersion)
	}
	s.era, s.version = mcp.Legacy, r.ProtocolVersion
	s.serverInfo, s.capabilities, s.instructions = r.ServerInfo, r.Capabilities, r.Instructions
	s.t.Negotiated(mcp.Legacy, r.ProtocolVersion)
	if err := s.t.Notify(ctx, mcp.MethodInitialized, nil); err != nil {
		return fmt.Errorf("mcp: notifications/initialized: %w", err)
	}
	return nil
}

// reinitialize starts a new legacy session on an HTTP server that forgot
// ours (404), with the version agreed the first time.
func (s *Session) reinitialize(ctx context.Context) error {
	if _, err := s.t.Call(ctx, mcp.MethodInitialize, map[string]any{
		"protocolVersion": s.version,
		"capabilities":    s.opts.Capabilities,
		"clientInfo":      s.opts.Info,
	}, nil); err != nil {
		return err
	}
	return s.t.Notify(ctx, mcp.MethodInitialized, nil)
}

// ----- requests -----

// Request sends any MCP request. In the modern era the per-request _meta
// (version, client info, capabilities) is added to params, which must then
// be an object (or nil). The result is returned raw; a result whose
// resultType is input_required is ErrInputRequired.
func (s *Session) Request(ctx context.Context, method string, params any, opts ...client.CallOption) (json.RawMessage, error) {
	p, err := s.withMeta(params, nil)
	if err != nil {
		return nil, err
	}
	res, err := s.t.Call(ctx, method, p, nil, opts...)
	if err != nil {
		s.forgetOn(err)
		return nil, err
	}
	return s.answerInput(ctx, method, p, res, opts)
}

func isInputMethod(m string) bool {
	return m == mcp.MethodElicit || m == mcp.MethodSample || m == mcp.MethodListRoots
}

// answerInput serves input_required results (SEP-2322): every request is
// passed to OnInput and the request is sent again with the answers and the
// server's requestState, until a complete result (at most 10 rounds).
func (s *Session) answerInput(ctx context.Context, method string, params any, res json.RawMessage, opts []client.CallOption) (json.RawMessage, error) {
	for round := 0; ; round++ {
		err := checkResultType(res)
		if !errors.Is(err, mcp.ErrInputRequired) || s.opts.OnInput == nil {
			return res, err
		}
		if round == 10 {
			return nil, fmt.Errorf("%w: still asked after 10 rounds", mcp.ErrInputRequired)
		}
		var r struct {
			InputRequests map[string]struct {
				Method string          `json:"method"`
				Params json.RawMessage `json:"params"`
			} `json:"inputRequests"`
			RequestState *string `json:"requestState"`
		}
		if err := json.Unmarshal(res, &r); err != nil {
			return nil, fmt.Errorf("mcp: malformed input_required result: %w", err)
		}
		answers := map[string]any{}
		for k, ir := range r.InputRequests {
			a, err := s.opts.OnInput(ctx, mcp.InputRequest{Method: ir.Method, Params: ir.Params})
			if err != nil {
				return nil, fmt.Errorf("mcp: answering %s: %w", ir.Method, err)
			}
			answers[k] = a
		}
		b, err := json.Marshal(params)
		if err != nil {
			return nil, err
		}
		var obj map[string]any
		if err := json.Unmarshal(b, &obj); err != nil || obj == nil {
			obj = map[string]any{}
		}
		obj["inputResponses"] = answers
		delete(obj, "requestState")
		if r.RequestState != nil {
			obj["requestState"] = *r.RequestState
		}
		params = obj
		if res, err = s.t.Call(ctx, method, params, nil, opts...); err != nil {
			return nil, err
		}
	}
}

// forgetOn drops the cached era when a modern request is refused for its
// version: the negotiation the cache remembers no longer holds (guarantee E5).
func (s *Session) forgetOn(err error) {
	var je *jsonrpc.Error
	if s.era == mcp.Modern && errors.As(err, &je) && je.Code == mcp.CodeUnsupportedProtocolVersion {
		s.forget()
	}
}

func checkResultType(res json.RawMessage) error {
	// res is a result as jsonrpc.Decode accepted it: its members are
	// walked, not decoded (this runs for every call). The key is matched
	// exactly, as JSON-RPC members are.
	var rt []byte
	jsonrpc.EachMember(res, func(key, value []byte) bool {
		if string(key) == "resultType" {
			rt = value
			return false
		}
		return true
	})
	t, ok := jsonrpc.StringBytes(rt)
	if !ok {
		return nil // absent (or not a string) resultType means "complete"
	}
	switch string(t) {
	case mcp.ResultTypeComplete:
		return nil
	case mcp.ResultTypeInputRequired:
		return mcp.ErrInputRequired
	case mcp.ResultTypeTask:
		return nil // a task (the tasks extension): the caller reads it
	}
	return fmt.Errorf("mcp: unknown resultType %q", t)
}

// toolCallParams encodes a tools/call's params directly, without a map:
// the name, the arguments and, in the modern era, the session's _meta,
// encoded once per protocol version. (A call with extra _meta — a
// progress token, a log level — goes through withMeta.)
func (s *Session) toolCallParams(name string, args any) (*jsonrpc.Encoded, error) {
	a, err := jsonrpc.RawValue(args)
	if err != nil {
		return nil, fmt.Errorf("mcp: tools/call arguments: %w", err)
	}
	var meta []byte
	if s.era == mcp.Modern {
		meta = s.encodedMeta()
	}
	b := make([]byte, 0, len(name)+len(a)+len(meta)+40)
	b = append(b, `{"name":`...)
	b = jsonrpc.AppendString(b, name)
	b = append(b, `,"arguments":`...)
	b = append(b, a...)
	if meta != nil {
		b = append(b, `,"_meta":`...)
		b = append(b, meta...)
	}
	e := jsonrpc.Encoded(append(b, '}'))
	return &e, nil
}

// encodedMeta is the session's modern per-request _meta, encoded once for
// the version it is for.
func (s *Session) encodedMeta() []byte {
	v := s.version
	if m := s.metaJSON.Load(); m != nil && m.version == v {
		return m.json
	}
	b, _ := json.Marshal(s.meta(v))
	s.metaJSON.Store(&encodedMeta{version: v, json: b})
	return b
}

// encodedMeta is a _meta object encoded for one protocol version.
type encodedMeta struct {
	version string
	json    []byte
}

// withMeta returns params as an object with _meta merged in: the modern
// per-request fields, and extra keys (a progress token).
func (s *Session) withMeta(params any, extra map[string]any) (any, error) {
	if s.era != mcp.Modern && extra == nil {
		return params, nil
	}
	obj := map[string]json.RawMessage{}
	if params != nil {
		b, err := json.Marshal(params)
		if err != nil {
			return nil, err
		}
		if string(b) != "null" {
			if err := json.Unmarshal(b, &obj); err != nil {
				return nil, fmt.Errorf("mcp: params must be an object: %w", err)
			}
		}
	}
	meta := map[string]any{}
	if raw, ok := obj["_meta"]; ok {
		json.Unmarshal(raw, &meta)
	}
	if s.era == mcp.Modern {
		for k, v := range s.meta(s.version) {
			meta[k] = v
		}
	}
	for k, v := range extra {
		meta[k] = v
	}
	b, _ := json.Marshal(meta)
	obj["_meta"] = b
	return obj, nil
}

// ListTools returns the server's tools (all pages).
func (s *Session) ListTools(ctx context.Context) ([]mcp.Tool, error) {
	tools, err := listAll[mcp.Tool](ctx, s, mcp.MethodToolsList, "tools")
	if err != nil {
		return nil, err
	}
	// "Invalid annotations" (x-mcp-header): the client drops the tool,
	// whose calls it could not mirror correctly (SEP-2243).
	if _, invalid := mcp.ToolHeaderMap(tools); len(invalid) > 0 {
		tools = slices.DeleteFunc(tools, func(t mcp.Tool) bool { return invalid[t.Name] })
	}
	s.t.LearnTools(tools)
	return tools, nil
}

// CallOption modifies one tool call.
type CallOption func(*callOptions)

type callOptions struct {
	progress  ProgressFunc
	retryable bool
	logLevel  string
}

// WithLogLevel asks a 2026-07-28 server for log messages about this call
// at level and above (they reach Options.OnLog).
func WithLogLevel(level string) CallOption { return func(o *callOptions) { o.logLevel = level } }

// WithProgress asks for progress notifications and delivers them to f.
func WithProgress(f ProgressFunc) CallOption { return func(o *callOptions) { o.progress = f } }

// Retryable marks the call read-only: it is retried once on a restarted
// server if the server dies during it (over HTTP: if its response stream
// breaks). It is client.Retryable for MCP calls: one idea, one name at
// both layers.
func Retryable() CallOption { return func(o *callOptions) { o.retryable = true } }

// CallTool calls a tool. Cancelling ctx sends notifications/cancelled.
// A call the server answers with a task (or that the server runs only as
// one) is waited for (Task.Wait); cancelling ctx then cancels the task.
func (s *Session) CallTool(ctx context.Context, name string, args any, opts ...CallOption) (*mcp.ToolResult, error) {
	var co callOptions
	for _, o := range opts {
		o(&co)
	}
	if args == nil {
		args = map[string]any{}
	}
	var extra map[string]any
	if co.progress != nil {
		token := json.RawMessage(strconv.Quote("p" + strconv.FormatInt(s.nextToken.Add(1), 10)))
		defer s.WatchProgress(token, co.progress)()
		extra = map[string]any{mcp.MetaProgressToken: token}
	}
	if co.logLevel != "" && s.era == mcp.Modern {
		if extra == nil {
			extra = map[string]any{}
		}
		extra[mcp.MetaLogLevel] = co.logLevel
	}
	var p any
	var err error
	if extra == nil {
		p, err = s.toolCallParams(name, args)
	} else {
		p, err = s.withMeta(map[string]any{"name": name, "arguments": args}, extra)
	}
	if err != nil {
		return nil, err
	}
	var copts []client.CallOption
	if co.retryable {
		copts = append(copts, client.Retryable())
	}
	res, err := s.t.Call(ctx, mcp.MethodToolsCall, p, nil, copts...)
	var je *jsonrpc.Error
	if errors.As(err, &je) && je.Code == mcp.CodeHeaderMismatch && !s.t.KnowsTool(name) {
		// The tool wants arguments mirrored in Mcp-Param- headers, and
		// its schema has not been listed yet: list, then try once more.
		if _, lerr := s.ListTools(ctx); lerr == nil && s.t.KnowsTool(name) {
			res, err = s.t.Call(ctx, mcp.MethodToolsCall, p, nil, copts...)
		}
	}
	if err != nil && co.progress == nil && s.requiresTasks(err) {
		// The tool runs only as a task, which this client can take.
		t, terr := s.StartTool(ctx, name, args)
		if terr != nil {
			return nil, err // the first refusal says more
		}
		return t.waitOrCancel(ctx)
	}
	if err != nil {
		s.forgetOn(err)
		return nil, err
	}
	if res, err = s.answerInput(ctx, mcp.MethodToolsCall, p, res, copts); err != nil {
		return nil, err
	}
	if isTaskResult(res, s.era == mcp.Modern) {
		// The server made the call a task: wait for it.
		t, err := s.taskOrResult(res)
		if err != nil {
			return nil, err
		}
		return t.waitOrCancel(ctx)
	}
	var r mcp.ToolResult
	if err := json.Unmarshal(res, &r); err != nil {
		return nil, fmt.Errorf("mcp: tools/call: %w", err)
	}
	return &r, nil
}
