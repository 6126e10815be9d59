package rpc_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func leakCheckedMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestWireExchanges pins the answer to one line at a time (guarantees W1–W6, C10):
// each case sends its lines and expects exactly the listed replies, in any
// order; the server keeps serving afterwards (checked by a final echo).
func TestWireExchanges(t *testing.T) {
	cases := []struct {
		name string
		in   []string
		want []string
	}{
		// Ids are echoed byte for byte (W5).
		{"string id", []string{`{"jsonrpc":"2.0","id":"a","method":"echo","params":[1]}`},
			[]string{`{"jsonrpc":"2.0","id":"a","result":[1]}`}},
		{"zero id", []string{`{"jsonrpc":"2.0","id":0,"method":"echo","params":[1]}`},
			[]string{`{"jsonrpc":"2.0","id":0,"result":[1]}`}},
		{"negative id", []string{`{"jsonrpc":"2.0","id":-1,"method":"echo","params":[1]}`},
			[]string{`{"jsonrpc":"2.0","id":-1,"result":[1]}`}},
		{"fractional id", []string{`{"jsonrpc":"2.0","id":1.5,"method":"echo","params":[1]}`},
			[]string{`{"jsonrpc":"2.0","id":1.5,"result":[1]}`}},
		{"id beyond 2^64", []string{`{"jsonrpc":"2.0","id":12345678901234567890,"method":"echo","params":[1]}`},
			[]string{`{"jsonrpc":"2.0","id":12345678901234567890,"result":[1]}`}},
		{"exponent id", []string{`{"jsonrpc":"2.0","id":1e3,"method":"echo","params":[1]}`},
			[]string{`{"jsonrpc":"2.0","id":1e3,"result":[1]}`}},
		{"escaped string id", []string{`{"jsonrpc":"2.0","id":"a\u0062\"","method":"echo","params":[1]}`},
			[]string{`{"jsonrpc":"2.0","id":"a\u0062\"","result":[1]}`}},
		{"params echoed byte for byte", []string{`{"jsonrpc":"2.0","id":1,"method":"echo","params":{ "b" : 1.50 , "a":[ ] }}`},
			[]string{`{"jsonrpc":"2.0","id":1,"result":{ "b" : 1.50 , "a":[ ] }}`}},
		{"members in any order", []string{`{"params":[2],"method":"echo","id":9,"jsonrpc":"2.0"}`},
			[]string{`{"jsonrpc":"2.0","id":9,"result":[2]}`}},
		{"escaped method name", []string{`{"jsonrpc":"2.0","id":1,"method":"\u0065cho","params":[1]}`},
			[]string{`{"jsonrpc":"2.0","id":1,"result":[1]}`}},
		{"no params gives null", []string{`{"jsonrpc":"2.0","id":1,"method":"echo"}`},
			[]string{`{"jsonrpc":"2.0","id":1,"result":null}`}},
		{"null params are absent", []string{`{"jsonrpc":"2.0","id":1,"method":"echo","params":null}`},
			[]string{`{"jsonrpc":"2.0","id":1,"result":null}`}},
		{"unknown members are ignored", []string{`{"jsonrpc":"2.0","id":1,"method":"echo","params":[1],"x":{}}`},
			[]string{`{"jsonrpc":"2.0","id":1,"result":[1]}`}},
		{"CRLF line", []string{`{"jsonrpc":"2.0","id":1,"method":"echo","params":[1]}` + "\r"},
			[]string{`{"jsonrpc":"2.0","id":1,"result":[1]}`}},
		{"blank lines are skipped", []string{"", "   ", "\t\r"}, nil},
		{"notification gets nothing", []string{`{"jsonrpc":"2.0","method":"echo","params":[1]}`}, nil},
		{"unknown notification gets nothing", []string{`{"jsonrpc":"2.0","method":"nope"}`}, nil},

		// Bad lines: one reply each, the stream goes on (W3, W4).
		{"not JSON", []string{`this is not json`},
			[]string{`{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error: invalid character 'h' in literal true"}}`}},
		{"truncated object", []string{`{"jsonrpc":"2.0","id":1,"method":"echo"`},
			[]string{`{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error: unexpected end of input in object"}}`}},
		{"trailing garbage", []string{`{"jsonrpc":"2.0","id":1,"method":"echo"} x`},
			[]string{`{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error: invalid character 'x' after top-level value"}}`}},
		{"two objects on one line", []string{`{"jsonrpc":"2.0","id":1,"method":"echo"}{"jsonrpc":"2.0","id":2,"method":"echo"}`},
			[]string{`{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error: invalid character '{' after top-level value"}}`}},
		{"bad escape", []string{`{"jsonrpc":"2.0","id":1,"method":"e\qcho"}`},
			[]string{`{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error: invalid escape character 'q'"}}`}},
		{"bad number", []string{`{"jsonrpc":"2.0","id":01,"method":"echo"}`},
			[]string{`{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error: ',' or '}' expected in object"}}`}},
		{"JSON that is not an object", []string{`123`, `"x"`, `null`, `true`},
			[]string{
				`{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Invalid Request: message is not a JSON object"}}`,
				`{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Invalid Request: message is not a JSON object"}}`,
				`{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Invalid Request: message is not a JSON object"}}`,
				`{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Invalid Request: message is not a JSON object"}}`,
			}},
		{"object that is not JSON-RPC", []string{`{"hello":1}`},
			[]string{`{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Invalid Request: missing \"jsonrpc\": \"2.0\""}}`}},
		{"missing version echoes the id", []string{`{"id":7,"method":"echo"}`},
			[]string{`{"jsonrpc":"2.0","id":7,"error":{"code":-32600,"message":"Invalid Request: missing \"jsonrpc\": \"2.0\""}}`}},
		{"wrong version", []string{`{"jsonrpc":"1.0","id":7,"method":"echo"}`, `{"jsonrpc":2.0,"id":8,"method":"echo"}`},
			[]string{
				`{"jsonrpc":"2.0","id":7,"error":{"code":-32600,"message":"Invalid Request: \"jsonrpc\" must be exactly \"2.0\""}}`,
				`{"jsonrpc":"2.0","id":8,"error":{"code":-32600,"message":"Invalid Request: \"jsonrpc\" must be exactly \"2.0\""}}`,
			}},
		{"method not a string", []string{`{"jsonrpc":"2.0","id":1,"method":5}`},
			[]string{`{"jsonrpc":"2.0","id":1,"error":{"code":-32600,"message":"Invalid Request: method must be a string"}}`}},
		{"object id", []string{`{"jsonrpc":"2.0","id":{},"method":"echo"}`},
			[]string{`{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Invalid Request: id must be a string or a number"}}`}},
		{"null id request", []string{`{"jsonrpc":"2.0","id":null,"method":"echo"}`},
			[]string{`{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Invalid Request: request id may not be null"}}`}},
		{"string params", []string{`{"jsonrpc":"2.0","id":1,"method":"echo","params":"x"}`},
			[]string{`{"jsonrpc":"2.0","id":1,"error":{"code":-32600,"message":"Invalid Request: params must be an object or an array"}}`}},
		{"duplicate member", []string{`{"jsonrpc":"2.0","id":1,"method":"echo","method":"big"}`},
			[]string{`{"jsonrpc":"2.0","id":1,"error":{"code":-32600,"message":"Invalid Request: duplicate member \"method\""}}`}},
		{"request with result", []string{`{"jsonrpc":"2.0","id":1,"method":"echo","result":1}`},
			[]string{`{"jsonrpc":"2.0","id":1,"error":{"code":-32600,"message":"Invalid Request: a request may not carry result or error"}}`}},
		{"unknown method", []string{`{"jsonrpc":"2.0","id":1,"method":"nope"}`},
			[]string{`{"jsonrpc":"2.0","id":1,"error":{"code":-32601,"message":"method not found: nope"}}`}},
		{"invalid params", []string{`{"jsonrpc":"2.0","id":1,"method":"sleep","params":{"ms":"x"}}`},
			[]string{`{"jsonrpc":"2.0","id":1,"error":{"code":-32602,"message":"invalid params: json: cannot unmarshal string into Go struct field sleepParams.ms of type int64"}}`}},
		{"handler error passes through", []string{`{"jsonrpc":"2.0","id":1,"method":"fail","params":{"code":-32042,"message":"nope","data":{"x":[1]}}}`},
			[]string{`{"jsonrpc":"2.0","id":1,"error":{"code":-32042,"message":"nope","data":{"x":[1]}}}`}},

		// Responses are never answered, even broken ones, so two peers cannot
		// trade error replies forever.
		{"response with unknown id", []string{`{"jsonrpc":"2.0","id":99,"result":1}`}, nil},
		{"error response with unknown id", []string{`{"jsonrpc":"2.0","id":99,"error":{"code":1,"message":"x"}}`}, nil},
		{"response with result and error", []string{`{"jsonrpc":"2.0","id":99,"result":1,"error":{"code":1,"message":"x"}}`}, nil},
		{"error response with bad code", []string{`{"jsonrpc":"2.0","id":99,"error":{"code":1.5,"message":"x"}}`}, nil},

		// Batches (W6).
		{"batch of notifications", []string{`[{"jsonrpc":"2.0","method":"echo"},{"jsonrpc":"2.0","method":"nope"}]`}, nil},
		{"empty batch", []string{`[]`, `[ ]`},
			[]string{
				`{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Invalid Request: empty batch"}}`,
				`{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Invalid Request: empty batch"}}`,
			}},
		{"batch of bad elements", []string{`[1,{"jsonrpc":"2.0","id":"x"}]`},
			[]string{`[{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Invalid Request: message is not a JSON object"}},{"jsonrpc":"2.0","id":"x","error":{"code":-32600,"message":"Invalid Request: message has neither \"method\" nor \"result\" nor \"error\""}}]`}},
		{"batch inside a batch", []string{`[[{"jsonrpc":"2.0","id":1,"method":"echo"}]]`},
			[]string{`[{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Invalid Request: a batch may not contain a batch"}}]`}},
		{"unparseable batch", []string{`[{"jsonrpc":"2.0","id":1,"method":"echo"},`},
			[]string{`{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error: unexpected end of input"}}`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			runWire(t, nil, nil, func(w *wire) {
				got := w.Exchange(tc.in...)
				want := slices.Clone(tc.want)
				slices.Sort(want)
				if !slices.Equal(got, want) {
					t.Errorf("replies to %q\n got: %q\nwant: %q", tc.in, got, want)
				}
				// The connection still serves.
				after := w.Exchange(`{"jsonrpc":"2.0","id":"after","method":"echo","params":["ok"]}`)
				if !slices.Equal(after, []string{`{"jsonrpc":"2.0","id":"after","result":["ok"]}`}) {
					t.Errorf("after %q the server answered %q", tc.in, after)
				}
			})
		})
	}
}

