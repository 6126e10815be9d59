package server

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/agentwire/agentwire/mcp"
	"log/slog"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/agentwire/agentwire/jsonrpc"
	"github.com/agentwire/agentwire/rpc"
	"github.com/agentwire/agentwire/stdio"
)

// Options configures a Server. The zero value (or nil) is a dual-era
// server with no caching.
type Options struct {
	// Eras is which eras the server serves. Default BothEras: each
	// request is served in the era it speaks.
	Eras mcp.Eras
	// LegacySilent makes a legacy server answer nothing at all before
	// initialize (a silent legacy server; some fastmcp servers
	// behave so). Only for testing clients.
	LegacySilent bool
	// Instructions is returned by server/discover and initialize.
	Instructions string
	// CacheTTL is the ttlMs of cacheable results (server/discover,
	// tools/list). Default 0: do not cache.
	CacheTTL time.Duration
	// Logger receives diagnostics. Nil means slog.Default().
	Logger *slog.Logger
	// PageSize is the most items a list result holds; the rest follow
	// through nextCursor. Default 0: everything in one page.
	PageSize int
	// StateKey signs the requestState of multi-round-trip requests (see
	// ToolRequest.SetState). Nil means a random key per Server; give every
	// instance behind a load balancer the same key, so that a retry may
	// land on any of them.
	StateKey []byte
	// StateKeys, when set, is the ring of keys that seal requestState
	// instead of StateKey: one signs, the previous ones still verify, so
	// keys rotate without failing retries in flight (see KeyRing).
	StateKeys KeyRing
	// Bus shares list changes and resource updates with the other
	// instances of a fleet, so that every listen stream hears of a change
	// raised on any instance (see Bus). With a Bus, New starts two
	// goroutines, which Shutdown stops. Nil: this process only.
	Bus Bus
	// MethodScopes maps a method ("tools/call", "resources/read", ...) to
	// the OAuth scopes its requests need, on an HTTP endpoint that is
	// protected (streamable.Options.Protect); a tool's own (mcp.Tool.Scopes)
	// add to those of tools/call. Over stdio nothing is checked. Copied by
	// New.
	MethodScopes map[string][]string
	// Tasks configures tools that run as tasks (mcp.Tool.Execution): the
	// store, the TTL, the poll interval, and how many may run at once.
	// Nil means TaskOptions' defaults.
	Tasks *TaskOptions
	// MaxResourceSubscriptions bounds the URIs one legacy connection (a
	// stdio connection, a Streamable HTTP session) may be subscribed to at
	// once with resources/subscribe: one more is refused with -32000 and
	// data.reason "too_many_subscriptions" (LegacyStats.
	// SubscriptionsRefused). Default 1024.
	MaxResourceSubscriptions int
	// Middleware wraps the dispatch of every request, the first
	// outermost: it sees the era, the version, the tool, prompt or
	// resource named and the caller's identity (see Call). Nil: requests
	// are dispatched directly, at no cost.
	Middleware []Middleware
}

// DefaultMaxResourceSubscriptions is Options.MaxResourceSubscriptions'
// default.
const DefaultMaxResourceSubscriptions = 1024

// ToolHandler serves one tool. A returned *jsonrpc.Error becomes a protocol
// error; any other error becomes a result with IsError set, which the model
// can read (tool execution errors belong in the result).
type ToolHandler func(ctx context.Context, req *ToolRequest) (*mcp.ToolResult, error)

type registeredTool struct {
	tool    mcp.Tool
	handler ToolHandler
	headers map[string]string // argument -> Mcp-Param- header name (x-mcp-header)
}

// Server is an MCP server: its tools and how it speaks both eras. One
// Server serves any number of connections; each connection gets its own
// handler from Handler (legacy state lives per connection).
type Server struct {
	info mcp.Implementation
	opts Options

	mu      sync.Mutex
	tools   registry[*registeredTool]
	changed chan struct{} // closed and replaced whenever the tool set changes

	// exchange is the handler of every Streamable HTTP request (see
	// ExchangeHandler).
	exchange session

	// modernSuffix is what every 2026-07-28 result ends with: resultType
	// and the server's identity in _meta, encoded once.
	modernSuffix []byte

	resources  registry[*registeredResource]
	templates  []*registeredTemplate
	prompts    registry[*registeredPrompt]
	completion CompletionHandler
	randomKey  []byte                   // StateKey's default
	changes    map[string]chan struct{} // prompts, resources: closed at a change
	updates    map[chan string]struct{} // listen streams' resource updates
	tasks      *taskRuntime
	fan        *fanout // nil without Options.Bus

	// The long-lived legacy connections (stdio, Streamable HTTP
	// sessions) told of list changes and resource updates; see legacy.go.
	legacy legacyTable

	// chain is Options.Middleware composed once; nil without any.
	chain CallHandler
}

// New returns a server that introduces itself as info.
func New(info mcp.Implementation, opts *Options) *Server {
	s := &Server{info: info, changed: make(chan struct{})}
	if opts != nil {
		s.opts = *opts
	}
	if s.opts.Logger == nil {
		s.opts.Logger = slog.Default()
	}
	if s.opts.MethodScopes != nil {
		s.opts.MethodScopes = maps.Clone(s.opts.MethodScopes)
	}
	meta, _ := json.Marshal(map[string]any{mcp.MetaServerInfo: s.info})
	s.modernSuffix = append([]byte(`"resultType":"complete","_meta":`), meta...)
	s.exchange = session{srv: s, stateless: true}
	s.chain = chainMiddleware(s.opts.Middleware)
	s.legacy.init(s)
	s.tasks = newTaskRuntime(s, s.opts.Tasks)
	if s.opts.Bus != nil {
		s.startFanout(s.opts.Bus)
	}
	return s
}

// AddTool registers (or replaces) a tool. A nil InputSchema means
// {"type":"object"}. Connections subscribed to tool-list changes are told.
func (s *Server) AddTool(t mcp.Tool, h ToolHandler) {
	if len(t.InputSchema) == 0 {
		t.InputSchema = json.RawMessage(`{"type":"object"}`)
	}
	t.Scopes = slices.Clone(t.Scopes)
	s.mu.Lock()
	headers, _ := mcp.SchemaHeaders(t.InputSchema) // invalid annotations: no header checks
	s.tools.put(t.Name, &registeredTool{tool: t, handler: h, headers: headers})
	s.notifyChangedLocked()
	s.mu.Unlock()
}

