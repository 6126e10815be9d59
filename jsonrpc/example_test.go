package jsonrpc_test

import (
	"errors"
	"fmt"

	"github.com/agentwire/agentwire/jsonrpc"
)

func ExampleDecode() {
	for _, line := range []string{
		`{"jsonrpc":"2.0","id":12345678901234567890,"method":"echo","params":[1.50]}`,
		`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}`,
		`{"jsonrpc":"1.0","id":"a","method":"echo"}`,
		`{"jsonrpc":"2.0",`,
	} {
		m, err := jsonrpc.Decode([]byte(line), nil)
		var de *jsonrpc.DecodeError
		if errors.As(err, &de) {
			fmt.Printf("%d id=%s: %s\n", de.Code, de.ID, de.Reason)
			continue
		}
		fmt.Printf("%s id=%s method=%s params=%s\n", m.Kind, m.ID, m.MethodName(), m.Params)
	}
	// Output:
	// request id=12345678901234567890 method=echo params=[1.50]
	// notification id= method=notifications/cancelled params={"requestId":1}
	// -32600 id="a": "jsonrpc" must be exactly "2.0"
	// -32700 id=: unexpected end of input in object
}
