// Package gopeers holds agentwire's interoperability tests against MCP and
// ACP implementations written in Go, linked into the test binary:
// github.com/mark3labs/mcp-go v1.2.1,
// github.com/modelcontextprotocol/go-sdk v1.8.0 and
// github.com/coder/acp-go-sdk v0.13.0.
//
// The tests, by group:
//
//   - ACP (acp_test.go, acp_sdkagent_test.go): acp-go-sdk both ways — its
//     ClientSideConnection driving `agentwire serve acp`, agentwire's
//     acp/acpclient driving an AgentSideConnection agent over pipes (order
//     of 1000 chunks, the default permission policy, file escapes refused,
//     terminals on agentwire's runtime), and its example/agent program
//     driven by `agentwire acp --prompt`.
//   - Tasks (mcpgoclient_test.go, mcpgoserver_test.go): mcp-go's tasks
//     follow the 2025-11-25 design (params.task on tools/call, a tool's
//     execution.taskSupport, tasks/get, tasks/result, tasks/list,
//     tasks/cancel and notifications/tasks/status). Both directions over
//     both transports: mcp-go's client against an agentwire server (over
//     stdio, on in-process pipes, and over Streamable HTTP), and
//     agentwire's host client against an mcp-go server (the same two).
//   - HTTP+SSE servers (gosdk_sse_test.go): agentwire's host client
//     against go-sdk's SSEHandler and mcp-go's SSEServer (2024-11-05),
//     reached through the backwards-compatibility procedure.
//   - HTTP+SSE clients (sse_test.go): go-sdk's SSEClientTransport and
//     mcp-go's SSE client against agentwire's HTTP+SSE server
//     (streamable.Options.SSE): the server/discover fallback on -32022,
//     calls, list changes, resources/updated, the session's log level, a
//     server request answered by POST, and the session's end.
//   - Sessions (sessions_test.go): stateful Streamable HTTP. go-sdk's and
//     mcp-go's clients against agentwire with streamable.Options.Sessions
//     (the minted Mcp-Session-Id, notifications on the standalone GET
//     stream, resumption with Last-Event-ID after a dropped connection,
//     DELETE, and what mcp-go does when the server ends the session), and
//     agentwire's host client against go-sdk's and mcp-go's stateful
//     servers (the session id echoed, notifications outside a call,
//     resumption, DELETE).
//
// It is a module of its own, with a workspace of its own (go.work), so that
// the peers never enter the dependency graph of agentwire's modules; the
// repository root's go.work leaves it out. Its go.mod points agentwire at
// this checkout (replace ../..). Run it from this directory:
//
//	go vet ./... && go test -race ./...
package gopeers