// RemoveTool unregisters a tool.
func (s *Server) RemoveTool(name string) {
	s.mu.Lock()
	if s.tools.remove(name) {
		s.notifyChangedLocked()
	}
	s.mu.Unlock()
}

func (s *Server) notifyChangedLocked() { s.notifyLocked(kindTools) }

func (s *Server) toolsChanged() <-chan struct{} { return s.changedCh(kindTools) }

// The lists whose changes are announced.
const (
	kindTools     = "tools"
	kindPrompts   = "prompts"
	kindResources = "resources"
)

// changedCh returns a channel closed at the next change of a list.
func (s *Server) changedCh(kind string) <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if kind == kindTools {
		return s.changed
	}
	if s.changes == nil {
		s.changes = map[string]chan struct{}{}
	}
	ch, ok := s.changes[kind]
	if !ok {
		ch = make(chan struct{})
		s.changes[kind] = ch
	}
	return ch
}

// notifyLocked tells this server's streams that a list changed, and the
// other instances of its fleet (Options.Bus).
func (s *Server) notifyLocked(kind string) {
	s.wakeLocked(kind)
	s.fan.share(kind, "")
}

// wakeLocked tells this server's streams, and its initialized legacy
// connections, that a list changed.
func (s *Server) wakeLocked(kind string) {
	s.legacy.listChanged(kind)
	if kind == kindTools {
		close(s.changed)
		s.changed = make(chan struct{})
		return
	}
	if ch, ok := s.changes[kind]; ok {
		close(ch)
		delete(s.changes, kind)
	}
}

// AddTool registers a tool whose arguments are decoded into In. When the
// tool has no InputSchema, one is inferred from In (see SchemaFor).
//
// The arguments are checked against the InputSchema the tool publishes
// before h runs: required members, types, properties and items at any
// depth, additionalProperties, enum and const; other keywords are not
// checked.
// Arguments that do not conform, or do not decode into In, are answered
// with an error result (isError) that says what was wrong, one sentence
// per problem, so that the model can correct its call; h is not called.
//
// In is decoded exactly as encoding/json.Unmarshal decodes it. When In is
// a struct of strings, numbers, booleans, and pointers, slices and structs
// of those (no map, interface, embedded struct, ",string" tag or method
// UnmarshalJSON/UnmarshalText), the arguments are decoded without
// encoding/json, and anything that decoder cannot settle exactly as
// encoding/json would (a wrong type, an overflow, a key given twice under
// case folding) is decoded again by encoding/json, whose result and error
// messages count.
func AddTool[In any](s *Server, t mcp.Tool, h func(ctx context.Context, req *ToolRequest, in In) (*mcp.ToolResult, error)) {
	if len(t.InputSchema) == 0 {
		var zero In
		t.InputSchema = mcp.SchemaFor(zero)
	}
	schema := compileArgSchema(t.InputSchema)
	codec := newArgCodec(reflect.TypeFor[In]())
	s.AddTool(t, func(ctx context.Context, req *ToolRequest) (*mcp.ToolResult, error) {
		// The arguments are a value of the request the rpc layer has
		// decoded: valid JSON, no key repeated.
		args := bytes.TrimSpace(req.Arguments)
		if len(args) == 0 {
			args = json.RawMessage("{}")
		}
		if schema != nil {
			if problems := schema.check(args); len(problems) > 0 {
				return mcp.ErrorResult(fmt.Sprintf("invalid arguments for %s: %s.", t.Name, strings.Join(problems, "; "))), nil
			}
		}
		var in In
		if codec == nil || !codec.decode(reflect.ValueOf(&in).Elem(), args) {
			in = *new(In) // what the fast path left is thrown away
			if err := json.Unmarshal(args, &in); err != nil {
				return mcp.ErrorResult(fmt.Sprintf("invalid arguments for %s: %v", t.Name, err)), nil
			}
		}
		return h(ctx, req, in)
	})
}

// ConnOptions returns the connection options an MCP server needs on top of
// base: initialize is a barrier (guarantees C2, E1), batches are rejected (MCP >=
// 2025-06-18), and notifications/cancelled silences the request.
func (s *Server) ConnOptions(base *rpc.Options) *rpc.Options {
	var o rpc.Options
	if base != nil {
		o = *base
	}
	o.IsBarrier = func(m string) bool { return m == mcp.MethodInitialize }
	o.RejectBatches = true
	o.Cancel = []rpc.CancelMethod{rpc.MCPCancel}
	return &o
}

// The methods of streamable.Backend, by which mcp/streamable serves a
// Server over HTTP.

// ExchangeHandler serves one Streamable HTTP request, whose params, era
// and version the route has put in r; they reach the handler again as the
// request's note. Every request gets the same handler, the Server's
// stateless session: legacy requests are served as if initialize had
// happened at their header's version, with no list-change watcher (there
// is no stream to send on), and nothing a request says (initialize's
// capabilities, logging/setLevel) is kept for another. So a request costs
// no allocation for its handler.
func (s *Server) ExchangeHandler(r *mcp.Routed) rpc.Handler { return &s.exchange }

// ExchangeOptions is ConnOptions: an exchange's connection is an MCP
// connection like any other.
func (s *Server) ExchangeOptions(base *rpc.Options) *rpc.Options { return s.ConnOptions(base) }

// Eras is Options.Eras: which eras the server serves.
func (s *Server) Eras() mcp.Eras { return s.opts.Eras }

// HeaderParams maps a tool's arguments to the Mcp-Param- headers its input
// schema declares (x-mcp-header); nil for a tool that declares none or
// that the server does not have.
func (s *Server) HeaderParams(tool string) map[string]string {
	if t := s.tool(tool); t != nil {
		return t.headers
	}
	return nil
}

// RequiredScopes returns the OAuth scopes a request needs (the
// streamable.ScopedBackend the HTTP endpoint asks when it is protected):
// Options.MethodScopes[method], and for tools/call the tool's own
// (mcp.Tool.Scopes). The result is not to be modified.
func (s *Server) RequiredScopes(method, name string) []string {
	m := s.opts.MethodScopes[method]
	if method != mcp.MethodToolsCall {
		return m
	}
	t := s.tool(name)
	if t == nil || len(t.tool.Scopes) == 0 {
		return m
	}
	if len(m) == 0 {
		return t.tool.Scopes
	}
	return append(slices.Clip(m), t.tool.Scopes...)
}

