package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentwire/agentwire/client"
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

// Defaults of ClientOptions (guarantee E3).
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
	// ErrInputRequired is the multi-round-trip signal (SEP-2322) on both
	// sides. A client gets it when the server answered input_required and
	// no ClientOptions.OnInput served the requests. A server's handler gets
	// it from Ask in the 2026-07-28 era while the client has not answered
	// yet, and returns it: the client is sent input_required with the
	// unanswered requests and retries with the answers, and the handler
	// runs again from the start.
	ErrInputRequired = errors.New("mcp: input required from the client (input_required)")
)

// ClientOptions configures a client session. The zero value (or nil) means
// BothEras (probe, then fall back) with the documented timeouts and no era
// cache.
type ClientOptions struct {
	// Eras is which eras the client will speak (guarantee E2). Default
	// BothEras: probe with server/discover, fall back to initialize only on
	// evidence that the server is not modern. ModernOnly never falls back;
	// LegacyOnly goes straight to initialize, without a probe.
	Eras Eras
	// Info identifies this client. Default {"agentwire", "1"}.
	Info Implementation
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
	// command line and arguments.
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
	OnInput func(ctx context.Context, req InputRequest) (any, error)
	// OnLog receives the server's log messages (notifications/message):
	// a legacy server sends them after SetLogLevel (or at its default), a
	// 2026-07-28 server for calls made WithLogLevel.
	OnLog func(level, logger string, data json.RawMessage)
}