// TestBatchReplies: one array with one entry per request, in any order; the
// notifications and responses in it get no entry; every entry is complete.
func TestBatchReplies(t *testing.T) {
	runWire(t, nil, nil, func(w *wire) {
		got := w.Exchange(`[{"jsonrpc":"2.0","id":1,"method":"echo","params":[1]},` +
			`{"jsonrpc":"2.0","method":"echo","params":[0]},` +
			`{"jsonrpc":"2.0","id":2,"method":"sleep","params":{"ms":10}},` +
			`{"jsonrpc":"2.0","id":3,"method":"nope"},` +
			`{"jsonrpc":"2.0","id":77,"result":1},` +
			`{"foo":1}]`)
		w.Sleep(10 * time.Millisecond)
		got = append(got, w.Take()...)
		if len(got) != 1 || !strings.HasPrefix(got[0], "[") {
			t.Fatalf("want one batch reply, got %q", got)
		}
		entries := splitBatch(t, got[0])
		want := []string{
			`{"jsonrpc":"2.0","id":1,"result":[1]}`,
			`{"jsonrpc":"2.0","id":2,"result":{"slept":10}}`,
			`{"jsonrpc":"2.0","id":3,"error":{"code":-32601,"message":"method not found: nope"}}`,
			`{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Invalid Request: missing \"jsonrpc\": \"2.0\""}}`,
		}
		slices.Sort(want)
		if !slices.Equal(entries, want) {
			t.Errorf("batch entries\n got: %q\nwant: %q", entries, want)
		}
	})
}

func splitBatch(t *testing.T, line string) []string {
	t.Helper()
	var raw []json.RawMessage
	if err := json.Unmarshal([]byte(line), &raw); err != nil {
		t.Fatalf("batch reply is not a JSON array: %q", line)
	}
	out := make([]string, len(raw))
	for i, r := range raw {
		out[i] = string(r)
	}
	slices.Sort(out)
	return out
}