// Handler returns a handler for one connection.
func (s *Server) Handler() rpc.Handler { return &session{srv: s} }

// SessionHandler returns the handler of one legacy Streamable HTTP
// session's connection (streamable.SessionBackend): a long-lived
// connection fed by the session's POSTs, served as a stdio connection is.
// Its initialize keeps the negotiated version and the client's
// capabilities, notifications/initialized advances it, logging/setLevel
// and resources/subscribe last as long as the session, the session is
// told of tool, prompt and resource list changes, and 2025-11-25 task
// status notifications and input requests go to it. Each request is
// served at the version its route's note names (mcp.Routed: the
// request's MCP-Protocol-Version header), as ExchangeHandler serves it;
// a note without a version, or no note, means the version initialize
// negotiated. An idle session costs no goroutine.
//
// The session's restorable state is what these messages built, in order:
// initialize, notifications/initialized, the last logging/setLevel, and
// each resources/subscribe not since undone by resources/unsubscribe.
// Replayed into a new session connection (their answers dropped), they
// restore it; nothing else a session does changes that state.
func (s *Server) SessionHandler() rpc.Handler { return &session{srv: s} }

// ServeStdio serves one connection on the process's stdin and stdout (with
// the stdout guard unless cfg says otherwise).
func (s *Server) ServeStdio(cfg *stdio.Config, base *rpc.Options) (*rpc.Conn, error) {
	return stdio.Serve(s.Handler(), s.ConnOptions(base), cfg)
}

// capabilities declares what the server has: tools always; resources,
// prompts and completions once registered; logging and resource
// subscriptions only to legacy clients (2026-07-28 removed both methods).
func (s *Server) capabilities(modern bool) map[string]any {
	c := map[string]any{"tools": map[string]any{"listChanged": true}}
	if s.hasResources() {
		// Legacy: resources/subscribe; 2026-07-28: resourceSubscriptions
		// on subscriptions/listen.
		c["resources"] = map[string]any{"subscribe": true, "listChanged": true}
	}
	if s.hasPrompts() {
		c["prompts"] = map[string]any{"listChanged": true}
	}
	s.mu.Lock()
	if s.completion != nil {
		c["completions"] = map[string]any{}
	}
	s.mu.Unlock()
	if !modern {
		c["logging"] = map[string]any{}
	}
	if s.hasTaskTools() {
		if modern {
			c["extensions"] = map[string]any{mcp.ExtensionTasks: map[string]any{}}
		} else {
			c["tasks"] = map[string]any{"list": map[string]any{}, "cancel": map[string]any{},
				"requests": map[string]any{"tools": map[string]any{"call": map[string]any{}}}}
		}
	}
	return c
}

// legacyCapabilities are what initialize answers at version: tasks only
// at 2025-11-25, the revision that has them; tasks.list only when the
// requestor can be told apart from others (a connection of its own, or a
// verified identity): "receivers that cannot identify requestors SHOULD
// NOT declare the tasks.list capability". (tasks/list is served all the
// same: "if a task is retrievable via tasks/get for a requestor, it MUST
// be retrievable via tasks/list".)
func (s *Server) legacyCapabilities(version string, identifiable bool) map[string]any {
	c := s.capabilities(false)
	if t, ok := c["tasks"].(map[string]any); ok {
		switch {
		case version != mcp.LatestLegacyVersion:
			delete(c, "tasks")
		case !identifiable:
			delete(t, "list")
		}
	}
	return c
}

func (s *Server) listTools() []mcp.Tool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return list(&s.tools, func(t *registeredTool) mcp.Tool { return t.tool })
}

// listToolsFor lists the tools as a client of version sees them:
// execution.taskSupport is a 2025-11-25 field (the 2026-07-28 tasks
// extension has the server decide, and no field for it; older versions
// have no tasks).
func (s *Server) listToolsFor(version string) []mcp.Tool {
	tools := s.listTools()
	if version == mcp.LatestLegacyVersion {
		return tools
	}
	for i := range tools {
		tools[i].Execution = nil
	}
	return tools
}

func (s *Server) tool(name string) *registeredTool {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, _ := s.tools.get(name)
	return t
}

// toolBytes is tool for a name still in the request's bytes (the map
// lookup does not copy them).
func (s *Server) toolBytes(name []byte) *registeredTool {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, _ := s.tools.get(string(name))
	return t
}

// session is the per-connection handler. Modern requests are served
// statelessly; legacy state (initialized, the negotiated version) is scoped
// to the connection. Answering server/discover pins nothing: a client may
// probe and then fall back to initialize on the same pipe (guarantee E1).
type session struct {
	srv *Server
	// stateless: the Server's handler of Streamable HTTP requests, shared
	// by all of them. Each request arrives routed (mcp.Routed: its era and
	// version decided), and nothing it says is kept in the session.
	stateless bool

	mu            sync.Mutex
	initialized   bool
	legacyVersion string
	logLevel      string          // legacy logging/setLevel; "info" until set
	clientCaps    json.RawMessage // legacy: what initialize declared
	clientInfo    json.RawMessage // legacy: initialize's clientInfo
	scope         string          // where its anonymous tasks are listed (listScope)
}

func (ss *session) Handle(ctx context.Context, req *rpc.Request) (any, error) {
	if req.IsNotification() {
		ss.notification(req)
		return nil, nil
	}
	if n := mcp.RoutedOf(req.Note()); n != nil {
		// Over HTTP the route has parsed the params and decided the era.
		if ss.srv.chain != nil {
			return ss.serveCall(ctx, req, &n.Params, n.Era, n.Version)
		}
		if n.Era == mcp.Modern {
			return ss.modern(ctx, req, &n.Params)
		}
		return ss.legacy(ctx, req, &n.Params, n.Version)
	}
	return ss.handleOnStream(ctx, req)
}

