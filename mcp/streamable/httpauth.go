package streamable

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/agentwire/agentwire/jsonrpc"
	"github.com/agentwire/agentwire/mcp/auth"
)

// Options.Protect: the endpoint as an OAuth 2.1 resource server. Its
// pieces run in the three steps of a POST: the gate serves the metadata
// document and refuses a request without a bearer token (no verifier call
// for those); authenticate verifies the token once the request has its
// place among those in flight and before its body is read; the route
// checks scopes once it knows the method and name (authorizeScopes); the
// exchange puts the identity in the handler's context. An unprotected
// handler pays a nil check per step.

// WellKnownResourceMetadata is the well-known path prefix of a protected
// resource metadata document (RFC 9728): the document of the resource
// https://host/mcp is at https://host/.well-known/oauth-protected-resource/mcp.
const WellKnownResourceMetadata = "/.well-known/oauth-protected-resource"

// Protection makes an endpoint an OAuth 2.1 resource server: every request
// must carry an access token that Verifier accepts, with the scopes the
// request needs (see Options.Protect).
type Protection struct {
	// Verifier checks each request's bearer token. Required.
	Verifier auth.Verifier
	// Metadata is the protected resource metadata document the handler
	// serves; Metadata.Resource, the endpoint's canonical absolute URL
	// ("https://mcp.example.com/mcp"), is required: the document's URL
	// is derived from its scheme, host and path, never from a request's
	// Host header. BearerMethodsSupported defaults to ["header"], the only
	// method the handler reads.
	Metadata auth.ProtectedResourceMetadata
	// Scopes are needed by every request, on top of those of its method
	// and tool (ScopedBackend); a 401 challenge names them.
	Scopes []string
}

// ScopedBackend is a Backend that requires scopes per method or per tool
// (a *server.Server: Options.MethodScopes, mcp.Tool.Scopes). When the
// endpoint is protected, the route asks it, once the method and the name
// are known and (in 2026-07-28 requests) checked against the Mcp-Method
// and Mcp-Name headers; a token without all of them, and Protection.Scopes,
// gets 403.
type ScopedBackend interface {
	Backend
	// RequiredScopes returns the scopes a request for method needs; name
	// is what Mcp-Name mirrors (the tool of tools/call, the prompt of
	// prompts/get, the URI of resources/read), "" for other methods. It
	// is called concurrently and must not modify what it returns later.
	RequiredScopes(method, name string) []string
}

// protection is Options.Protect resolved by NewHandler.
type protection struct {
	verifier auth.Verifier
	scoped   ScopedBackend // nil: the backend requires no scopes of its own
	scopes   []string
	// document is the metadata document, encoded once; paths are where
	// the handler serves it; metadataURL is the absolute URL challenges
	// name.
	document    []byte
	paths       []string
	metadataURL string
	// challenge401 is the challenge of a request without a token.
	challenge401 string
}

// newProtection checks and resolves Options.Protect; it panics on a
// configuration that cannot be served.
func newProtection(p *Protection, opts *Options, b Backend) *protection {
	if p.Verifier == nil {
		panic("streamable: Options.Protect needs a Verifier")
	}
	if opts.Token != "" {
		panic("streamable: Options.Token and Options.Protect are exclusive: a fixed token is a protection of its own")
	}
	res := p.Metadata.Resource
	u, err := url.Parse(res)
	if res == "" || err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.Fragment != "" || u.RawQuery != "" {
		panic(fmt.Sprintf("streamable: Options.Protect.Metadata.Resource must be the endpoint's absolute http(s) URL without query or fragment, not %q", res))
	}
	for _, s := range p.Scopes {
		if !auth.ValidScope(s) {
			panic(fmt.Sprintf("streamable: Options.Protect.Scopes: %q is not a scope token", s))
		}
	}
	pr := &protection{verifier: p.Verifier, scopes: slices.Clone(p.Scopes)}
	pr.scoped, _ = b.(ScopedBackend)
	doc := p.Metadata
	if len(doc.BearerMethodsSupported) == 0 {
		doc.BearerMethodsSupported = []string{"header"}
	}
	pr.document, _ = json.Marshal(doc)
	pr.document = append(pr.document, '\n')
	resPath := strings.TrimSuffix(u.EscapedPath(), "/")
	own := url.URL{Scheme: u.Scheme, Host: u.Host}
	pr.metadataURL = own.String() + WellKnownResourceMetadata + resPath
	if opts.ResourceMetadata != "" {
		pr.metadataURL = opts.ResourceMetadata
	}
	// The document is served where a client derives it from Resource,
	// where it would from the endpoint's path as the handler sees it, and
	// at the root, where clients that do not know the path look.
	for _, path := range []string{WellKnownResourceMetadata + resPath, WellKnownResourceMetadata + strings.TrimSuffix(opts.Path, "/"), WellKnownResourceMetadata} {
		if !slices.Contains(pr.paths, path) {
			pr.paths = append(pr.paths, path)
		}
	}
	pr.challenge401 = `Bearer resource_metadata=` + quoted(pr.metadataURL)
	if len(pr.scopes) > 0 {
		pr.challenge401 += `, scope=` + quoted(strings.Join(pr.scopes, " "))
	}
	return pr
}

