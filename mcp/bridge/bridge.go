package bridge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/agentwire/agentwire/mcp"
	"github.com/agentwire/agentwire/mcp/host"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentwire/agentwire/client"
	"github.com/agentwire/agentwire/internal/refusal"
	"github.com/agentwire/agentwire/internal/relay"
	"github.com/agentwire/agentwire/jsonrpc"
	"github.com/agentwire/agentwire/rpc"
)

// Bridge serves one stdio MCP server, reached through a Session, to any
// number of Streamable HTTP clients of either era (stdio when the app
// starts the server; Streamable HTTP when it is shared). All HTTP
// clients share the one server process; a session started with a restart
// policy replaces it when it crashes, and read-only requests in flight are
// retried on the new one.
//
// Requests are forwarded as they are when both sides speak the same era,
// and translated when they do not: a legacy HTTP client's initialize is
// answered by the bridge from what the server said, and its requests reach
// a modern server with per-request _meta added; a modern HTTP client's
// server/discover is answered by the bridge for a legacy server, and its
// requests reach it without the modern _meta keys, the results gaining
// resultType and serverInfo. Progress tokens and listen subscription ids
// are renamed on the way, so that clients that choose the same ones never
// see each other's notifications.
type Bridge struct {
	sess   *host.Session
	tokens atomic.Int64
	log    atomic.Pointer[slog.Logger] // the endpoint's logger, for what clients must not see

	mu          sync.Mutex
	toolHeaders map[string]map[string]string // nil until the server's tools are listed
	hubs        map[string]*listenHub        // open upstream listen streams by filter; see bridgelisten.go
	sessions    map[*bridgeSession]struct{}  // initialized legacy sessions; see sessions.go
	sessPeak    int                          // (shrunk)
	upSubs      map[string]*upstreamSub      // a legacy server's subscriptions, held for sessions
	upPeak      int                          // (shrunk)

	wireOnce sync.Once // hearing a legacy server's notifications for sessions

	slowClients, serverLost, sessionDrops, subsRefused atomic.Int64
	slowLog, lostLog, dropLog, subsLog                 refusal.Log
}

// Stats counts what a bridge gave up on.
type Stats struct {
	// SlowClients counts requests cancelled because their client fell
	// 256 notifications behind on its event stream.
	SlowClients int64
	// ServerLost counts requests that failed because the server behind
	// the bridge was lost under them.
	ServerLost int64
	// SharedStreams is the number of listen streams open on the server,
	// each shared by every client with the same filter (legacy sessions'
	// list changes and subscriptions included).
	SharedStreams int
	// Sessions is the number of initialized legacy sessions
	// (SessionHandler) the server's changes are relayed to.
	Sessions int
	// UpstreamSubscriptions is the number of URIs a legacy server is
	// subscribed to on behalf of sessions.
	UpstreamSubscriptions int
	// SessionDrops counts notifications not relayed to a session: it fell
	// 256 behind, or did not take one within 10 s.
	SessionDrops int64
	// SubscriptionsRefused counts resources/subscribe requests refused
	// because the session held 1024 subscriptions.
	SubscriptionsRefused int64
}

// Stats returns the bridge's counters.
func (b *Bridge) Stats() Stats {
	b.mu.Lock()
	n, sessions, up := len(b.hubs), len(b.sessions), 0
	for _, e := range b.upSubs {
		if len(e.sessions) > 0 {
			up++
		}
	}
	b.mu.Unlock()
	return Stats{SlowClients: b.slowClients.Load(), ServerLost: b.serverLost.Load(), SharedStreams: n,
		Sessions: sessions, UpstreamSubscriptions: up, SessionDrops: b.sessionDrops.Load(), SubscriptionsRefused: b.subsRefused.Load()}
}

// slowClient is the overflow of a client's relay: its request is cancelled.
func (b *Bridge) slowClient(cancel context.CancelCauseFunc) func() {
	return func() {
		b.slowClients.Add(1)
		b.slowLog.Refused("bridge: a client fell behind on its event stream; its request is cancelled", "limit", relayQueue)
		cancel(errSlowClient)
	}
}

