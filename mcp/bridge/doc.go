// Package bridge serves one MCP server, reached through a host.Session
// (typically a stdio subprocess), to Streamable HTTP clients of both eras.
// A *Bridge is a streamable.Backend: streamable.NewHandler(bridge.New(sess),
// opts) is its endpoint.
//
// There is one server process for all clients (restarted by the session's
// restart policy, a legacy server's initialize replayed before any
// request reaches the new process). Requests are translated between eras
// where client and server differ, with the server side's shared
// vocabulary (mcp.CheckModernMeta, mcp.SupportedVersions,
// mcp.RemovedInModern, mcp.CacheableMethods, mcp.LegacyVersionFor):
// a legacy client's initialize is answered by the bridge from what the
// server said, a modern client's server/discover likewise for a legacy
// server. Progress tokens and subscription ids are renamed so that
// clients never see each other's notifications. A request without
// arguments, or whose params held only the _meta keys a legacy server
// must not see, reaches the server with no params member at all:
// agentwire never writes "params": null, which JSON-RPC does not allow and
// which TypeScript SDK servers drop without an answer. The interop tests
// drive the bridge in front of the npm reference servers (filesystem,
// memory, everything) with the TypeScript clients and the Inspector.
//
// # Concurrency
//
// Every HTTP request is forwarded on its own goroutine (the one the HTTP
// handler serves it on) over the shared session, which carries any number
// of calls at once. The server's notifications for a request are relayed
// to its client in order through a queue of its own, so that the shared
// session's reader never waits for a client: one that falls 256
// notifications behind has its request cancelled (Stats.SlowClients). The
// queue holds a goroutine only while it has something to deliver, and
// grows only as notifications wait, so an idle request (a listen stream
// open for hours) costs its HTTP request's goroutine and little more.
// Listen streams are shared: every client that asks for the same
// notifications hangs off one subscriptions/listen stream on the server,
// opened for the first and closed after the last leaves.
//
// # Legacy sessions
//
// With legacy sessions on (streamable.SessionOptions) each session is one
// long-lived connection whose handler SessionHandler gives. Its requests
// are forwarded as above, but logging/setLevel, resources/subscribe and
// resources/unsubscribe are the session's own: the bridge answers them
// and keeps them for the session's life, and they never reach the shared
// server, where they would change what every other client hears. The
// server's changes are relayed to the session outside any request (its
// GET stream): list changes to every session and a resource's update to
// the sessions subscribed to it. A legacy server's log lines are not
// relayed: they name no request, so whose call one is about cannot be
// told, and one client must not see another's. From a 2026-07-28 server they come
// through the shared listen streams, one for the list changes and one per
// subscribed URI; from a legacy server from the shared session's
// notifications (host.Session.OnNotification), the
// bridge subscribing upstream once per URI for the first session and
// unsubscribing after the last. A session holds at most 1024
// subscriptions (Stats.SubscriptionsRefused). An idle session costs no
// goroutine: each has a queue of its own (256; beyond it notifications
// are dropped, Stats.SessionDrops, logged once per burst) that one
// goroutine empties while there is something in it, and what a session
// holds goes when its connection ends.
//
// # Cancellation and shutdown
//
// A client that cancels (closes its response) cancels the forwarded call,
// and the server is sent notifications/cancelled. When the HTTP handler
// shuts down, bridged listen streams end with their final result. What
// goes wrong with the server (its exit, the tail of its stderr) is logged
// on the endpoint's logger, never sent to a client: a client gets a short
// -32603 with data.reason "server_lost" or "bridge_error". Closing the
// Session (the caller's) stops the server; the Bridge holds nothing else.
package bridge
