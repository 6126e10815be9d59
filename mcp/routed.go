package mcp

// Routed is what a transport learned of a request before its handler
// runs: its params, parsed once (ParseRequestParams), the era it is served
// in and the protocol version it is served at, decided once. The
// Streamable HTTP transport hands it to the handler as the rpc.Request's
// Note (rpc.Conn.ReceiveDecoded), so that nothing below the route parses
// the request again; RoutedOf reads it back. A request that came over a
// stream has no note: its handler parses the params and decides the era
// itself.
type Routed struct {
	Params RequestParams
	Era    Era
	// Version is the protocol version the request is served at: a legacy
	// request's MCP-Protocol-Version header's (2025-03-26 without one),
	// or the 2026-07-28 _meta's.
	Version string
}

// RoutedOf returns the transport's note of a request (rpc.Request.Note),
// or nil when the request carries none.
func RoutedOf(note any) *Routed {
	r, _ := note.(*Routed)
	return r
}
