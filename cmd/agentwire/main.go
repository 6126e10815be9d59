// Command agentwire is the command-line face of the agentwire runtime.
//
//	agentwire demo [wire]              the stdio experiments, live (or a raw JSON-RPC session)
//	agentwire serve echo|mcp|acp       a test JSON-RPC server, the example MCP server, the example
//	                                   ACP agent: on stdio, or on a socket with --listen
//	agentwire call [flags] -- CMD      one request (MCP era negotiated), then a clean shutdown
//	agentwire check [flags] -- CMD     a fixed battery against an MCP server (or --url URL;
//	                                   --acp: an ACP agent)
//	agentwire acp [flags] -- CMD       a terminal client for any ACP agent (or --prompt TEXT)
//	agentwire tap [--log F] -- CMD     a transparent, logging stdio proxy
//	agentwire bridge --http ADDR -- CMD  a stdio MCP server served over Streamable HTTP
//
// Run `agentwire help` for the flags of each command.
package main

import (
	"fmt"
	"io"
	"os"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

const usage = `agentwire: the transport runtime for agent protocols (JSON-RPC 2.0 over stdio,
sockets and Streamable HTTP)

Usage:
  agentwire demo                  the stdio experiments, measured live against
                                  serve mcp subprocesses: stdout pollution, a crash and
                                  restart, the shutdown ladder, cancellation, the probe
  agentwire demo wire             a raw JSON-RPC session with the echo server (good and
                                  bad lines, notifications, cancellation, batches, EOF)
  agentwire serve echo [flags]    serve the echo test server on stdin/stdout
  agentwire serve mcp [flags]     serve the example MCP server (both protocol eras) on
                                  stdin/stdout: tools echo, search, slow_report, chatty, crash,
                                  and the conformance diagnostics test_missing_capability,
                                  test_streaming_elicitation, test_logging_tool,
                                  test_trigger_tool_change (over --http without crash,
                                  unless --demo-tools)
  agentwire serve acp [flags]     serve the example ACP agent on stdin/stdout: prompts
                                  "slow N", "permission", "plan", "tools", "thought",
                                  "read PATH", "write PATH TEXT", "run CMD...",
                                  "flood N", "echo-blocks", "mcp NAME TOOL ARGS";
                                  anything else is echoed
  agentwire acp [flags] -- CMD [ARGS...]   (or: --connect ADDR)
                                  drive an ACP agent from the terminal: prompts typed
                                  on stdin, the reply streamed to stdout, tool calls,
                                  plans and permission questions on stderr, files and
                                  terminals served from --cwd; --prompt TEXT runs one
                                  turn and exits with its stop reason
  agentwire call [flags] -- CMD [ARGS...]   (or: --connect ADDR, or --url URL)
                                  start a stdio server, send it one request, print
                                  the result, and shut it down with the ladder
  agentwire check [flags] -- CMD [ARGS...]   (or: --url URL)
                                  run a fixed battery against an MCP server, one row per
                                  check with what it saw: on stdio, era, unknown method, a
                                  line that is not JSON, a 1 MiB request, concurrency, the
                                  read-only tools (--call-tools; --call-tools=all for every
                                  tool), cancellation, stdout hygiene, stderr, shutdown; a
                                  probe that kills or hangs the server is blamed once and a
                                  fresh process runs the rest; over Streamable HTTP (--url),
                                  era, status codes, header mirroring, Origin, cancellation
                                  by disconnect, listen; behind OAuth, --token T or --oauth
                                  and its flags, as call's. A probe that could not run says
                                  "not run" and why (agentwire check --help for the flags);
                                  check --acp -- CMD: an ACP agent's battery (initialize,
                                  auth methods, unknown method, not JSON, batch, session/new,
                                  unknown session, prompt, control during a prompt, cancel,
                                  $/cancel_request, undeclared methods, EOF, stdout, shutdown)
  agentwire tap [--log FILE] [--grace D] -- CMD [ARGS...]
                                  a transparent stdio proxy in front of a server: bytes
                                  pass through unchanged, every line is logged as JSON Lines
                                  (time, direction, size, JSON-RPC kind/method/id, validity)
  agentwire bridge --http [HOST:]PORT [HTTP flags] -- CMD [ARGS...]
                                  serve a stdio MCP server over Streamable HTTP to clients
                                  of both eras: one server process shared by all, restarted
                                  if it crashes (HOST defaults to 127.0.0.1); the HTTP
                                  flags are those of serve mcp --http below
  agentwire help                  show this text (agentwire CMD --help: the flags of CMD)
  agentwire --version             print the version

Flags of serve echo, serve mcp and serve acp:
  --max-concurrent N       handlers running at once (default 256)
  --max-message-bytes N    largest accepted line (default 16777216)
  --grace D                end-of-stream grace for running handlers (default 5s)
  --shutdown-timeout D     bound on cancelled handlers and the final drain (default 5s)
  --log-level L            debug, info, warn or error; logs go to stderr (default warn)
  --listen ADDR            serve clients on unix:PATH or tcp:HOST:PORT (one connection
                           each, same framing) until SIGINT/SIGTERM, instead of stdio
Only serve acp:
  --max-background N       prompts and MCP bridge requests at once (default 32);
                           (serve acp sizes --max-concurrent itself)
Only serve mcp:
  --era E                  dual (default), modern or legacy
  --task-ttl D             how long a task is kept once it has ended (default 1h; a
                           2025-11-25 client may ask for its own ttl, up to 24h)
  --fixtures conformance   add the MCP conformance suite's fixture tools, resources,
                           prompts and completions
  --legacy-silent          as a legacy server, answer nothing before initialize
  --ignore-eof             keep running after stdin EOF
  --ignore-sigterm         ignore SIGTERM
  --no-stdout-guard        let tools print to stdout (chatty then pollutes the stream)
  --http [HOST:]PORT       serve Streamable HTTP (2026-07-28, and legacy clients
                           statelessly) at http://HOST:PORT/mcp instead of stdio;
                           HOST defaults to 127.0.0.1, and on loopback only loopback
                           Host names are answered (DNS rebinding)
  --demo-tools             with --http: offer crash too (it ends the server, so it is
                           left out over HTTP unless asked for)
HTTP flags (serve mcp --http, bridge):
  --token-file F           require "Authorization: Bearer T", T read from file F (one
                           trailing newline ignored; an empty file is an error); 401
                           otherwise, and the connection is closed
  --token T                the same with T on the command line, where every local user
                           can read it (ps, /proc): prefer --token-file or $AGENTWIRE_TOKEN.
                           --token and --token-file exclude each other; either wins over
                           $AGENTWIRE_TOKEN, which is used when neither is given (and is
                           removed from the environment of the processes started). An
                           empty token from any source is an error, never "no token"
  --allow-origin O         an Origin browsers may call from (repeatable; loopback
                           origins are always allowed; others get 403)
  --allow-host H           a Host name to answer to (repeatable)
  --max-conns N            connections open at once (default 1024, at most half the
                           open-file limit); beyond, the connection waiting longest
                           without a request is closed, or the new one gets 503
  --idle-timeout D         close a connection that sends no request for D (default 30s;
                           a new connection gets min(10s, D) for its first headers)
  --write-timeout D        cut off a client that reads nothing of its response for D
                           (a no-progress deadline per write, not a bound on a stream;
                           default 30s)
  --max-in-flight N        requests served at once across all clients (default 256, or
                           --max-concurrent); beyond, 503 with Retry-After
  --max-buffered-bytes N   request body bytes held by the requests in flight (default
                           16777216); beyond, 503 with Retry-After
  --oauth-issuer URL       be an OAuth 2.1 resource server: accept the access tokens of
                           the authorization server URL (its issuer identifier); JWTs
                           are verified against its key set, found through its RFC 8414
                           or OpenID metadata. Needs --oauth-resource. A request without
                           a valid token gets 401 with WWW-Authenticate naming the
                           metadata document; one without the scopes, 403
  --oauth-resource URL     this server's canonical URL (https://host/mcp): the audience
                           tokens must carry, and the resource of the protected
                           resource metadata document served (unauthenticated) at
                           /.well-known/oauth-protected-resource/PATH
  --oauth-introspect URL   verify tokens at this introspection endpoint (RFC 7662)
                           instead of the key set, as the client $AGENTWIRE_OAUTH_CLIENT_ID
                           with the secret $AGENTWIRE_OAUTH_CLIENT_SECRET (both required;
                           never flags). Needs --oauth-issuer and --oauth-resource
  --oauth-scope S          a scope every request's token needs (repeatable)
                           The OAuth flags exclude --token, --token-file and
                           $AGENTWIRE_TOKEN. The OAuth variables are removed from the
                           environment of the processes started, and the bridge never
                           passes a client's token to its server
  --redis URL              (serve mcp) be one instance of a fleet: tasks, listen
                           notifications and the requestState keys are shared with the
                           other instances through the Redis at URL (redis://host:port/db,
                           rediss:// for TLS). Redis down: tasks are refused, the rest is
                           served; see docs/scaling.md
  --redis-prefix P         the prefix of every key and channel (default agentwire:)
  --redis-lease D          how long the tasks of an instance that stopped answering stay
                           working before another marks them failed (default 15s)
  --redis-rotate-keys D    rotate the requestState key fleet-wide every D (default never;
                           at least 1h)
  Only /mcp is served (404 elsewhere); bodies over 4 MiB get 413.

Flags of call:
  --era E                  auto (probe server/discover, fall back to initialize),
                           modern, legacy, or none: plain JSON-RPC, no handshake
                           (default auto)
  --probe-timeout D        how long the probe may take (default 5s)
  --startup-allowance D    extra time for the first probe of the fresh server
                           (default 10s; 0 when --probe-timeout is given alone)
  --method M               any method (default tools/list; required with --era none)
  --params JSON            the request's params (MCP _meta is added for you)
  --tool NAME --args JSON  shorthand for tools/call (not with --method or --params)
  --task                   run the --tool as a task (the server's tasks, both designs):
                           its status changes go to stderr until it ends, its result to
                           stdout; an interrupt cancels it; --timeout bounds the wait
  --input JSON             answers to what the server asks while the request runs, keyed
                           by method: {"elicitation/create":{"name":"Ann"}} (the form's
                           fields; {"action":"decline"} refuses), {"sampling/createMessage":
                           "the reply"}, {"roots/list":{"roots":["/path"]}}; an array of
                           answers is used in turn. Only what is answered is declared in
                           the client's capabilities. Without --input, and with stdin on
                           a terminal, call asks you (on stderr); otherwise a request
                           for input ends the call with exit 3
  --input-file F           the same, read from file F
  --connect ADDR           talk to a server listening on unix:PATH or tcp:HOST:PORT
                           instead of starting CMD
  --url URL                talk to a Streamable HTTP server instead (era probed over
                           HTTP; 401/403/5xx are errors, never a reason to fall back)
  --token T                with --url: the bearer token to send
  --oauth                  with --url: get a token from the OAuth authorization server the
                           server names (its 401), as a public client registered on the
                           fly or --oauth-client-metadata-url U: the authorization URL is
                           printed on stderr (and opened in a browser where there is
                           one), and a listener on 127.0.0.1 receives the redirect.
                           Tokens are kept, one file (0600) per authorization server and
                           resource, in the user's config directory under agentwire/oauth
                           (0700), and refreshed; not with --token
  --oauth-timeout D        how long --oauth waits for you to authorize (default 5m)
  --oauth-client-id ID     with --oauth: a client registered beforehand, instead of a
                           metadata document or a registration; its secret, if any, in
                           $AGENTWIRE_OAUTH_CLIENT_SECRET (never a flag). Needs
  --oauth-issuer URL       the issuer identifier of the authorization server it is
                           registered at, exactly as its metadata says: the credentials
                           go to no other (a server naming another one is an error)
  --oauth-client-auth M    client_secret_basic, client_secret_post or none (default
                           basic with a secret, none without)
  --timeout D              how long to wait for the response, once connected (default 30s;
                           the time you take to answer the server on a terminal is not
                           counted)
  --connect-timeout D      how long the MCP negotiation may take (default 30s)
  --grace D                each wait of the shutdown ladder: close stdin, wait D,
                           SIGTERM the process group, wait D, SIGKILL (default 2s)
  --report                 write a JSON report to stderr: era, protocol version,
                           probe outcome, connect time, shutdown outcome and time,
                           stdout violations, late responses, restarts, exit code,
                           stderr tail
  --log-level L            (default error)

Flags of acp:
  --prompt TEXT            run one turn: the agent's reply (its message chunks) on
                           stdout, the stop reason as the exit status (below)
  --prompt-file F          the same, the prompt read from F (- for stdin)
  --cwd DIR                the session's working directory (default .); the files
                           served to the agent are confined to it and the --add-dir's
  --add-dir DIR            an additional directory of the session (repeatable)
  --load ID, --resume ID   load or resume a session instead of opening a new one
  --mode M                 switch to mode M before the first prompt
  --config ID=VALUE        set a config option before the first prompt (repeatable)
  --auth METHOD            authenticate with METHOD before opening the session (a
                           "terminal" method runs the agent's login on this terminal)
  --permission P           ask, deny or allow the agent's permission requests (default
                           ask with stdin on a terminal, else deny)
  --read-only, --no-fs     serve files read-only, or none
  --no-terminal            run no commands for the agent (default: terminal/* served,
                           each command in its own process group)
  --max-terminals N        terminals alive at once (default 16)
  --terminal-output N      bytes of output kept per terminal (default 1048576)
  --timeout D              bound on each turn, then the turn is cancelled (default 10m
                           with --prompt, none interactive; the time a permission
                           question waits for you is not counted)
  --connect-timeout D      bound on starting the agent and initialize (default 30s)
  --cancel-grace D         how long a cancelled turn waits for "cancelled" (default 5s)
  --grace D                each wait of the shutdown ladder (default 2s)
  --report                 write a JSON report to stderr: agent, versions, auth methods,
                           session, stop reason, times, update counts, permissions, fs,
                           terminals, shutdown, stdout violations, stderr tail
  --json                   the updates as JSON lines on stdout instead of rendering them
  --show-stderr            pass the agent's stderr through (default: its tail is kept)
  --quiet, --thoughts      no banner and tool calls on stderr; show the agent's thoughts
  --log-level L            (default error)
  --connect ADDR           talk to an agent listening on unix:PATH or tcp:HOST:PORT
Interactive: /quit, /help, /modes, /mode ID, /config [ID VALUE], /commands, /usage,
/sessions; any other line is a prompt (a trailing \ continues it). Ctrl-C cancels the
turn; a second one stops the agent with the ladder, a third kills it.

Flags of check --acp (with --grace, --request-timeout and --timeout):
  --acp-prompt TEXT        the prompt of the prompt check (default hi)
  --slow-prompt TEXT       a prompt that takes a while, for the checks during a prompt,
                           cancel, $/cancel_request and EOF (default the --acp-prompt;
                           "slow 20" for agentwire serve acp)
  --auth METHOD            authenticate before session/new

Tracing and metrics (serve, bridge, call, tap, acp; see docs/cli.md):
  --otlp URL               export spans (and metrics) over OTLP/HTTP to the collector at
                           URL: a base (http://HOST:4318, to which /v1/traces and
                           /v1/metrics are added) or a URL ending in /v1/traces. Default
                           $OTEL_EXPORTER_OTLP_ENDPOINT, $OTEL_EXPORTER_OTLP_TRACES_ENDPOINT;
                           without either, nothing is traced and nothing is wrapped. The
                           other OTEL_* variables are honoured; OTEL_SDK_DISABLED=true turns
                           it all off. Services are named "agentwire CMD" (serve, bridge,
                           call, tap, acp) unless $OTEL_SERVICE_NAME says otherwise. The
                           server, agent or command started is told URL in
                           $OTEL_EXPORTER_OTLP_ENDPOINT when its environment names no
                           endpoint. call and acp join the trace of $TRACEPARENT when set.
                           Spans are flushed (within 2s) however the command ends
  --metrics [HOST:]PORT    (serve, bridge) serve the Prometheus exposition at
                           http://HOST:PORT/metrics on a listener of its own (HOST
                           defaults to 127.0.0.1). It has no authentication: it shows
                           counters and durations by method and tool, no secrets

Signals (call, check, tap, bridge): the first SIGINT, SIGTERM or SIGHUP stops the
command cleanly: the server gets the shutdown ladder (call writes its --report,
check its table); a second one kills the server's process group at once.

Exit status (every command): 0 success; 1 what the command reports failed (call:
a JSON-RPC error; check: a check failed; serve, bridge: could not start or listen);
2 usage error (bad flags or arguments), and for call a transport failure (the server
could not be started or reached, was lost, or did not answer in time); 3 (call) the
server asked for input that was not given; 128+N after signal N (130 SIGINT, 143
SIGTERM) for call, check and tap; serve --listen/--http and bridge exit 0 when a
signal stops them. tap otherwise exits with the server's status (127: CMD could not
be started). acp: 0 end_turn (or the interactive session ended), 1 a JSON-RPC error
from the agent, 2 usage, transport, no reply within --timeout and --cancel-grace, or
a protocol version mismatch, 3 the agent requires authentication (its methods are
listed, with a --auth METHOD hint), 4 max_tokens, 5 max_turn_requests, 6 refusal,
7 cancelled without a signal, 8 an unknown stop reason, 128+N after signal N.
`

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return exitUsage
	}
	switch args[0] {
	case "demo":
		return runDemo(args[1:], stdout, stderr)
	case "serve":
		return runServe(args[1:], stdout, stderr)
	case "call":
		return runCall(args[1:], stdout, stderr)
	case "check":
		return runCheck(args[1:], stdout, stderr)
	case "acp":
		return runACP(args[1:], stdout, stderr)
	case "tap":
		return runTap(args[1:], os.Stdin, stdout, stderr)
	case "bridge":
		return runBridge(args[1:], stdout, stderr)
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, usage)
		return exitOK
	case "version", "-version", "--version":
		fmt.Fprintln(stdout, "agentwire", version())
		return exitOK
	default:
		fmt.Fprintf(stderr, "agentwire: unknown command %q\nusage: agentwire demo|serve|call|check|acp|tap|bridge|help|--version ...\n(agentwire help for the commands and their flags)\n", cutLine(args[0], 80))
		return exitUsage
	}
}
