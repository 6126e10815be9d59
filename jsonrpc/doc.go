// Package jsonrpc is agentwire's JSON-RPC 2.0 message model: the four
// envelopes, ids kept as raw JSON, error objects and codes, and a strict
// decoder that classifies every failure.
//
// # Messages
//
// A Message is one decoded line. Its fields are sub-slices of the line, so
// decoding allocates nothing and ids and params are echoed byte for byte
// (guarantee W5: "a" stays "a", 1.5 stays 1.5, 12345678901234567890 and 1e3 are
// never converted). The envelope is decided by which members are present
// (guarantee W2): id+method is a request, method alone a notification, id+result
// a success response, id+error an error response; a JSON array is a batch,
// whose elements Batch walks.
//
// # Decoding and its failures
//
// Decode validates the whole line with the same grammar as encoding/json,
// UTF-8 included (see below; FuzzScannerMatchesValid holds it to that), then
// checks the envelope. A failure is a *DecodeError that says how to answer
// it (guarantees W3, W4):
//
//   - CodeParseError (-32700): the line is not JSON, or not UTF-8. Nothing
//     on it is trusted; the reply carries id null.
//   - CodeInvalidRequest (-32600): JSON, but not a valid message: not an
//     object, "jsonrpc" not exactly "2.0", a repeated envelope member, an id
//     that is not a string or number, a request with a null id (allowed only
//     with DecodeOptions.AllowNullID), params that are not structured or
//     that repeat a key (see below), or a response with both or neither of
//     result and error. DecodeError.ID holds the id when it could be read,
//     so the reply can echo it.
//   - DecodeError.Response marks a broken response (result or error and no
//     method). Responses are never answered, so two peers cannot trade error
//     replies forever.
//
// Unknown members are ignored and "params": null is treated as absent:
// JSON-RPC 2.0 does not forbid the first, and real clients send the second.
//
// # Repeated keys
//
// An object in params that holds a key twice, at any depth, makes the
// message invalid (-32600), as a repeated envelope member does: RFC 8259 §4
// leaves the meaning of such an object to each implementation (encoding/json
// and JSON.parse keep the last value, others the first, some refuse it), so
// a proxy and a server could act on two different requests. The reason
// names the key and, as a JSON Pointer into params, the object holding it:
// duplicate key "region" in params at "/arguments". Keys are compared as
// encoding/json decodes them ("name" and "n\u0061me" are one key). It is
// the decoder that checks, not each reader of params, so that no handler
// (MCP, ACP, or one decoding params with encoding/json) can forget to; the
// cost is a second pass over params, allocation-free for params of ordinary
// size, O(n log n) at worst. Results and errors are not checked: a response
// is never answered.
//
// # UTF-8
//
// A line must be UTF-8: RFC 8259 §8.1 requires it of JSON text exchanged
// between systems, so a string holding bytes that are not UTF-8 is a parse
// error (-32700) like any other break of the grammar, wherever the string
// is: the method, the id, a key or a value deep in params. Such a line is
// rejected, not repaired, because a repair is a second reading of it:
// encoding/json turns each bad byte into U+FFFD, other decoders refuse the
// line or keep the bytes, and a proxy and a server that read one line
// differently are what an attacker wants. As nothing on a rejected line is
// trusted, the reply carries id null and echoes none of it. Everything
// Decode hands out (ID, Method, MethodName, Params, Result, Error and
// DecodeError.ID) is therefore UTF-8, and a reply that echoes an id is too.
// Escapes are decoded as encoding/json decodes them, an escaped lone
// surrogate ("\ud800", valid JSON) included: it becomes U+FFFD. The check
// costs nothing on ASCII; only bytes past 0x7f are decoded.
//
// # Reading params
//
// A handler that reads a few members of params need not decode them, nor
// bring a scanner of its own: Members, Elements, StringBytes and
// StringValue are built on the scanner Decode uses (FuzzMembers holds them
// to encoding/json). Members(obj, fn) calls fn(key, value) for each member
// of an object, in order, until fn returns false; Elements(arr, fn) does
// the same for an array's elements. Both validate their input in full
// first: a malformed object or array (not JSON, not UTF-8, trailing data,
// another kind of value) is an error, a *SyntaxError when it is not JSON,
// and fn is never called, so a walk is never silently partial.
// EachMember and EachElement walk the same way without validating again,
// for values Decode has already accepted (a request's params, anything
// inside them): every reader of params would otherwise scan them once
// more; on other input they do not panic, but what they hand out is
// unspecified. value is
// the member's raw JSON, a sub-slice of the input without surrounding
// white space; key is a sub-slice too when it holds no escapes, and a
// decoded copy (allocated) when it does, decoded as encoding/json decodes
// it. StringBytes(v) returns the contents of a JSON string value: a
// sub-slice between the quotes when it has no escapes, so that comparing
// it or looking it up in a map allocates nothing, and a decoded copy when
// it has; StringValue(v) is the same as a Go string (a copy). A tools/call
// params object is walked, its _meta and name read, without allocating
// (BenchmarkMembers).
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
//
// Numbers such as C3 cite the guarantees in the repository's
// docs/guarantees.md.
package jsonrpc