// New returns a bridge to the server behind sess; serve it with
// streamable.NewHandler.
func New(sess *host.Session) *Bridge { return &Bridge{sess: sess} }

func (b *Bridge) logger() *slog.Logger {
	if l := b.log.Load(); l != nil {
		return l
	}
	return slog.Default()
}

// Eras is BothEras: the bridge serves clients of either era, whatever the
// server speaks.
func (b *Bridge) Eras() mcp.Eras { return mcp.BothEras }

// HeaderParams answers from the server's tool list, fetched once and
// refreshed by every tools/list a client sends through the bridge.
func (b *Bridge) HeaderParams(tool string) map[string]string {
	b.mu.Lock()
	known := b.toolHeaders != nil
	b.mu.Unlock()
	if !known {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		tools, err := b.sess.ListTools(ctx)
		cancel()
		if err == nil {
			b.learnTools(tools)
		}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.toolHeaders[tool]
}

func (b *Bridge) learnTools(tools []mcp.Tool) {
	m, _ := mcp.ToolHeaderMap(tools)
	b.mu.Lock()
	b.toolHeaders = m
	b.mu.Unlock()
}

// relayQueue bounds the notifications waiting to reach one slow client.
const relayQueue = 256

// errSlowClient cancels a forwarded request whose client does not read
// the notifications it asked for.
var errSlowClient = errors.New("mcp: the HTTP client does not read its event stream")

// newRelay passes the server's notifications for one request on to its
// client in order, without ever blocking the shared session's reader: a
// client that falls relayQueue notifications behind has its request
// cancelled (overflow) instead of stalling every other client. Finish
// waits until everything queued has been handed to the client's exchange,
// so that it precedes the response.
func newRelay(req *rpc.Request, overflow func()) *relay.Relay[relayMsg] {
	return relay.New(relayQueue, func(m relayMsg) { req.Notify(m.method, m.params) },
		func() bool { overflow(); return true })
}

type relayMsg struct {
	method string
	params any
}

// ExchangeOptions makes the endpoint's logger (base.Logger) the
// bridge's: what clients must not see is logged there.
func (b *Bridge) ExchangeOptions(base *rpc.Options) *rpc.Options {
	var o rpc.Options
	if base != nil {
		o = *base
	}
	if o.Logger != nil {
		b.log.Store(o.Logger)
		b.slowLog.Logger, b.lostLog.Logger = o.Logger, o.Logger
		b.dropLog.Logger, b.subsLog.Logger = o.Logger, o.Logger
	}
	o.RejectBatches = true
	o.Cancel = []rpc.CancelMethod{rpc.MCPCancel}
	return &o
}

// ExchangeHandler forwards one HTTP request to the server, translated
// from the era the route decided (n) to the server's.
func (b *Bridge) ExchangeHandler(n *mcp.Routed) rpc.Handler {
	modern, legacyVersion := n.Era == mcp.Modern, n.Version
	return rpc.HandlerFunc(func(ctx context.Context, req *rpc.Request) (any, error) {
		if req.IsNotification() {
			return nil, nil
		}
		if modern {
			return b.modern(ctx, req)
		}
		return b.legacy(ctx, req, legacyVersion)
	})
}

// readOnly methods are retried on a restarted server (guarantee K6).
var readOnly = []string{mcp.MethodDiscover, mcp.MethodToolsList, "prompts/list", "prompts/get", "resources/list",
	"resources/templates/list", "resources/read", "completion/complete", mcp.MethodPing}

// modern serves a 2026-07-28 request. It only dispatches: a listen
// stream keeps this frame on its stack for as long as it is open.
func (b *Bridge) modern(ctx context.Context, req *rpc.Request) (any, error) {
	params, meta, err := b.modernParams(req)
	if err != nil {
		return nil, err
	}
	if req.Method == mcp.MethodListen {
		if b.sess.Era() == mcp.Modern {
			return b.listen(ctx, req, params)
		}
		return b.listenWithoutServer(ctx, req)
	}
	return b.modernOther(ctx, req, params, meta)
}

// modernParams splits a modern request's params from its _meta and checks
// the _meta and the method.
//
//go:noinline
func (b *Bridge) modernParams(req *rpc.Request) (params, meta map[string]json.RawMessage, err error) {
	params, meta, err = splitParams(req.Params)
	if err != nil {
		return nil, nil, err
	}
	var m mcp.RequestMeta
	if meta != nil {
		raw, _ := json.Marshal(meta)
		json.Unmarshal(raw, &m)
	}
	mp := &m
	if meta == nil {
		mp = nil
	}
	if _, err := mcp.CheckModernMeta(mp); err != nil {
		return nil, nil, err
	}
	if slices.Contains(mcp.RemovedInModern, req.Method) {
		return nil, nil, jsonrpc.Errorf(jsonrpc.CodeMethodNotFound, "method not found: %s (not available in protocol version %s)", req.Method, mcp.LatestVersion)
	}
	return params, meta, nil
}

// listenWithoutServer serves listen in front of a legacy server, which
// has none: it acknowledges nothing honored, and holds the stream until
// the client or the bridge ends it.
func (b *Bridge) listenWithoutServer(ctx context.Context, req *rpc.Request) (any, error) {
	if err := req.Detach(); err != nil {
		return nil, err
	}
	sub := map[string]any{mcp.MetaSubscriptionID: req.ID}
	if err := req.Notify(mcp.MethodAcknowledged, map[string]any{"_meta": sub, "notifications": map[string]any{}}); err != nil {
		return nil, err
	}
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-req.Conn().InputDone():
		return map[string]any{"resultType": mcp.ResultTypeComplete, "_meta": sub}, nil
	}
}

