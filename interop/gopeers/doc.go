// Package gopeers holds agentwire's interoperability tests against MCP
// implementations written in Go, linked into the test binary: today
// github.com/mark3labs/mcp-go v1.2.1, whose tasks follow the 2025-11-25
// design (params.task on tools/call, a tool's execution.taskSupport,
// tasks/get, tasks/result, tasks/list, tasks/cancel and
// notifications/tasks/status).
//
// The tests run both directions over both transports: mcp-go's client
// against an agentwire server (over stdio, on in-process pipes, and over
// Streamable HTTP), and agentwire's host client against an mcp-go server
// (the same two transports).
//
// It is a module of its own, with a workspace of its own (go.work), so that
// the peers never enter the dependency graph of agentwire's modules; the
// repository root's go.work leaves it out. Its go.mod points agentwire at
// this checkout (replace ../..). Run it from this directory:
//
//	go vet ./... && go test -race ./...
package gopeers
