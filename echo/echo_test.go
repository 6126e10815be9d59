package echo_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentwire/agentwire/echo"
	"github.com/agentwire/agentwire/jsonrpc"
	"github.com/agentwire/agentwire/rpc"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func pair(t *testing.T, client rpc.Handler) *rpc.Conn {
	c, s := rpc.Pipe(echo.Handler(), client, echo.Options(nil), &rpc.Options{OutboundCancel: &rpc.MCPCancel})
	t.Cleanup(func() {
		c.Close()
		s.Wait()
	})
	return c
}

func TestMethods(t *testing.T) {
	var mu sync.Mutex
	var ticks []string
	c := pair(t, rpc.HandlerFunc(func(_ context.Context, r *rpc.Request) (any, error) {
		mu.Lock()
		ticks = append(ticks, r.Method+string(r.Params))
		mu.Unlock()
		return nil, nil
	}))
	ctx := context.Background()
	cases := []struct {
		method, params string
		result         string
		code           int64
	}{
		{"echo", `{"a" : [1, 2.50]}`, `{"a" : [1, 2.50]}`, 0},
		{"echo", ``, `null`, 0},
		{"sleep", `{"ms":5}`, `{"slept":5}`, 0},
		{"sleep", `{"ms":-1}`, ``, jsonrpc.CodeInvalidParams},
		{"sleep", `{}`, ``, jsonrpc.CodeInvalidParams},
		{"notify", `{"count":3}`, `{"sent":3}`, 0},
		{"notify", `{"count":"x"}`, ``, jsonrpc.CodeInvalidParams},
		{"fail", `{"code":-32001,"message":"m","data":{"k":[1]}}`, ``, -32001},
		{"fail", `{"message":"m"}`, ``, jsonrpc.CodeInvalidParams},
		{"panic", ``, ``, jsonrpc.CodeInternalError},
		{"big", `{"bytes":5}`, `"xxxxx"`, 0},
		{"big", `{"bytes":-5}`, ``, jsonrpc.CodeInvalidParams},
		{"nope", ``, ``, jsonrpc.CodeMethodNotFound},
	}
	for _, tc := range cases {
		var params any
		if tc.params != "" {
			params = json.RawMessage(tc.params)
		}
		res, err := c.Call(ctx, tc.method, params)
		var je *jsonrpc.Error
		switch {
		case tc.code != 0:
			if !errors.As(err, &je) || je.Code != tc.code {
				t.Errorf("%s %s: err %v, want code %d", tc.method, tc.params, err, tc.code)
			}
		case err != nil || string(res) != tc.result:
			t.Errorf("%s %s: got %s, %v; want %s", tc.method, tc.params, res, err, tc.result)
		}
	}
	_, err := c.Call(ctx, "fail", json.RawMessage(`{"code":-32001,"message":"m","data":{"k":[1]}}`))
	var je *jsonrpc.Error
	if !errors.As(err, &je) || string(je.Data) != `{"k":[1]}` || je.Message != "m" {
		t.Errorf("fail returned %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if strings.Join(ticks, " ") != `notify/tick{"i":1} notify/tick{"i":2} notify/tick{"i":3}` {
		t.Errorf("ticks %q", ticks)
	}
}

// A cancelled sleep stops at once and gets no response; the caller sees
// its own context error.
func TestSleepHonoursCancellation(t *testing.T) {
	c := pair(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := c.Call(ctx, "sleep", map[string]int{"ms": 60000})
	if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > 5*time.Second {
		t.Fatalf("err %v after %v", err, time.Since(start))
	}
}
