// Package echo is a plain JSON-RPC 2.0 test server: the handler behind
// `agentwire serve echo`. It is useful for testing clients, and agentwire's
// own black-box tests and benchmarks use it.
//
// Methods:
//
//	echo                      result = params, byte for byte (null when absent)
//	sleep  {"ms":N}           waits N ms, then {"slept":N}; stops at once when cancelled
//	notify {"count":N}        sends N notifications {"method":"notify/tick","params":{"i":k}},
//	                          k = 1..N, all before answering {"sent":N}
//	fail   {"code":C,"message":M,"data":D}
//	                          answers with exactly that error object
//	panic                     the handler panics (answered with -32603, the server keeps serving)
//	big    {"bytes":N}        answers a string of N bytes ("xxx…"), N <= 256 MiB
//
// Anything else is -32601; wrong params are -32602. With Options, both
// notifications/cancelled and $/cancel_request cancel a request and silence
// it: a cancelled request gets no response.
package echo