// modernOther forwards a modern request other than listen: as it is to a
// modern server, translated to a legacy one.
//
//go:noinline
func (b *Bridge) modernOther(ctx context.Context, req *rpc.Request, params, meta map[string]json.RawMessage) (any, error) {
	if b.sess.Era() == mcp.Modern {
		return b.forward(ctx, req, params, meta)
	}
	// A legacy server behind a modern client.
	s := b.sess
	if req.Method == mcp.MethodDiscover {
		r := map[string]any{
			"supportedVersions": mcp.SupportedVersions(mcp.BothEras),
			"capabilities":      rawOr(s.Capabilities(), "{}"),
			"ttlMs":             0,
			"cacheScope":        mcp.CacheScopePublic,
			"resultType":        mcp.ResultTypeComplete,
			"_meta":             map[string]any{mcp.MetaServerInfo: s.ServerInfo()},
		}
		if s.Instructions() != "" {
			r["instructions"] = s.Instructions()
		}
		return r, nil
	}
	for k := range meta {
		if strings.HasPrefix(k, "io.modelcontextprotocol/") {
			delete(meta, k)
		}
	}
	res, err := b.forward(ctx, req, params, meta)
	if err != nil {
		return nil, err
	}
	return withModernResult(req.Method, res, s.ServerInfo())
}