// handleOnStream serves a request whose params no transport has parsed
// (one read from a byte stream such as stdio or a socket). It is
// out of Handle's line so that Handle's frame, under every listen stream
// over HTTP, holds no RequestParams.
//
//go:noinline
func (ss *session) handleOnStream(ctx context.Context, req *rpc.Request) (any, error) {
	// On a stream this is the one place a request's era is decided: its
	// _meta says modern, anything else is legacy (guarantee E1).
	var p mcp.RequestParams
	mcp.ParseRequestParams(req.Params, &p)
	modern := p.Meta != nil && p.Meta.ProtocolVersion != nil && ss.srv.opts.Eras != mcp.LegacyOnly
	if ss.srv.chain != nil {
		era := mcp.Legacy
		if modern {
			era = mcp.Modern
		}
		return ss.serveCall(ctx, req, &p, era, "")
	}
	if modern {
		return ss.modern(ctx, req, &p)
	}
	return ss.legacy(ctx, req, &p, "")
}

func (ss *session) notification(req *rpc.Request) {
	if req.Method == mcp.MethodInitialized && !ss.stateless {
		ss.mu.Lock()
		ss.initialized = ss.initialized || ss.legacyVersion != ""
		ss.mu.Unlock()
	}
	// Anything else a client may send (notifications/cancelled is handled
	// by the connection) needs no answer.
}

// ----- modern (2026-07-28) -----

// modern serves a 2026-07-28 request. It only dispatches: a listen stream
// keeps this frame on its stack for as long as it is open, so the work of
// each method is in a function of its own (see listen).
func (ss *session) modern(ctx context.Context, req *rpc.Request, p *mcp.RequestParams) (any, error) {
	version, err := mcp.CheckModernMeta(p.Meta)
	if err != nil {
		return nil, err
	}
	switch req.Method {
	case mcp.MethodDiscover:
		return ss.discover(), nil
	case mcp.MethodToolsList:
		return ss.modernTools(p, version)
	case mcp.MethodToolsCall:
		return ss.callTool(ctx, req, p, version)
	case mcp.MethodListen:
		return ss.listen(ctx, req, p.Meta)
	case mcp.MethodTasksGet, mcp.MethodTasksUpdate, mcp.MethodTasksCancel:
		return ss.modernTasks(ctx, req, p.Meta)
	}
	return ss.modernOther(ctx, req, p, version)
}

//go:noinline
func (ss *session) discover() map[string]any {
	s := ss.srv
	r := map[string]any{
		"supportedVersions": mcp.SupportedVersions(s.opts.Eras),
		"capabilities":      s.capabilities(true),
		"ttlMs":             s.opts.CacheTTL.Milliseconds(),
		"cacheScope":        mcp.CacheScopePublic,
	}
	if s.opts.Instructions != "" {
		r["instructions"] = s.opts.Instructions
	}
	return ss.modernResult(r)
}

//go:noinline
func (ss *session) modernTools(p *mcp.RequestParams, version string) (any, error) {
	s := ss.srv
	r, err := paged("tools", s.listToolsFor(version), p.Cursor, s.opts.PageSize)
	if err != nil {
		return nil, err
	}
	r["ttlMs"], r["cacheScope"] = s.opts.CacheTTL.Milliseconds(), mcp.CacheScopePublic
	return ss.modernResult(r), nil
}

// modernOther serves the features (resources, prompts, completions,
// logging) and says why a method is not found.
//
//go:noinline
func (ss *session) modernOther(ctx context.Context, req *rpc.Request, p *mcp.RequestParams, version string) (any, error) {
	s := ss.srv
	if res, err, ok := ss.feature(ctx, req, p, version); ok {
		if err != nil {
			return nil, err
		}
		r := ss.modernResult(res)
		if slices.Contains(mcp.CacheableMethods, req.Method) {
			r["ttlMs"] = s.opts.CacheTTL.Milliseconds()
			r["cacheScope"] = mcp.CacheScopePublic
		}
		return r, nil
	}
	// Say why: a feature this server lacks is not a method the version
	// lacks (resources/list is part of 2026-07-28 all the same).
	why := ""
	switch req.Method {
	case "resources/list", "resources/templates/list", "resources/read":
		why = " (this server offers no resources)"
	case "prompts/list", "prompts/get":
		why = " (this server offers no prompts)"
	case "completion/complete":
		why = " (this server offers no completions)"
	}
	if slices.Contains(mcp.RemovedInModern, req.Method) {
		why = " (not available in protocol version " + version + ")"
	}
	return nil, jsonrpc.Errorf(jsonrpc.CodeMethodNotFound, "method not found: %s%s", req.Method, why)
}

// modernResult adds what every 2026-07-28 result carries: resultType and
// the server's identity in _meta.
func (ss *session) modernResult(v any) map[string]any {
	var r map[string]any
	switch x := v.(type) {
	case map[string]any:
		r = x
	default:
		b, _ := json.Marshal(x)
		json.Unmarshal(b, &r)
	}
	if _, ok := r["resultType"]; !ok {
		r["resultType"] = mcp.ResultTypeComplete
	}
	r["_meta"] = map[string]any{mcp.MetaServerInfo: ss.srv.info}
	return r
}

type listenParams struct {
	Notifications struct {
		ToolsListChanged      bool     `json:"toolsListChanged"`
		PromptsListChanged    bool     `json:"promptsListChanged"`
		ResourcesListChanged  bool     `json:"resourcesListChanged"`
		ResourceSubscriptions []string `json:"resourceSubscriptions"`
	} `json:"notifications"`
}

// listen serves subscriptions/listen (guarantee E6): the acknowledgment first,
// then every notification it asked for (of those this server has) with the
// subscription id, until the client cancels (no response), or input ends
// (the graceful final result).
//
// Its frame stays at the bottom of a stack that lives as long as the
// stream (over HTTP, the request's goroutine): what it needs is set up by
// openListen, which returns before the wait, and kept in one small
// listenState, so that an idle stream's stack stays in its first size.
func (ss *session) listen(ctx context.Context, req *rpc.Request, m *mcp.RequestMeta) (any, error) {
	st, err := ss.openListen(ctx, req, m)
	if err != nil {
		return nil, err
	}
	defer st.close(ss.srv)
	for {
		// Each case's work is a call, so that this frame holds little
		// more than the select itself.
		select {
		case <-st.changed:
			err = st.toolsChanged(ss.srv, req)
		case <-st.prompts:
			err = st.listChanged(ss.srv, req, kindPrompts)
		case <-st.resources:
			err = st.listChanged(ss.srv, req, kindResources)
		case uri := <-st.updates:
			err = st.updated(req, uri)
		case <-st.taskChanges:
			err = tellTasks(req, st.watch, st.subMeta())
		case <-req.Conn().InputDone():
			return st.final(), nil
		case <-ctx.Done():
			return st.ended(ctx)
		}
		if err != nil {
			return nil, err
		}
	}
}

