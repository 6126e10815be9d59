package streamable

import (
	"encoding/json"
	"errors"
	"github.com/agentwire/agentwire/mcp"
	"net/http"
	"slices"
	"strings"
	"unsafe"

	"github.com/agentwire/agentwire/jsonrpc"
)

// The second step of a POST (after the gate in httpserver.go, before the
// exchange in httpexchange.go): the route. The body is decoded once
// (jsonrpc.Decode), its params parsed once (parseParams), and the era
// decided once, here; all three travel on to the handler in an mcp.Routed,
// so nothing below parses the request again. Headers that mirror the body
// are checked against exactly what the handler will see.

// route decodes the body and serves what needs no handler: a
// notification or a response is taken care of here, as is anything
// malformed. It reports whether a request goes on to its exchange.
//
//go:noinline
func (h *Handler) route(w http.ResponseWriter, r *http.Request, ex *exchange, body []byte, accept acceptable, place *slot) bool {
	var err error
	in := ex.input()
	if in.msg, err = jsonrpc.Decode(body, nil); err != nil {
		var de *jsonrpc.DecodeError
		errors.As(err, &de)
		httpError(w, http.StatusBadRequest, jsonrpc.ID(de.ID), de.Code, de.Error(), nil)
		return false
	}
	msg := &in.msg
	if msg.Kind == jsonrpc.KindBatch {
		httpError(w, http.StatusBadRequest, "", jsonrpc.CodeInvalidRequest, "Invalid Request: the body must be a single JSON-RPC message, not a batch", nil)
		return false
	}

	id := jsonrpc.ID(msg.ID)
	p := &in.note.Params
	if !parseParams(w, id, msg.Params, p) {
		return false
	}
	headerVersion, hasHeader := headerValue(r.Header, mcp.HeaderProtocolVersion)
	bodyVersion, hasBodyVersion := "", false
	if p.Meta != nil && len(p.Meta.ProtocolVersion) > 0 {
		var b []byte
		if b, hasBodyVersion = jsonrpc.StringBytes(p.Meta.ProtocolVersion); hasBodyVersion {
			bodyVersion = viewString(b)
		}
	}
	era, version := h.decideEra(hasBodyVersion, bodyVersion, hasHeader, headerVersion)
	if era == mcp.Legacy && h.sess != nil && !h.sessionRoute(w, r, ex, hasHeader, &version) {
		// A legacy message on an endpoint with sessions needs its
		// session (httpsession.go); a modern one ignores Mcp-Session-Id.
		return false
	}
	if era == mcp.Legacy && !slices.Contains(mcp.LegacyVersions, version) {
		httpError(w, http.StatusBadRequest, id, mcp.CodeUnsupportedProtocolVersion, "Unsupported protocol version",
			map[string]any{"supported": mcp.SupportedVersions(h.eras), "requested": version})
		return false
	}
	in.note.Era, in.note.Version = era, version
	ex.modern = era == mcp.Modern

	if ex.session() != nil && msg.Kind != jsonrpc.KindRequest {
		// Into the session's connection: notifications/initialized
		// advances it, notifications/cancelled cancels, an answer
		// reaches the server's request.
		h.sessionMessage(w, r, ex, body)
		return false
	}
	switch msg.Kind {
	case jsonrpc.KindNotification:
		// Nothing a client may notify needs an answer over HTTP: there is
		// no session for notifications/initialized to advance, and a
		// cancelled request is cancelled by closing its response.
		w.WriteHeader(http.StatusAccepted)
		return false
	case jsonrpc.KindResult, jsonrpc.KindError:
		if era == mcp.Modern {
			httpError(w, http.StatusBadRequest, "", jsonrpc.CodeInvalidRequest, "Invalid Request: clients do not send responses in protocol version "+mcp.LatestVersion, nil)
			return false
		}
		// A legacy client answering a request of the server's (sampling,
		// elicitation) that went out on another POST's event stream: it
		// goes back to that exchange, under the id the handler used.
		h.answerServerRequest(msg, r)
		w.WriteHeader(http.StatusAccepted)
		return false
	}

	// Headers that mirror the body are checked in both eras: a legacy
	// client need not send them, but one that does must not say one thing
	// to an intermediary routing on them and another to the handler.
	method := methodOf(msg)
	bodyName := nameOf(method, p, msg.Params)
	if e := h.checkHeaders(r.Header, era == mcp.Modern, method, hasHeader, headerVersion, hasBodyVersion, bodyVersion, bodyName, p.Arguments); e != nil {
		httpError(w, http.StatusBadRequest, id, e.Code, e.Message, nil)
		return false
	}
	if h.prot != nil && !h.authorizeScopes(w, r, ex, id, method, bodyName) {
		return false
	}
	if method == mcp.MethodListen && !accept.sse {
		httpError(w, http.StatusNotAcceptable, id, jsonrpc.CodeInvalidRequest, "Not Acceptable: subscriptions/listen answers with an event stream (text/event-stream)", nil)
		return false
	}
	if method == mcp.MethodListen && !place.toStream() {
		h.limits.refused(refStreams, "limit", h.opts.MaxStreams, "remote", r.RemoteAddr)
		h.unavailable(w, r, "too many listen streams open")
		return false
	}
	// The event stream starts with the first notification (or keep-alive),
	// not before: an error that comes first keeps its status (400, 404).
	return true
}