func (o *ClientOptions) resolve() ClientOptions {
	var s ClientOptions
	if o != nil {
		s = *o
	}
	if s.Info.Name == "" {
		s.Info = Implementation{Name: "agentwire", Version: "1"}
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
	c        *client.Client // nil over HTTP
	t        transport
	overHTTP bool
	opts     ClientOptions

	era          Era // Modern or Legacy, once negotiated
	version      string
	serverInfo   Implementation
	capabilities json.RawMessage
	instructions string
	probe        ProbeOutcome
	connectTime  time.Duration

	connected atomic.Bool // set once connect succeeded: era and version are fixed
	nextToken atomic.Int64
	progress  sync.Map // progress token (raw JSON) -> ProgressFunc
	subs      sync.Map // listen request id (raw JSON) -> *Subscription
}

// ProgressFunc receives notifications/progress for one call.
type ProgressFunc func(progress, total float64, message string)

// ConnectError is the error of a failed connect. It keeps what the
// negotiation found, for reports: the probe outcome, how long it took, and
// the (closed) client with its stats and server process.
type ConnectError struct {
	Err      error
	Probe    ProbeOutcome
	Duration time.Duration
	Shutdown process.ShutdownResult // how the started server was stopped
	Client   *client.Client
}

func (e *ConnectError) Error() string { return e.Err.Error() }
func (e *ConnectError) Unwrap() error { return e.Err }

func (s *Session) connectFailed(err error) error {
	return &ConnectError{Err: err, Probe: s.probe, Duration: s.connectTime, Shutdown: s.t.close(), Client: s.c}
}

// StartServer launches a stdio MCP server and negotiates with it. A failed
// negotiation is a *ConnectError, and the server has been shut down.
func StartServer(ctx context.Context, cmd process.Command, opts *ClientOptions) (*Session, error) {
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
func NewClient(ctx context.Context, r io.Reader, w io.Writer, opts *ClientOptions) (*Session, error) {
	s := &Session{opts: opts.resolve()}
	s.c = client.New(r, w, s.transportOptions())
	s.t = streamTransport{s.c}
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
	// A restarted legacy server knows nothing of our initialize: it is
	// repeated before any call reaches the new process (guarantee K6).
	o.Handshake = func(ctx context.Context, conn *rpc.Conn) error {
		if !s.connected.Load() || s.era != Legacy {
			return nil
		}
		if _, err := conn.Call(ctx, methodInitialize, map[string]any{
			"protocolVersion": s.version,
			"capabilities":    s.opts.Capabilities,
			"clientInfo":      s.opts.Info,
		}); err != nil {
			return fmt.Errorf("mcp: initialize: %w", err)
		}
		return conn.Notify(ctx, methodInitialized, nil)
	}
	// The server's notifications/cancelled ends a listen stream (and we
	// serve no server requests that it could cancel): let it through.
	o.InboundCancel = []rpc.CancelMethod{}
	return &o
}

// handle serves what the server sends us: progress for our calls.
func (s *Session) handle(ctx context.Context, r *rpc.Request) (any, error) {
	if r.IsNotification() {
		s.inbound(r.Method, r.Params)
		return nil, nil
	}
	if r.Method == methodPing {
		// "The receiver MUST respond promptly with an empty response."
		return map[string]any{}, nil
	}
	if s.opts.OnInput != nil && isInputMethod(r.Method) {
		return s.opts.OnInput(ctx, InputRequest{Method: r.Method, Params: json.RawMessage(r.Params)})
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
		return
	}
	if method == methodProgress {
		var p struct {
			Token    json.RawMessage `json:"progressToken"`
			Progress float64         `json:"progress"`
			Total    float64         `json:"total"`
			Message  string          `json:"message"`
		}
		if json.Unmarshal(params, &p) == nil {
			if f, ok := s.progress.Load(string(p.Token)); ok {
				f.(ProgressFunc)(p.Progress, p.Total, p.Message)
			}
		}
		return
	}
	s.routeSubscription(method, params)
}

// Era is the era negotiated with the server: Modern or Legacy.
func (s *Session) Era() Era { return s.era }

// ProtocolVersion is the version agreed with the server.
func (s *Session) ProtocolVersion() string { return s.version }

// ServerInfo is what the server said about itself.
func (s *Session) ServerInfo() Implementation { return s.serverInfo }

// Capabilities are the server's capabilities, raw.
func (s *Session) Capabilities() json.RawMessage { return s.capabilities }

// Probe says how the era was found.
func (s *Session) Probe() ProbeOutcome { return s.probe }

// ConnectDuration is how long the negotiation took.
func (s *Session) ConnectDuration() time.Duration { return s.connectTime }

// Client is the underlying JSON-RPC client (stats, the server process);
// nil for a session over HTTP.
func (s *Session) Client() *client.Client { return s.c }

// Close ends the session, shutting a started server down with the ladder.
func (s *Session) Close() process.ShutdownResult { return s.t.close() }

// ----- negotiation (guarantees E2–E5) -----

func (s *Session) meta(version string) map[string]any {
	return map[string]any{
		MetaProtocolVersion:    version,
		MetaClientInfo:         s.opts.Info,
		MetaClientCapabilities: s.opts.Capabilities,
	}
}

func (s *Session) connect(ctx context.Context) error {
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, s.opts.ConnectTimeout)
	defer cancel()
	err := s.negotiate(ctx)
	s.connectTime = time.Since(start)
	if err == nil {
		s.t.negotiated(s.era, s.version)
		if t, ok := s.t.(*httpTransport); ok {
			t.openStandalone(ctx)
		}
		s.connected.Store(true)
	}
	return err
}

func (s *Session) negotiate(ctx context.Context) error {
	switch s.opts.Eras {
	case LegacyOnly:
		s.probe = ProbeNone
		return s.initialize(ctx)
	case BothEras:
		if s.opts.Cache != nil {
			if e, ok := s.opts.Cache.Get(s.opts.CacheKey); ok && e.Era == Legacy {
				s.probe = ProbeCached
				err := s.legacyHandshake(ctx)
				var je *jsonrpc.Error
				if err == nil || !errors.As(err, &je) || !eraEvidence(err) {
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
	if rerr := s.t.restart(ctx); rerr != nil {
		return fmt.Errorf("%w (restarting the server: %v)", err, rerr)
	}
	return s.initialize(ctx)
}

// probeAndDecide sends server/discover and reads the outcome (the probe of
// the MCP 2026-07-28 stdio transport's backward compatibility): a result is modern; -32022 is modern at another version,
// never a fallback; any other error, silence or the server dying is legacy.
// The fallback is never keyed to one error code.
func (s *Session) probeAndDecide(ctx context.Context) error {
	version := ModernVersions[0]
	if s.opts.Cache != nil && s.opts.Eras == BothEras {
		// A modern entry names the version to try first; it is checked by
		// the probe like any assumption.
		if e, ok := s.opts.Cache.Get(s.opts.CacheKey); ok && e.Era == Modern && IsModern(e.Version) {
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
			if next == "" && s.opts.Eras != ModernOnly && slices.ContainsFunc(perr.supported, func(v string) bool { return slices.Contains(LegacyVersions, v) }) {
				// It speaks only legacy versions, and says so.
				s.probe = ProbeError
				s.put(EraEntry{Era: Legacy})
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
		if s.opts.Eras == ModernOnly {
			return fmt.Errorf("%w: probe %s: %v", ErrNotModern, outcome, perr.err)
		}
		switch outcome {
		case ProbeError:
			if perr.definitive {
				s.put(EraEntry{Era: Legacy}) // a definitive rejection (guarantee E4)
			}
		case ProbeExit:
			if err := s.t.restart(ctx); err != nil {
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
	if s.t.fresh() {
		timeout += s.opts.ProcessStartupAllowance
	}
	pctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	res, err := s.t.call(pctx, methodDiscover, map[string]any{"_meta": s.meta(version)}, nil)
	var je *jsonrpc.Error
	var hse *HTTPStatusError
	switch {
	case err == nil:
		return ProbeResult, res, probeError{}
	case !eraEvidence(err):
		// 401, 403, 5xx...: the server (or something before it) refused
		// us; that says nothing about its era (guarantee E2).
		return ProbeError, nil, probeError{err: err, fatal: true}
	case errors.As(err, &hse) && hse.RPC == nil:
		// 400/404/405 with no JSON-RPC error: not a modern server (one
		// would explain itself), so try initialize.
		return ProbeError, nil, probeError{err: err}
	case errors.As(err, &je) && je.Code == CodeUnsupportedProtocolVersion:
		var data struct {
			Supported []string `json:"supported"`
		}
		if json.Unmarshal(je.Data, &data) == nil && len(data.Supported) > 0 {
			return ProbeModernError, nil, probeError{err: err, supported: data.Supported}
		}
		// -32022 without a usable list is no modern evidence.
		return ProbeError, nil, probeError{err: err}
	case errors.As(err, &je) && (je.Code == CodeHeaderMismatch || je.Code == CodeMissingRequiredClientCapability):
		// A modern server refusing this request: no reason to fall back.
		return ProbeModernError, nil, probeError{err: err, fatal: true}
	case errors.As(err, &je):
		return ProbeError, nil, probeError{err: err, definitive: true}
	case errors.Is(err, client.ErrConnectionLost):
		return ProbeExit, nil, probeError{err: err}
	case errors.Is(err, ErrHTTPTransport):
		return ProbeError, nil, probeError{err: err, fatal: true}
	case pctx.Err() != nil && ctx.Err() == nil:
		if s.overHTTP {
			// Silence over HTTP is a network or server fault, not a
			// legacy server (which would answer the POST somehow).
			return ProbeTimeout, nil, probeError{err: fmt.Errorf("no answer to server/discover within %v", timeout), fatal: true}
		}
		return ProbeTimeout, nil, probeError{err: err}
	case s.overHTTP:
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
		ServerInfo Implementation `json:"io.modelcontextprotocol/serverInfo"`
	} `json:"_meta"`
}

func (s *Session) modernFromDiscover(ctx context.Context, raw json.RawMessage) error {
	var r discoverResult
	if err := json.Unmarshal(raw, &r); err != nil || len(r.SupportedVersions) == 0 {
		// A malformed probe response is not modern evidence, and teaches
		// the cache nothing (guarantee E4).
		s.probe = ProbeError
		if s.opts.Eras == ModernOnly {
			return fmt.Errorf("%w: malformed server/discover result", ErrNotModern)
		}
		return s.legacyHandshake(ctx)
	}
	if v := mutualModern(r.SupportedVersions); v != "" {
		s.era, s.version = Modern, v
		s.serverInfo, s.capabilities, s.instructions = r.Meta.ServerInfo, r.Capabilities, r.Instructions
		s.put(EraEntry{Era: Modern, Version: v})
		return nil
	}
	// It answered, but lists no modern version of ours.
	if s.opts.Eras == ModernOnly || !slices.ContainsFunc(r.SupportedVersions, func(v string) bool { return slices.Contains(LegacyVersions, v) }) {
		s.forget()
		return fmt.Errorf("%w: the server lists %v", ErrNoCommonVersion, r.SupportedVersions)
	}
	if !slices.ContainsFunc(r.SupportedVersions, IsModern) {
		s.put(EraEntry{Era: Legacy}) // an explicit legacy-only list (guarantee E4)
	}
	return s.legacyHandshake(ctx)
}

// eraEvidence reports whether an error can say anything about a server's
// era: over HTTP, only an answer of the server itself (a JSON-RPC error
// with 200, 400, 404 or 405) can; 401, 403 and 5xx come from in front of
// it or from its trouble (guarantee E2).
func eraEvidence(err error) bool {
	var hse *HTTPStatusError
	if errors.As(err, &hse) {
		switch hse.StatusCode {
		case http.StatusBadRequest, http.StatusNotFound, http.StatusMethodNotAllowed:
			return true
		}
		return false
	}
	return true
}

func mutualModern(theirs []string) string {
	for _, v := range ModernVersions {
		if slices.Contains(theirs, v) {
			return v
		}
	}
	return ""
}

func (s *Session) put(e EraEntry) {
	if s.opts.Cache != nil && s.opts.Eras == BothEras {
		s.opts.Cache.Put(s.opts.CacheKey, e)
	}
}

func (s *Session) forget() {
	if s.opts.Cache != nil {
		s.opts.Cache.Forget(s.opts.CacheKey)
	}
}

type initializeResult struct {
	ProtocolVersion string          `json:"protocolVersion"`
	Capabilities    json.RawMessage `json:"capabilities"`
	ServerInfo      Implementation  `json:"serverInfo"`
	Instructions    string          `json:"instructions"`
}

// initialize is the legacy handshake.
func (s *Session) initialize(ctx context.Context) error {
	offer := s.opts.LegacyVersion
	if offer == "" {
		offer = LatestLegacyVersion
	}
	res, err := s.t.call(ctx, methodInitialize, map[string]any{
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
	if !slices.Contains(LegacyVersions, r.ProtocolVersion) {
		return fmt.Errorf("%w: initialize answered %q", ErrNoCommonVersion, r.ProtocolVersion)
	}
	s.era, s.version = Legacy, r.ProtocolVersion
	s.serverInfo, s.capabilities, s.instructions = r.ServerInfo, r.Capabilities, r.Instructions
	s.t.negotiated(Legacy, r.ProtocolVersion)
	if err := s.t.notify(ctx, methodInitialized, nil); err != nil {
		return fmt.Errorf("mcp: notifications/initialized: %w", err)
	}
	return nil
}

// reinitializeHTTP starts a new legacy session on an HTTP server that
// forgot ours (404), with the version agreed the first time.
func (s *Session) reinitializeHTTP(ctx context.Context) error {
	if _, err := s.t.call(ctx, methodInitialize, map[string]any{
		"protocolVersion": s.version,
		"capabilities":    s.opts.Capabilities,
		"clientInfo":      s.opts.Info,
	}, nil); err != nil {
		return err
	}
	return s.t.notify(ctx, methodInitialized, nil)
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
	res, err := s.t.call(ctx, method, p, nil, opts...)
	if err != nil {
		s.forgetOn(err)
		return nil, err
	}
	return s.answerInput(ctx, method, p, res, opts)
}

func isInputMethod(m string) bool {
	return m == MethodElicit || m == MethodSample || m == MethodListRoots
}

// answerInput serves input_required results (SEP-2322): every request is
// passed to OnInput and the request is sent again with the answers and the
// server's requestState, until a complete result (at most 10 rounds).
func (s *Session) answerInput(ctx context.Context, method string, params any, res json.RawMessage, opts []client.CallOption) (json.RawMessage, error) {
	for round := 0; ; round++ {
		err := checkResultType(res)
		if !errors.Is(err, ErrInputRequired) || s.opts.OnInput == nil {
			return res, err
		}
		if round == 10 {
			return nil, fmt.Errorf("%w: still asked after 10 rounds", ErrInputRequired)
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
			a, err := s.opts.OnInput(ctx, InputRequest{Method: ir.Method, Params: ir.Params})
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
		if res, err = s.t.call(ctx, method, params, nil, opts...); err != nil {
			return nil, err
		}
	}
}

// forgetOn drops the cached era when a modern request is refused for its
// version: the negotiation the cache remembers no longer holds (guarantee E5).
func (s *Session) forgetOn(err error) {
	var je *jsonrpc.Error
	if s.era == Modern && errors.As(err, &je) && je.Code == CodeUnsupportedProtocolVersion {
		s.forget()
	}
}

func checkResultType(res json.RawMessage) error {
	var r struct {
		ResultType *string `json:"resultType"`
	}
	if len(res) == 0 || res[0] != '{' || json.Unmarshal(res, &r) != nil || r.ResultType == nil {
		return nil // absent resultType means "complete"
	}
	switch *r.ResultType {
	case resultTypeComplete:
		return nil
	case resultTypeInputRequired:
		return ErrInputRequired
	}
	return fmt.Errorf("mcp: unknown resultType %q", *r.ResultType)
}

// withMeta returns params as an object with _meta merged in: the modern
// per-request fields, and extra keys (a progress token).
func (s *Session) withMeta(params any, extra map[string]any) (any, error) {
	if s.era != Modern && extra == nil {
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
	if s.era == Modern {
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
func (s *Session) ListTools(ctx context.Context) ([]Tool, error) {
	tools, err := listAll[Tool](ctx, s, methodToolsList, "tools")
	if err != nil {
		return nil, err
	}
	// "Invalid annotations" (x-mcp-header): the client drops the tool,
	// whose calls it could not mirror correctly (SEP-2243).
	if _, invalid := toolHeaderMap(tools); len(invalid) > 0 {
		tools = slices.DeleteFunc(tools, func(t Tool) bool { return invalid[t.Name] })
	}
	if t, ok := s.t.(*httpTransport); ok {
		t.learnTools(tools)
	}
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
// at level and above (they reach ClientOptions.OnLog).
func WithLogLevel(level string) CallOption { return func(o *callOptions) { o.logLevel = level } }

// WithProgress asks for progress notifications and delivers them to f.
func WithProgress(f ProgressFunc) CallOption { return func(o *callOptions) { o.progress = f } }

// Retryable marks the call read-only: it is retried once on a restarted
// server if the server dies during it (over HTTP: if its response stream
// breaks). It is client.Retryable for MCP calls: one idea, one name at
// both layers.
func Retryable() CallOption { return func(o *callOptions) { o.retryable = true } }

// CallTool calls a tool. Cancelling ctx sends notifications/cancelled.
func (s *Session) CallTool(ctx context.Context, name string, args any, opts ...CallOption) (*ToolResult, error) {
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
		s.progress.Store(string(token), co.progress)
		defer s.progress.Delete(string(token))
		extra = map[string]any{MetaProgressToken: token}
	}
	if co.logLevel != "" && s.era == Modern {
		if extra == nil {
			extra = map[string]any{}
		}
		extra[MetaLogLevel] = co.logLevel
	}
	p, err := s.withMeta(map[string]any{"name": name, "arguments": args}, extra)
	if err != nil {
		return nil, err
	}
	var copts []client.CallOption
	if co.retryable {
		copts = append(copts, client.Retryable())
	}
	res, err := s.t.call(ctx, methodToolsCall, p, nil, copts...)
	var je *jsonrpc.Error
	if t, ok := s.t.(*httpTransport); ok && errors.As(err, &je) && je.Code == CodeHeaderMismatch && !t.knowsTool(name) {
		// The tool wants arguments mirrored in Mcp-Param- headers, and
		// its schema has not been listed yet: list, then try once more.
		if _, lerr := s.ListTools(ctx); lerr == nil && t.knowsTool(name) {
			res, err = s.t.call(ctx, methodToolsCall, p, nil, copts...)
		}
	}
	if err != nil {
		s.forgetOn(err)
		return nil, err
	}
	if res, err = s.answerInput(ctx, methodToolsCall, p, res, copts); err != nil {
		return nil, err
	}
	var r ToolResult
	if err := json.Unmarshal(res, &r); err != nil {
		return nil, fmt.Errorf("mcp: tools/call: %w", err)
	}
	return &r, nil
}