// listenState is what an open listen stream keeps (a server may hold
// thousands): the channels it waits on and the _meta every notification
// carries, encoded once.
type listenState struct {
	changed, prompts, resources <-chan struct{}
	updates                     chan string
	taskChanges                 <-chan struct{}
	watch                       *taskWatch
	subscriptions               []string
	onlyMeta                    json.RawMessage // {"_meta":{subscriptionId}}
}

func (st *listenState) subMeta() json.RawMessage {
	return st.onlyMeta[len(`{"_meta":`) : len(st.onlyMeta)-1]
}

func (st *listenState) final() any {
	return map[string]any{"resultType": mcp.ResultTypeComplete, "_meta": st.subMeta()}
}

// toolsChanged tells the stream the tools changed. Changes that land
// before the notification is sent are covered by it: the client lists the
// tools again anyway.
//
//go:noinline
func (st *listenState) toolsChanged(s *Server, req *rpc.Request) error {
	st.changed = s.toolsChanged()
	return req.Notify(mcp.MethodToolsListChanged, st.onlyMeta)
}

//go:noinline
func (st *listenState) listChanged(s *Server, req *rpc.Request, k string) error {
	method := "notifications/prompts/list_changed"
	if k == kindResources {
		method = "notifications/resources/list_changed"
		st.resources = s.changedCh(kindResources)
	} else {
		st.prompts = s.changedCh(kindPrompts)
	}
	return req.Notify(method, st.onlyMeta)
}

// ended is the answer of a stream whose context ended: none when the
// client cancelled it (nothing more is written), else the final result.
//
//go:noinline
func (st *listenState) ended(ctx context.Context) (any, error) {
	if errors.Is(context.Cause(ctx), rpc.ErrCancelledByPeer) {
		return nil, ctx.Err()
	}
	return st.final(), nil
}

//go:noinline
func (st *listenState) updated(req *rpc.Request, uri string) error {
	if !slices.Contains(st.subscriptions, uri) {
		return nil
	}
	return req.Notify("notifications/resources/updated", map[string]any{"uri": uri, "_meta": st.subMeta()})
}

func (st *listenState) close(s *Server) {
	if st.updates != nil {
		s.unwatchUpdates(st.updates)
	}
	if st.watch != nil {
		s.tasks.unwatch(st.watch)
	}
}

// openListen reads a listen request, takes the channels it asked for
// (before the acknowledgment, so that a change right after it is not
// missed), detaches the request and sends the acknowledgment.
//
//go:noinline
func (ss *session) openListen(ctx context.Context, req *rpc.Request, m *mcp.RequestMeta) (*listenState, error) {
	var p listenParams
	if err := json.Unmarshal(req.Params, &p); err != nil {
		return nil, mcp.InvalidParams("invalid params: %v", err)
	}
	// Task ids (the tasks extension) are read and watched apart: an idle
	// stream that asks for none keeps nothing more.
	watch, taskIDs, err := ss.listenTasks(ctx, req, m)
	if err != nil {
		return nil, err
	}
	st := &listenState{watch: watch}
	// A stream lives until it is cancelled: it gives back its handler slot
	// and counts against the connection's stream budget, so that listen
	// streams cannot starve ordinary requests.
	if err := req.Detach(); err != nil {
		st.close(ss.srv)
		return nil, err
	}
	st.onlyMeta = json.RawMessage(`{"_meta":{"` + mcp.MetaSubscriptionID + `":` + string(req.ID) + `}}`)
	var honored honoredListen
	if p.Notifications.ToolsListChanged {
		honored.tools = true
		st.changed = ss.srv.toolsChanged()
	}
	if p.Notifications.PromptsListChanged && ss.srv.hasPrompts() {
		honored.prompts = true
		st.prompts = ss.srv.changedCh(kindPrompts)
	}
	if ss.srv.hasResources() {
		if p.Notifications.ResourcesListChanged {
			honored.resources = true
			st.resources = ss.srv.changedCh(kindResources)
		}
		if len(p.Notifications.ResourceSubscriptions) > 0 {
			honored.subscriptions = p.Notifications.ResourceSubscriptions
			st.subscriptions = p.Notifications.ResourceSubscriptions
			st.updates = ss.srv.watchUpdates()
		}
	}
	if watch != nil {
		st.taskChanges = watch.ready
		honored.tasks, honored.taskIDs = true, taskIDs
	}
	if err := req.Notify(mcp.MethodAcknowledged, honored.ack(st.subMeta())); err != nil {
		st.close(ss.srv)
		return nil, err
	}
	return st, nil
}

// honoredListen is what a listen stream's acknowledgment says it honours.
type honoredListen struct {
	tools, prompts, resources, tasks bool
	subscriptions, taskIDs           []string
}

// ack encodes the acknowledgment's params, {"_meta":…,"notifications":…},
// with its members in the order encoding/json gives a map's: every
// listen stream sends one, and a map of maps through encoding/json was
// most of what opening one allocated.
func (h *honoredListen) ack(subMeta json.RawMessage) json.RawMessage {
	b := make([]byte, 0, 64+len(subMeta))
	b = append(b, `{"_meta":`...)
	b = append(b, subMeta...)
	b = append(b, `,"notifications":{`...)
	first := true
	member := func(key string) {
		if !first {
			b = append(b, ',')
		}
		first = false
		b = append(append(append(b, '"'), key...), `":`...)
	}
	list := func(key string, v []string) {
		member(key)
		enc, _ := json.Marshal(v) // strings: cannot fail
		b = append(b, enc...)
	}
	if h.prompts {
		member("promptsListChanged")
		b = append(b, "true"...)
	}
	if len(h.subscriptions) > 0 {
		list("resourceSubscriptions", h.subscriptions)
	}
	if h.resources {
		member("resourcesListChanged")
		b = append(b, "true"...)
	}
	if h.tasks {
		list("taskIds", h.taskIDs)
	}
	if h.tools {
		member("toolsListChanged")
		b = append(b, "true"...)
	}
	return append(b, "}}"...)
}