func (b *Bridge) legacy(ctx context.Context, req *rpc.Request, version string) (any, error) {
	s := b.sess
	switch req.Method {
	case mcp.MethodInitialize:
		p, err := mcp.ParseInitialize(req.Params)
		if err != nil {
			return nil, err
		}
		v := mcp.LegacyVersionFor(p.ProtocolVersion)
		r := map[string]any{"protocolVersion": v, "capabilities": rawOr(s.Capabilities(), "{}"), "serverInfo": s.ServerInfo()}
		if s.Instructions() != "" {
			r["instructions"] = s.Instructions()
		}
		return r, nil
	case mcp.MethodPing:
		return map[string]any{}, nil
	case mcp.MethodListen, mcp.MethodDiscover:
		return nil, jsonrpc.Errorf(jsonrpc.CodeMethodNotFound, "method not found: %s (not available in protocol version %s)", req.Method, version)
	}
	params, meta, err := splitParams(req.Params)
	if err != nil {
		return nil, err
	}
	if s.Era() == mcp.Legacy {
		return b.forward(ctx, req, params, meta)
	}
	// A legacy client before a modern server: the bridge supplies the
	// per-request metadata the client cannot.
	if meta == nil {
		meta = map[string]json.RawMessage{}
	}
	for k, v := range s.ModernMeta() {
		raw, _ := json.Marshal(v)
		meta[k] = raw
	}
	res, err := b.forward(ctx, req, params, meta)
	if err != nil {
		return nil, err
	}
	return withoutModernResult(res)
}

// forward sends the request to the server with a private progress token,
// relaying progress to this request's client under its own token.
func (b *Bridge) forward(ctx context.Context, req *rpc.Request, params, meta map[string]json.RawMessage) (any, error) {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	if tok, ok := meta[mcp.MetaProgressToken]; ok && string(tok) != "null" {
		rl := newRelay(req, b.slowClient(cancel))
		defer rl.Finish()
		mine := json.RawMessage(strconv.Quote("bridge-" + strconv.FormatInt(b.tokens.Add(1), 10)))
		meta[mcp.MetaProgressToken] = mine
		stop := b.sess.WatchProgress(mine, func(progress, total float64, message string) {
			p := map[string]any{"progressToken": tok, "progress": progress}
			if total > 0 {
				p["total"] = total
			}
			if message != "" {
				p["message"] = message
			}
			rl.Send(relayMsg{mcp.MethodProgress, p})
		})
		defer stop()
	}
	out := joinParams(params, meta)
	var opts []client.CallOption
	retryable := slices.Contains(readOnly, req.Method)
	if retryable {
		opts = append(opts, client.Retryable())
	}
	res, err := b.sess.Send(ctx, req.Method, out, opts...)
	if err != nil && retryable && errors.Is(err, client.ErrConnectionLost) {
		err = errRetriedLost{err}
	}
	if err == nil && req.Method == mcp.MethodToolsList {
		var r struct {
			Tools []mcp.Tool `json:"tools"`
		}
		if json.Unmarshal(res, &r) == nil {
			b.learnTools(r.Tools)
		}
	}
	if err != nil && errors.Is(context.Cause(ctx), errSlowClient) {
		return nil, errSlowClient
	}
	return b.result(res, err)
}

// errRetriedLost marks the loss of the server under a request that was
// retried on its replacement (a read-only one) and failed again.
type errRetriedLost struct{ error }

func (e errRetriedLost) Unwrap() error { return e.error }

// result passes the server's answer on: its JSON-RPC errors as they are,
// anything else as a short error of the bridge's own. The server is shared
// by every client of the bridge, and what went wrong with it (its exit
// status, the tail of its stderr, which may hold whatever it logged at
// start-up, an API key included) is the operator's to read, in the bridge's
// log, never another user's client.
func (b *Bridge) result(res json.RawMessage, err error) (any, error) {
	if err == nil {
		return res, nil
	}
	var je *jsonrpc.Error
	if errors.As(err, &je) {
		return nil, je
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return nil, err
	}
	var retried errRetriedLost
	if errors.Is(err, client.ErrConnectionLost) {
		b.serverLost.Add(1)
	}
	switch {
	case errors.As(err, &retried):
		b.lostLog.Refused("bridge: the MCP server was lost under a request, and again under its retry", "error", err)
		return nil, jsonrpc.NewError(jsonrpc.CodeInternalError,
			"the MCP server behind the bridge was lost; the request was retried once on its replacement and failed again",
			map[string]any{"reason": "server_lost", "retried": true})
	case errors.Is(err, client.ErrConnectionLost):
		b.lostLog.Refused("bridge: the MCP server was lost under requests (logged once per burst)", "error", err)
		return nil, jsonrpc.NewError(jsonrpc.CodeInternalError,
			"the MCP server behind the bridge was lost; the request was not retried (it may have had effects), and the bridge restarts the server",
			map[string]any{"reason": "server_lost", "retried": false})
	}
	b.logger().Warn("bridge: a request could not be forwarded", "error", err)
	return nil, jsonrpc.NewError(jsonrpc.CodeInternalError, "the bridge could not forward the request to the MCP server",
		map[string]any{"reason": "bridge_error"})
}