// quoted writes s as an HTTP quoted-string.
func quoted(s string) string {
	if !strings.ContainsAny(s, `"\`) {
		return `"` + s + `"`
	}
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		if s[i] == '"' || s[i] == '\\' {
			b.WriteByte('\\')
		}
		b.WriteByte(s[i])
	}
	b.WriteByte('"')
	return b.String()
}

// serveMetadata answers a request for the metadata document, if it is
// one: GET, without authentication, readable from any origin.
func (pr *protection) serveMetadata(w http.ResponseWriter, r *http.Request) bool {
	if !slices.Contains(pr.paths, r.URL.Path) {
		return false
	}
	hdr := w.Header()
	hdr.Set("Access-Control-Allow-Origin", "*")
	if r.Method != http.MethodGet {
		hdr.Set("Allow", http.MethodGet)
		httpError(w, http.StatusMethodNotAllowed, "", jsonrpc.CodeInvalidRequest, "Method Not Allowed: the resource metadata document takes GET only", nil)
		return true
	}
	hdr.Set("Content-Type", "application/json")
	hdr.Set("Cache-Control", "max-age=3600")
	w.Write(pr.document)
	return true
}

// bearerToken returns the request's bearer token: the Authorization
// header's only (a token in the query string or the body is never read),
// with the scheme in any case.
func bearerToken(r *http.Request) (string, bool) {
	scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	token = strings.TrimSpace(token)
	return token, token != ""
}

// unauthorized answers 401 with the challenge and closes the connection:
// a client without a valid token keeps none open.
func (h *Handler) unauthorized(w http.ResponseWriter, r *http.Request, challenge string) {
	w.Header().Set("WWW-Authenticate", challenge)
	closeAfter(w, r, discardAuthBytes, discardTimeout)
	httpError(w, http.StatusUnauthorized, "", jsonrpc.CodeInvalidRequest, "Unauthorized: a valid bearer token is required", nil)
}

// authenticate verifies the request's bearer token (present: the gate
// checked) and keeps the identity in ex, for the scope check and the
// handler's context. It runs once the request has its place among those
// in flight, so that the verifier's work is bounded with theirs.
//
//go:noinline
func (h *Handler) authenticate(w http.ResponseWriter, r *http.Request, ex *exchange) bool {
	pr := h.prot
	token, _ := bearerToken(r)
	id, err := pr.verifier.Verify(r.Context(), token)
	switch {
	case err == nil && id != nil:
		ex.id = id
		return true
	case errors.Is(err, auth.ErrInvalidToken):
		h.limits.refused(refInvalidToken, "remote", r.RemoteAddr, "error", err)
		h.unauthorized(w, r, pr.challenge401+`, error="invalid_token"`)
		return false
	}
	if err == nil {
		err = errors.New("the verifier returned no identity")
	}
	// The verifier's own failure (its authorization server unreachable):
	// not the client's fault, and nothing it may read.
	h.limits.refused(refVerifier, "remote", r.RemoteAddr, "error", err)
	h.unavailable(w, r, "the access token could not be verified")
	return false
}

// authorizeScopes checks that the request's identity has every scope its
// method and name require, and answers 403 when it has not.
func (h *Handler) authorizeScopes(w http.ResponseWriter, r *http.Request, ex *exchange, id jsonrpc.ID, method string, name []byte) bool {
	pr := h.prot
	need := pr.scopes
	if pr.scoped != nil {
		var n string
		if len(name) > 0 {
			if b, ok := jsonrpc.StringBytes(name); ok {
				n = viewString(b)
			}
		}
		if more := pr.scoped.RequiredScopes(method, n); len(more) > 0 {
			need = slices.Clip(need)
			for _, s := range more {
				if !slices.Contains(need, s) {
					need = append(need, s)
				}
			}
		}
	}
	missing := ex.id.Missing(need)
	if len(missing) == 0 {
		return true
	}
	h.limits.refused(refInsufficientScope, "method", method, "missing", strings.Join(missing, " "), "remote", r.RemoteAddr)
	all := strings.Join(need, " ")
	w.Header().Set("WWW-Authenticate", `Bearer error="insufficient_scope", scope=`+quoted(all)+`, resource_metadata=`+quoted(pr.metadataURL))
	httpError(w, http.StatusForbidden, id, jsonrpc.CodeInvalidRequest, "Forbidden: insufficient scope: the request needs "+all, nil)
	return false
}