// feature serves the methods both eras share beyond tools: resources,
// prompts and completion; ok is false for any other method, and for a
// feature the server has nothing of (then the method is unknown).
func (ss *session) feature(ctx context.Context, req *rpc.Request, p *mcp.RequestParams, version string) (any, error, bool) {
	s := ss.srv
	switch req.Method {
	case "resources/list":
		if s.hasResources() {
			r, err := paged("resources", s.listResources(), p.Cursor, s.opts.PageSize)
			return r, err, true
		}
	case "resources/templates/list":
		if s.hasResources() {
			r, err := paged("resourceTemplates", s.listTemplates(), p.Cursor, s.opts.PageSize)
			return r, err, true
		}
	case "resources/read":
		if s.hasResources() {
			res, err := ss.readResource(ctx, p, version)
			return res, err, true
		}
	case "prompts/list":
		if s.hasPrompts() {
			r, err := paged("prompts", s.listPrompts(), p.Cursor, s.opts.PageSize)
			return r, err, true
		}
	case "prompts/get":
		if s.hasPrompts() {
			res, err := ss.getPrompt(ctx, req, p, version)
			return res, err, true
		}
	case "completion/complete":
		s.mu.Lock()
		has := s.completion != nil
		s.mu.Unlock()
		if has {
			res, err := ss.complete(ctx, req.Params)
			return res, err, true
		}
	}
	return nil, nil, false
}

// featureMethods are the methods feature serves.
var featureMethods = []string{"resources/list", "resources/templates/list", "resources/read", "prompts/list", "prompts/get", "completion/complete"}

// paged returns one page of a list result under key, with nextCursor when
// more follow. The cursor is opaque to clients: an offset, base64url.
func paged[T any](key string, items []T, cursorRaw []byte, size int) (map[string]any, error) {
	start := 0
	if len(cursorRaw) > 0 && string(cursorRaw) != "null" {
		c, ok := jsonrpc.StringValue(cursorRaw)
		b, err := base64.RawURLEncoding.DecodeString(c)
		n, aerr := strconv.Atoi(string(b))
		if !ok || err != nil || aerr != nil || n < 0 || n > len(items) {
			return nil, mcp.InvalidParams("invalid params: invalid cursor")
		}
		start = n
	}
	end := len(items)
	if size > 0 && start+size < end {
		end = start + size
	}
	r := map[string]any{key: items[start:end]}
	if end < len(items) {
		r["nextCursor"] = base64.RawURLEncoding.EncodeToString([]byte(strconv.Itoa(end)))
	}
	return r, nil
}

// ----- tools -----

type callParams struct {
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
}

// callTool runs a tool and encodes its result: complete, or (2026-07-28)
// input_required when the tool asked the client for input.
func (ss *session) callTool(ctx context.Context, req *rpc.Request, p *mcp.RequestParams, version string) (any, error) {
	m := p.Meta
	// The name is looked up in the request's bytes: without escapes,
	// nothing is copied.
	name, ok := jsonrpc.StringBytes(p.Name)
	if !ok || len(name) == 0 {
		return nil, mcp.InvalidParams("invalid params: tools/call needs a tool name")
	}
	t := ss.srv.toolBytes(name)
	if t == nil {
		return nil, mcp.InvalidParams("unknown tool: %s", name)
	}
	args := p.Arguments
	if string(args) == "null" {
		args = nil
	}
	tr := &ToolRequest{Name: t.tool.Name, Arguments: args, ProtocolVersion: version, rpc: req}
	modern := mcp.IsModern(version)
	target := func() string { return stateTarget(mcp.MethodToolsCall, t.tool.Name, args) }
	if modern {
		if err := ss.srv.parseInputs(p, target, &tr.inputs); err != nil {
			return nil, err
		}
	}
	tr.inputs.rpc = req
	var suffix []byte
	if modern {
		suffix = ss.srv.modernSuffix
	}
	if !modern && !ss.stateless { // a stateless session keeps neither
		ss.mu.Lock()
		tr.logLevel, tr.ClientCapabilities = ss.logLevel, ss.clientCaps
		ss.mu.Unlock()
	}
	if m != nil && len(m.ProgressToken) > 0 && string(m.ProgressToken) != "null" {
		tr.progressToken = m.ProgressToken
	}
	if m != nil && mcp.IsModern(version) {
		tr.ClientCapabilities = m.ClientCapabilities
		tr.logLevel = m.LogLevel
	}
	if t.tool.Execution.Supports() || (version == mcp.LatestLegacyVersion && bytes.Contains(req.Params, taskMember)) {
		// (A 2025-11-25 call of a tool that never runs as a task, with
		// params.task, is refused there: looked for only when the bytes
		// hold the name.)
		ts, err := ss.taskDesign(t, req, m, modern)
		if err != nil {
			return nil, err
		}
		if ts != nil {
			return ss.runTask(ctx, t, tr, ts, func(res *mcp.ToolResult, err error) (any, error) {
				return ss.toolOutcome(ctx, tr, res, err, suffix, target)
			})
		}
	}
	res, err := t.handler(ctx, tr)
	return ss.toolOutcome(ctx, tr, res, err, suffix, target)
}

var taskMember = []byte(`"task"`)

// toolOutcome encodes what a tool handler returned, as the answer to its
// request.
func (ss *session) toolOutcome(ctx context.Context, tr *ToolRequest, res *mcp.ToolResult, err error, suffix []byte, target func() string) (any, error) {
	modern := suffix != nil
	switch {
	case err == nil && res == nil:
		return (&mcp.ToolResult{Content: []mcp.Content{}}).AppendJSON(make([]byte, 0, 64), suffix), nil
	case err == nil:
		if res.Content == nil {
			res.Content = []mcp.Content{}
		}
		if res.IsError {
			if c := callFrom(ctx); c != nil {
				c.ToolError = true
			}
		}
		// Returned by pointer, from the request: no allocation to box it.
		tr.encoded = jsonrpc.Encoded(res.AppendJSON(make([]byte, 0, 256), suffix))
		return &tr.encoded, nil
	}
	if ire, ok := asInputRequired(err); ok && modern {
		r, err := ss.srv.inputRequiredResult(ire, &tr.inputs, target())
		if err != nil {
			return nil, err
		}
		return ss.modernResult(r), nil
	}
	var je *jsonrpc.Error
	if errors.As(err, &je) || ctx.Err() != nil || errors.Is(err, rpc.ErrNoResponse) {
		return nil, err
	}
	if c := callFrom(ctx); c != nil {
		c.ToolError = true
	}
	return mcp.ErrorResult(err.Error()).AppendJSON(nil, suffix), nil
}