// splitParams returns params without _meta, and _meta.
func splitParams(raw json.RawMessage) (params, meta map[string]json.RawMessage, err error) {
	params = map[string]json.RawMessage{}
	if len(raw) > 0 {
		if raw[0] != '{' {
			return nil, nil, mcp.InvalidParams("invalid params: params must be an object")
		}
		if err := json.Unmarshal(raw, &params); err != nil {
			return nil, nil, mcp.InvalidParams("invalid params: %v", err)
		}
	}
	if m, ok := params["_meta"]; ok {
		delete(params, "_meta")
		if string(m) != "null" {
			if err := json.Unmarshal(m, &meta); err != nil {
				return nil, nil, mcp.InvalidParams("invalid params: _meta must be an object")
			}
		}
	}
	return params, meta, nil
}

// joinParams puts params and _meta back together. With neither there are
// no params at all: the request goes out without "params" (tools/list from
// a client that sent none, or sent only the _meta keys the bridge removes),
// never with "params": null, which is not JSON-RPC and which TypeScript SDK
// servers drop without an answer.
func joinParams(params, meta map[string]json.RawMessage) any {
	if len(meta) > 0 {
		params["_meta"], _ = json.Marshal(meta)
	}
	if len(params) == 0 {
		return nil
	}
	out, _ := json.Marshal(params)
	return json.RawMessage(out)
}

func rawOr(raw json.RawMessage, def string) json.RawMessage {
	if len(raw) == 0 {
		return json.RawMessage(def)
	}
	return raw
}

// withModernResult adds what a 2026-07-28 result carries to a legacy
// server's result: resultType, serverInfo, and for cacheable results the
// cache hints, which a legacy server cannot give ("do not cache").
func withModernResult(method string, res any, info mcp.Implementation) (any, error) {
	raw, ok := res.(json.RawMessage)
	if !ok {
		return res, nil
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil {
		return nil, fmt.Errorf("mcp: the server's result is not an object: %w", err)
	}
	if _, ok := obj["resultType"]; !ok {
		obj["resultType"] = json.RawMessage(`"complete"`)
	}
	if slices.Contains(mcp.CacheableMethods, method) {
		if _, ok := obj["ttlMs"]; !ok {
			obj["ttlMs"] = json.RawMessage(`0`)
		}
		if _, ok := obj["cacheScope"]; !ok {
			obj["cacheScope"] = json.RawMessage(`"private"`)
		}
	}
	var m map[string]json.RawMessage
	json.Unmarshal(obj["_meta"], &m)
	if m == nil {
		m = map[string]json.RawMessage{}
	}
	m[mcp.MetaServerInfo], _ = json.Marshal(info)
	obj["_meta"], _ = json.Marshal(m)
	return obj, nil
}

// withoutModernResult removes the modern-only members a legacy client
// does not know.
func withoutModernResult(res any) (any, error) {
	raw, ok := res.(json.RawMessage)
	if !ok {
		return res, nil
	}
	var obj map[string]json.RawMessage
	if json.Unmarshal(raw, &obj) != nil {
		return raw, nil
	}
	delete(obj, "resultType")
	var m map[string]json.RawMessage
	if json.Unmarshal(obj["_meta"], &m) == nil && m != nil {
		delete(m, mcp.MetaServerInfo)
		if len(m) == 0 {
			delete(obj, "_meta")
		} else {
			obj["_meta"], _ = json.Marshal(m)
		}
	}
	return obj, nil
}
