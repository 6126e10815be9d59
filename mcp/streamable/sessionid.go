package streamable

import "context"

type sessionIDKey struct{}

// withSessionID is the context of a session's handlers: made once per
// session (a legacy Streamable HTTP session, an HTTP+SSE session), never
// per request.
func withSessionID(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, sessionIDKey{}, id)
}

// SessionIDFrom returns the id of the session whose handler's context ctx
// is (or derives from): the Mcp-Session-Id of a legacy Streamable HTTP
// session, or the sessionId of an HTTP+SSE session; "" for a stateless
// request and off HTTP. What keys on a client's session (a rate limit, a
// trace's mcp.session.id) reads it here: the id is the server's own, made
// when the session began, never a header read per request.
func SessionIDFrom(ctx context.Context) string {
	id, _ := ctx.Value(sessionIDKey{}).(string)
	return id
}
