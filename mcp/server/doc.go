// Package server is a dual-era MCP server over agentwire's JSON-RPC
// runtime (guarantee E1).
//
// New and AddTool build a server; Handler gives each connection its own
// handler and ConnOptions the connection options MCP needs (initialize is
// a barrier, batches are rejected, notifications/cancelled silences a
// request); ServeStdio serves the process's stdin and stdout. One Server
// serves any number of connections at once, each on its own rpc.Conn:
// the connection's runtime dispatches requests concurrently (bounded by
// rpc.Options), so a handler must be safe to run beside others; the
// Server's registries take a lock of their own, and tools, resources and
// prompts may be added or removed while connections are served.
//
// A dual-era server (the default) picks the era per request: a request
// whose _meta carries io.modelcontextprotocol/protocolVersion is modern
// and is validated on its own (a missing or malformed required field is
// -32602; an unknown version is -32022 with data.supported and
// data.requested) and served statelessly, with resultType, _meta
// serverInfo, and ttlMs/cacheScope on cacheable results. Anything else
// is legacy: initialize (version negotiation as the 2025-11-25 lifecycle
// says), notifications/initialized and ping, with tools served once
// initialize is done. Answering server/discover pins nothing, so a client
// may probe and then fall back to initialize on the same pipe; legacy
// state lives per connection. Over Streamable HTTP (mcp/streamable) the
// transport has decided the era and parsed the params already
// (mcp.Routed), and ExchangeHandler serves each request statelessly, a
// legacy one as if initialize had happened at its header's version. With
// legacy sessions on (streamable.SessionOptions) a session is one
// long-lived connection whose handler SessionHandler gives: it keeps its
// state as a stdio connection does, and serves each request at the
// version its note names (its header's), or else at the negotiated one.
//
// # Legacy connections
//
// An initialized legacy connection (stdio, or a Streamable HTTP session)
// is told of tool, prompt and resource list changes, as the listChanged
// capabilities promise, and of updates to the resources it subscribed to
// (resources/subscribe, at most Options.MaxResourceSubscriptions, 1024 by
// default, at once); its logging/setLevel holds for its life. Such
// notifications belong to no request (rpc.Outbound.Related is empty:
// over HTTP they go on the session's GET stream), while a request's
// progress, log lines and the server's requests made for it belong to
// that request. An idle connection costs an entry in a table and no
// goroutine: a change is told from where it happens, by one short-lived
// goroutine per connection with something to tell (what changes meanwhile
// is told once, after), so a change never waits for a connection; a
// notification a connection does not take within 10 s is dropped; and a
// connection's entry goes when it ends, through a hook on
// rpc.Conn.Context. LegacyStats counts the connections, their
// subscriptions, what they were told, what was dropped (logged once per
// burst) and the subscriptions refused.
//
// # Tools
//
// Tools get a ToolRequest: Progress sends notifications/progress when the
// client asked for it (strictly increasing, always before the result).
// The handler's context is cancelled by notifications/cancelled, after
// which nothing more is written for the request, and when the connection
// shuts down. subscriptions/listen is acknowledged first; every
// notification on it carries the subscription id; it announces tool-set
// changes; a client cancel ends it silently and end of input ends it with
// the graceful final result (guarantee E6). A listen stream holds no
// handler slot: it detaches into the connection's stream budget
// (rpc.Options.MaxStreams, 256), so open streams never keep ordinary
// requests waiting; one beyond the budget is answered -32000 with
// data.reason "too_many_streams".
//
// The typed AddTool checks a call's arguments against the InputSchema the
// tool publishes (inferred by mcp.SchemaFor, or its own) before the
// handler runs: required members, types, properties and items at any
// depth, additionalProperties, enum and const. Arguments that do not
// conform are a tool execution error, as the specification has it for
// input errors: a result with isError whose text names every problem
// ("invalid arguments for echo: argument "text" is required but
// missing."), which the model can read to correct its call. The handler
// is not called. Conforming arguments are then decoded into the handler's
// type as encoding/json.Unmarshal decodes them: for the usual struct of
// plain fields by a decoder of the package's own that walks the bytes the
// rpc layer has already validated (encoding/json was half of a tool
// call's cost in the MCP layer), and by encoding/json itself for every
// other type, and for any input that decoder cannot settle exactly as
// encoding/json would (FuzzArgDecode holds the two to the same result).
//
// Beyond tools a server has resources (AddResource, AddResourceTemplate
// with {var} and {+var} templates, ResourceUpdated for legacy
// subscribers), prompts (AddPrompt; required arguments are checked before
// the handler runs), completion (SetCompletion) and logging
// (ToolRequest.Log: a legacy connection's logging/setLevel threshold,
// "info" until set; in 2026-07-28 only when the request's _meta asked).
// Capabilities follow what is registered. Lists are paged when
// Options.PageSize is set. Methods removed in 2026-07-28 (ping,
// logging/setLevel, resources/subscribe) are unknown to modern requests.
//
// # Asking the client for input
//
// ToolRequest and PromptRequest have Ask, Elicit, State and SetState, one
// API for both eras. In the legacy era Ask sends the server's own request
// (elicitation/create, sampling/createMessage, roots/list) on the
// connection and waits for the answer (or the request's cancellation);
// over stateless HTTP the request goes out on the call's event stream
// under a process-unique id, and the answer, which the client POSTs
// separately, is routed back. In the 2026-07-28 era there are no server
// requests (SEP-2322): Ask returns the answers the client sent with its
// retry (inputResponses), or mcp.ErrInputRequired, which the handler
// returns and which becomes an input_required result carrying the
// unanswered requests and, if the handler called SetState, a requestState
// signed with HMAC-SHA256 over the method, the tool or prompt name and a
// digest of its arguments, valid for an hour (Options.StateKey, random per
// Server by default). The retry runs the handler again from the start;
// State then returns the verified state, and altered, foreign or expired
// state is -32602. Without sessions, logging/setLevel and
// resources/subscribe are accepted from legacy HTTP clients but cannot
// outlast their POST: the default threshold applies and no update
// notification can be sent. In a session they last as long as it does.
//
// # Tasks
//
// A tool whose mcp.Tool.Execution supports tasks may answer its call with
// a task: in 2026-07-28 when the request's _meta client capabilities
// declare the io.modelcontextprotocol/tasks extension, in 2025-11-25
// when the call carries params.task. The task is written to the store
// (TaskOptions.Store; an in-memory tasks.Memory by default) before the
// client is told its id, and the handler then runs on a goroutine of its
// own under a context that outlives the request: it ends with
// ErrTaskCancelled (tasks/cancel, through any instance), ErrServerShutdown
// (Shutdown), or ErrTaskEnded (another writer, a shared store's sweeper,
// ended the task). Inside a task Ask parks the task as input_required
// until the client answers (tasks/update; a 2025-11-25 tasks/result
// carries the requests to the client) or InputTimeout passes; Progress
// and Log send nothing in the extension (SetStatusMessage does, through
// tasks/get). A Tool with Execution.DeferTask gathers input in the
// request's own rounds and becomes a task when its handler calls
// ToolRequest.StartTask. The server follows the store's changes (one
// subscription, held while it runs or watches a task) to wake a waiting
// Ask, stop a cancelled handler and feed listen streams that name task
// ids. Every limit (MaxRunning, MaxRunningPerOwner, InputTimeout,
// MaxListenTasks, TTL, MaxTTL) has a default, a counter in TaskStats and a
// log line.
//
// # A fleet
//
// Options.Tasks.Store, Options.Bus and Options.StateKeys are what several
// instances behind a load balancer share (see docs/scaling.md; the
// redisstate module implements all three on Redis): tasks, the list
// changes and resource updates listen streams hear of, and the keys that
// seal requestState. This package only knows the interfaces.
//
// # Middleware
//
// Options.Middleware wraps the dispatch of every request once its era is
// decided and its params read: a Middleware is given a Call with the
// method, id and raw params, the era and version served, the tool or
// prompt (Name) or resource (URI) named, the caller's verified identity
// (OAuth, over a protected HTTP endpoint) and its self-description
// (ClientInfo), and after next returns whether the tool failed in its
// result (ToolError). It can refuse (return an error without calling
// next), time, log or trace. The chain is composed once, in New; without
// middleware a request is dispatched as before, at no cost.
// Notifications, which have no answer, are seen by rpc.Options.Middleware.
//
// # Shutdown
//
// A Server owns no goroutine of its own beyond its connections', its
// running task handlers and, with a Bus, the two that link it to the bus:
// a connection ends when its input does (rpc.Conn.EndInput, end of
// stdin), after which listen streams finish with their final result and
// other handlers get the connection's end-of-stream grace, a legacy
// connection hears of no more list changes, and its entry (subscriptions
// included) goes once it has shut down. Closing the connection
// cancels every handler at once. Shutdown stops the bus link and the task
// handlers (their tasks end failed, or completed if a handler returns a
// result) and waits for them until its context is done; ended tasks stay
// in the store.
//
// This package does not speak HTTP: mcp/streamable serves a Server over
// Streamable HTTP through the methods of streamable.Backend
// (ExchangeHandler, ExchangeOptions, Eras, HeaderParams) and, for legacy
// sessions, streamable.SessionBackend (SessionHandler).
package server
