// Package jsonrpc is agentwire's JSON-RPC 2.0 message model: the four
// envelopes, ids kept as raw JSON, error objects and codes, and a strict
// decoder that classifies every failure.
//
// # Messages
//
// A Message is one decoded line. Its fields are sub-slices of the line, so
// decoding allocates nothing and ids and params are echoed byte for byte
// (SPEC W5: "a" stays "a", 1.5 stays 1.5, 12345678901234567890 and 1e3 are
// never converted). The envelope is decided by which members are present
// (SPEC W2): id+method is a request, method alone a notification, id+result
// a success response, id+error an error response; a JSON array is a batch,
// whose elements Batch walks.
//
// # Decoding and its failures
//
// Decode validates the whole line with the same grammar as encoding/json
// (FuzzScannerMatchesValid holds it to that), then checks the envelope. A
// failure is a *DecodeError that says how to answer it (SPEC W3, W4):
//
//   - CodeParseError (-32700): the line is not JSON. Nothing on it is
//     trusted; the reply carries id null.
//   - CodeInvalidRequest (-32600): JSON, but not a valid message: not an
//     object, "jsonrpc" not exactly "2.0", a repeated envelope member, an id
//     that is not a string or number, a request with a null id (allowed only
//     with DecodeOptions.AllowNullID), params that are not structured, or a
//     response with both or neither of result and error. DecodeError.ID holds
//     the id when it could be read, so the reply can echo it.
//   - DecodeError.Response marks a broken response (result or error and no
//     method). Responses are never answered, so two peers cannot trade error
//     replies forever.
//
// Unknown members are ignored and "params": null is treated as absent:
// JSON-RPC 2.0 does not forbid the first, and real clients send the second.
//
// # Encoding
//
// Output is compact, one line per message, "jsonrpc" first. The Prefix*,
// Mid* and Suffix pieces let the runtime assemble a response from raw parts
// without an intermediate buffer; RawValue turns a handler's result into one
// line's worth of JSON (a json.RawMessage is used byte for byte unless it
// holds a newline, in which case it is compacted); AppendString and
// AppendError write strings and error objects exactly as encoding/json would.
//
// # Errors
//
// *Error is the error object. Its Is method compares codes, so
// errors.Is(err, ErrMethodNotFound) matches any -32601 however it is worded.
// -32000..-32099 are server-defined; agentwire uses CodeServerBusy (-32000)
// for work refused when every handler slot is taken.
package jsonrpc