// nameOf returns the raw member of a request's params that Mcp-Name
// mirrors, if its method has one: params.name, params.uri, or (the tasks
// extension's methods, SEP-2663 "Streamable HTTP: Routing Headers")
// params.taskId, which only those rare methods need looked up in raw.
func nameOf(method string, p *mcp.RequestParams, raw []byte) []byte {
	switch method {
	case mcp.MethodToolsCall, "prompts/get":
		return p.Name
	case "resources/read":
		return p.URI
	case mcp.MethodTasksGet, mcp.MethodTasksUpdate, mcp.MethodTasksCancel:
		var id []byte
		jsonrpc.EachMember(raw, func(key, value []byte) bool {
			if string(key) == "taskId" {
				id = value
				return false
			}
			return true
		})
		return id
	}
	return nil
}

// methodOf returns a message's method without copying it when it has no
// escapes: the body is the connection's from now on and nothing writes to
// it again, so a string viewing it is as immutable as any other.
func methodOf(msg *jsonrpc.Message) string {
	b, escaped := msg.MethodRaw()
	if escaped {
		return msg.MethodName()
	}
	return viewString(b)
}

// viewString views bytes of the request body as a string, without a copy.
// Only for the body (or a decoded copy of a piece of it): nothing writes
// to it once it is read.
func viewString(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(&b[0], len(b))
}

// decideEra is the one place the server side of HTTP decides a request's
// era: the body's _meta says modern; otherwise the MCP-Protocol-Version
// header does. A legacy request is served at its header's version
// (2025-03-26 without one: "the server SHOULD assume protocol version
// 2025-03-26", 2025-11-25 transports). A legacy-only server knows nothing
// of _meta.
func (h *Handler) decideEra(hasBodyVersion bool, bodyVersion string, hasHeader bool, headerVersion string) (mcp.Era, string) {
	switch {
	case h.eras == mcp.LegacyOnly:
		if hasHeader {
			return mcp.Legacy, headerVersion
		}
		return mcp.Legacy, legacyDefaultVersion
	case hasBodyVersion:
		return mcp.Modern, bodyVersion
	case hasHeader && mcp.IsModern(headerVersion):
		return mcp.Modern, headerVersion
	case hasHeader:
		return mcp.Legacy, headerVersion
	}
	return mcp.Legacy, legacyDefaultVersion
}

// caseAmbiguousIn returns a member of obj that equals one of names only
// under case folding; "" if none.
func caseAmbiguousIn(obj map[string]json.RawMessage, names ...string) string {
	for _, name := range names {
		for k := range obj {
			if k != name && strings.EqualFold(k, name) {
				return k
			}
		}
	}
	return ""
}

func quoteJSON(s string) string { b, _ := json.Marshal(s); return string(b) }

// parseParams reads the params members headers mirror into p, exactly as
// the session reads them (exact keys), and refuses ambiguous ones (400,
// -32602): a handler decoding into a Go struct matches keys
// case-insensitively, a server behind a bridge exactly, and a header must
// be checked against the value used. The members are slices of the body,
// never copies; the one walk that reads them finds their case-folded
// twins too. It reports whether the request goes on.
func parseParams(w http.ResponseWriter, id jsonrpc.ID, raw json.RawMessage, p *mcp.RequestParams) bool {
	if len(raw) == 0 || raw[0] != '{' {
		return true
	}
	mcp.ParseRequestParams(raw, p)
	if k := p.Ambiguous; k != "" {
		httpError(w, http.StatusBadRequest, id, jsonrpc.CodeInvalidParams, "invalid params: member "+quoteJSON(k)+" is ambiguous (differs from another only in case)", nil)
		return false
	}
	if k := p.MetaAmbiguous; k != "" {
		httpError(w, http.StatusBadRequest, id, jsonrpc.CodeInvalidParams, "invalid params: _meta member "+quoteJSON(k)+" is ambiguous (differs from another only in case)", nil)
		return false
	}
	return true
}