// ToolRequest is one tools/call as a tool handler sees it.
type ToolRequest struct {
	Name            string
	Arguments       json.RawMessage
	ProtocolVersion string // the request's version (the negotiated one for legacy)

	// ClientCapabilities are the capabilities the request declared
	// (modern era; raw JSON, nil for legacy requests).
	ClientCapabilities json.RawMessage

	// Ask, Elicit, State and SetState get input from the client: see
	// inputs.Ask.
	inputs

	rpc           *rpc.Request
	progressToken json.RawMessage
	logLevel      string
	mu            sync.Mutex
	last          float64
	sent          bool
	encoded       jsonrpc.Encoded // the result, encoded (by AppendJSON: valid, no newline), once the tool returns
	start         *taskStart      // set when the call may become a task (StartTask)
	srv           *Server
}

// WantsProgress reports whether the client asked for progress.
func (r *ToolRequest) WantsProgress() bool { return r.progressToken != nil }

// ErrProgressNotIncreasing rejects a progress value that does not exceed
// the previous one ("progress MUST increase each time").
var ErrProgressNotIncreasing = errors.New("mcp: progress must increase with every notification")

// Progress sends notifications/progress when the client asked for it (and
// does nothing otherwise). The notification reaches the client before the
// result; total <= 0 and message "" are left out.
func (r *ToolRequest) Progress(progress, total float64, message string) error {
	if r.progressToken == nil {
		return nil
	}
	// In a task the request has been answered. A 2025-11-25 token stays
	// valid for the task's life: its progress goes to the connection that
	// made it, tied to the task; the extension has none.
	var conn *rpc.Conn
	if r.inTask() {
		if conn = r.start.statusTo; conn == nil {
			return nil
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.sent && progress <= r.last {
		return ErrProgressNotIncreasing
	}
	p := map[string]any{"progressToken": r.progressToken, "progress": progress}
	if total > 0 {
		p["total"] = total
	}
	if message != "" {
		p["message"] = message
	}
	var err error
	if conn != nil {
		p["_meta"] = relatedTask(r.start.run.id)
		ctx, cancel := context.WithTimeout(context.Background(), statusNotifyTimeout)
		err = conn.Notify(ctx, mcp.MethodProgress, p)
		cancel()
	} else {
		err = r.rpc.Notify(mcp.MethodProgress, p)
	}
	if err != nil {
		return err
	}
	r.sent, r.last = true, progress
	return nil
}

// RequireClientCapability returns nil when the request declared the
// named client capability (sampling, elicitation, roots, ...), and
// otherwise the error to return: "If processing a request requires a
// capability the client did not include ... the server MUST return a
// MissingRequiredClientCapabilityError (-32021)" (2026-07-28 basic).
func (r *ToolRequest) RequireClientCapability(name string) error {
	if !mcp.IsModern(r.ProtocolVersion) {
		// Legacy: what initialize declared, when this connection saw it
		// (a stateless HTTP request did not: it is given the benefit).
		if r.ClientCapabilities == nil {
			return nil
		}
		var caps map[string]json.RawMessage
		if json.Unmarshal(r.ClientCapabilities, &caps) == nil {
			if v, ok := caps[name]; ok && string(v) != "null" {
				return nil
			}
		}
		return mcp.InvalidParams("invalid params: this request needs the client's %s capability, which it did not declare", name)
	}
	var caps map[string]json.RawMessage
	if json.Unmarshal(r.ClientCapabilities, &caps) == nil {
		if v, ok := caps[name]; ok && string(v) != "null" {
			return nil
		}
	}
	return jsonrpc.NewError(mcp.CodeMissingRequiredClientCapability,
		fmt.Sprintf("Server requires the %s capability for this request", name),
		map[string]any{"requiredCapabilities": map[string]any{name: map[string]any{}}})
}

// Log sends notifications/message about this call when the request asked
// for log messages at this level or a less severe one (its _meta logLevel);
// otherwise it does nothing: a server must never log unasked (2026-07-28:
// logging is per request). It reports whether the message was sent.
func (r *ToolRequest) Log(level, logger string, data any) (bool, error) {
	if r.inTask() {
		return false, nil // the request has been answered: nothing goes to it
	}
	threshold := r.logLevel
	if threshold == "" && !mcp.IsModern(r.ProtocolVersion) {
		threshold = "info" // a legacy client that has not called logging/setLevel
	}
	want := slices.Index(mcp.LogLevels, threshold)
	have := slices.Index(mcp.LogLevels, level)
	if want < 0 || have < 0 || have < want {
		return false, nil
	}
	p := map[string]any{"level": level, "data": data}
	if logger != "" {
		p["logger"] = logger
	}
	if err := r.rpc.Notify("notifications/message", p); err != nil {
		return false, err
	}
	return true, nil
}

// ----- legacy (initialize handshake) -----

// legacy serves a request of the initialize era; routed is the version
// the HTTP route decided ("" on a stream: the connection's handshake
// says).
func (ss *session) legacy(ctx context.Context, req *rpc.Request, p *mcp.RequestParams, routed string) (any, error) {
	s := ss.srv
	version := routed
	if version == "" {
		ss.mu.Lock()
		version = ss.legacyVersion
		ss.mu.Unlock()
	}
	ready := version != ""

	if s.opts.Eras == mcp.ModernOnly {
		if req.Method == mcp.MethodInitialize {
			var p mcp.InitializeParams
			json.Unmarshal(req.Params, &p)
			return nil, jsonrpc.NewError(mcp.CodeUnsupportedProtocolVersion, "Unsupported protocol version: this server speaks only "+mcp.LatestVersion,
				map[string]any{"supported": mcp.ModernVersions, "requested": p.ProtocolVersion})
		}
		return nil, mcp.InvalidParams("invalid params: _meta[%q] and _meta[%q] are required", mcp.MetaProtocolVersion, mcp.MetaClientCapabilities)
	}
	if !ready && s.opts.LegacySilent && req.Method != mcp.MethodInitialize {
		return nil, rpc.ErrNoResponse
	}
	switch req.Method {
	case mcp.MethodInitialize:
		return ss.initialize(ctx, req)
	case mcp.MethodPing:
		return map[string]any{}, nil
	case mcp.MethodDiscover:
		if s.opts.Eras == mcp.LegacyOnly {
			return nil, jsonrpc.Errorf(jsonrpc.CodeMethodNotFound, "method not found: %s", req.Method)
		}
		return nil, mcp.InvalidParams("invalid params: server/discover needs _meta[%q] and _meta[%q]", mcp.MetaProtocolVersion, mcp.MetaClientCapabilities)
	case mcp.MethodToolsList, mcp.MethodToolsCall:
		if !ready {
			return nil, jsonrpc.Errorf(mcp.CodeServerNotInitialized, "Invalid Request: %s before initialize", req.Method)
		}
		if req.Method == mcp.MethodToolsList {
			return paged("tools", s.listToolsFor(version), p.Cursor, s.opts.PageSize)
		}
		return ss.callTool(ctx, req, p, version)
	case "resources/subscribe", "resources/unsubscribe":
		if !ready {
			return nil, jsonrpc.Errorf(mcp.CodeServerNotInitialized, "Invalid Request: %s before initialize", req.Method)
		}
		return ss.subscribe(req.Conn(), p, req.Method == "resources/subscribe")
	case "logging/setLevel":
		return ss.setLevel(req.Params)
	case mcp.MethodTasksGet, mcp.MethodTasksResult, mcp.MethodTasksList, mcp.MethodTasksCancel:
		if !ready {
			return nil, jsonrpc.Errorf(mcp.CodeServerNotInitialized, "Invalid Request: %s before initialize", req.Method)
		}
		return ss.legacyTasks(ctx, req, p)
	}
	if !ready && slices.Contains(featureMethods, req.Method) {
		return nil, jsonrpc.Errorf(mcp.CodeServerNotInitialized, "Invalid Request: %s before initialize", req.Method)
	}
	if res, err, ok := ss.feature(ctx, req, p, version); ok {
		return res, err
	}
	return nil, jsonrpc.Errorf(jsonrpc.CodeMethodNotFound, "method not found: %s", req.Method)
}

func (ss *session) initialize(ctx context.Context, req *rpc.Request) (any, error) {
	p, err := mcp.ParseInitialize(req.Params)
	if err != nil {
		return nil, err
	}
	version := mcp.LegacyVersionFor(p.ProtocolVersion)
	if !ss.stateless {
		// Over stateless HTTP nothing outlasts the request: every later
		// request names its version in its header, and there is no
		// stream to tell of list changes on.
		ss.mu.Lock()
		ss.legacyVersion = version
		ss.clientCaps = p.Capabilities
		ss.clientInfo = p.ClientInfo
		ss.mu.Unlock()
		ss.srv.legacy.watch(req.Conn())
	}
	r := map[string]any{
		"protocolVersion": version,
		"capabilities":    ss.srv.legacyCapabilities(version, !ss.stateless || ownerOf(ctx) != ""),
		"serverInfo":      ss.srv.info,
	}
	if ss.srv.opts.Instructions != "" {
		r["instructions"] = ss.srv.opts.Instructions
	}
	return r, nil
}

// listenTasks reads a listen request's notifications.taskIds and starts
// watching those the caller may see: nil when it names none (or none it
// may see). Kept out of listen's frame.
//
//go:noinline
func (ss *session) listenTasks(ctx context.Context, req *rpc.Request, m *mcp.RequestMeta) (*taskWatch, []string, error) {
	if !bytes.Contains(req.Params, []byte(`"taskIds"`)) {
		return nil, nil, nil
	}
	var tp struct {
		Notifications struct {
			TaskIDs []string `json:"taskIds"`
		} `json:"notifications"`
	}
	if err := json.Unmarshal(req.Params, &tp); err != nil {
		return nil, nil, mcp.InvalidParams("invalid params: %v", err)
	}
	ids := tp.Notifications.TaskIDs
	if len(ids) == 0 {
		return nil, nil, nil
	}
	if m == nil || !mcp.DeclaresTasks(m.ClientCapabilities) {
		return nil, nil, mcp.MissingTasksExtension("notifications of tasks need the " + mcp.ExtensionTasks + " extension declared in the request's client capabilities")
	}
	return ss.watchTasks(ctx, ids)
}

// tellTasks sends a listen stream the changes its watch has gathered.
//
//go:noinline
func tellTasks(req *rpc.Request, w *taskWatch, subMeta json.RawMessage) error {
	for _, t := range w.take() {
		n := detailedTask(t)
		n["_meta"] = subMeta
		if err := req.Notify(mcp.MethodTasksNotification, n); err != nil {
			return err
		}
	}
	return nil
}

// watchTasks starts watching, for a listen stream, those of ids that are
// tasks of the 2026-07-28 design the caller may see; nil when none is.
func (ss *session) watchTasks(ctx context.Context, ids []string) (*taskWatch, []string, error) {
	rt := ss.srv.tasks
	owner := ownerOf(ctx)
	var unique []string
	seen := map[string]bool{}
	for _, id := range ids {
		if !seen[id] {
			seen[id] = true
			unique = append(unique, id)
		}
	}
	if len(unique) > rt.opts.MaxListenTasks {
		rt.listenRefused.Add(1)
		rt.log.Warn("mcp: a listen stream asked for too many tasks", "tasks", len(unique), "max_listen_tasks", rt.opts.MaxListenTasks)
		return nil, nil, mcp.InvalidParams("invalid params: a listen stream may follow at most %d tasks (asked for %d)", rt.opts.MaxListenTasks, len(unique))
	}
	// Watched first, then read: a change in between is not missed, and
	// the stream starts with each task's current state.
	w, err := rt.watch(unique, owner)
	if err != nil {
		return nil, nil, err
	}
	var ok []string
	for _, id := range unique {
		t, err := rt.store.Get(ctx, id)
		if err == nil && t.Owner == owner && t.Design == mcp.LatestVersion {
			ok = append(ok, id)
			w.push(t)
		}
	}
	if len(ok) == 0 {
		rt.unwatch(w)
		return nil, nil, nil
	}
	return w, ok, nil
}
