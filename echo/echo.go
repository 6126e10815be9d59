package echo

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"time"

	"github.com/agentwire/agentwire/jsonrpc"
	"github.com/agentwire/agentwire/rpc"
)

// MaxBigBytes bounds the string "big" will build.
const MaxBigBytes = 256 << 20

// Handler returns the echo server's methods. See the package documentation
// for what each one does.
func Handler() rpc.Handler {
	return rpc.Methods{
		"echo":   echo,
		"sleep":  sleep,
		"notify": notify,
		"fail":   fail,
		"panic":  panicking,
		"big":    big,
	}
}

// Options returns the connection options `agentwire serve echo` uses on top
// of the caller's: both cancellation notifications silence the request, so
// a cancelled request gets no response whichever form the client uses.
func Options(base *rpc.Options) *rpc.Options {
	var o rpc.Options
	if base != nil {
		o = *base
	}
	o.Cancel = []rpc.CancelMethod{
		rpc.MCPCancel,
		{Method: rpc.ACPCancel.Method, Silence: true},
	}
	return &o
}

func echo(_ context.Context, req *rpc.Request) (any, error) {
	if req.Params == nil {
		return nil, nil
	}
	return req.Params, nil // byte for byte
}

type sleepParams struct {
	MS *int64 `json:"ms"`
}

func sleep(ctx context.Context, req *rpc.Request) (any, error) {
	var p sleepParams
	if err := req.UnmarshalParams(&p); err != nil {
		return nil, err
	}
	if p.MS == nil || *p.MS < 0 {
		return nil, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, `invalid params: "ms" must be a non-negative integer`)
	}
	t := time.NewTimer(time.Duration(*p.MS) * time.Millisecond)
	defer t.Stop()
	select {
	case <-t.C:
		return json.RawMessage(`{"slept":` + strconv.FormatInt(*p.MS, 10) + `}`), nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

type notifyParams struct {
	Count *int64 `json:"count"`
}

func notify(ctx context.Context, req *rpc.Request) (any, error) {
	var p notifyParams
	if err := req.UnmarshalParams(&p); err != nil {
		return nil, err
	}
	if p.Count == nil || *p.Count < 0 {
		return nil, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, `invalid params: "count" must be a non-negative integer`)
	}
	for i := int64(1); i <= *p.Count; i++ {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if err := req.Notify("notify/tick", json.RawMessage(`{"i":`+strconv.FormatInt(i, 10)+`}`)); err != nil {
			return nil, err
		}
	}
	return json.RawMessage(`{"sent":` + strconv.FormatInt(*p.Count, 10) + `}`), nil
}

type failParams struct {
	Code    *int64          `json:"code"`
	Message *string         `json:"message"`
	Data    json.RawMessage `json:"data"`
}

func fail(_ context.Context, req *rpc.Request) (any, error) {
	var p failParams
	if err := req.UnmarshalParams(&p); err != nil {
		return nil, err
	}
	if p.Code == nil || p.Message == nil {
		return nil, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, `invalid params: "code" (an integer) and "message" are required`)
	}
	return nil, &jsonrpc.Error{Code: *p.Code, Message: *p.Message, Data: p.Data}
}

// errPanic is what "panic" panics with.
var errPanic = errors.New("echo: panic requested")

func panicking(context.Context, *rpc.Request) (any, error) {
	panic(errPanic)
}

type bigParams struct {
	Bytes *int64 `json:"bytes"`
}

func big(_ context.Context, req *rpc.Request) (any, error) {
	var p bigParams
	if err := req.UnmarshalParams(&p); err != nil {
		return nil, err
	}
	if p.Bytes == nil || *p.Bytes < 0 || *p.Bytes > MaxBigBytes {
		return nil, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, `invalid params: "bytes" must be an integer from 0 to %d`, MaxBigBytes)
	}
	b := make([]byte, *p.Bytes+2)
	b[0] = '"'
	for i := 1; i <= int(*p.Bytes); i++ {
		b[i] = 'x'
	}
	b[len(b)-1] = '"'
	return json.RawMessage(b), nil
}
