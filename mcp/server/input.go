package server

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/agentwire/agentwire/mcp"
	"slices"
	"strings"
	"time"

	"github.com/agentwire/agentwire/jsonrpc"
	"github.com/agentwire/agentwire/rpc"
)

// inputRequiredError carries the requests still unanswered.
type inputRequiredError struct {
	requests map[string]mcp.InputRequest
}

func (e *inputRequiredError) Error() string { return mcp.ErrInputRequired.Error() }

// Is makes errors.Is(err, ErrInputRequired) true.
func (e *inputRequiredError) Is(target error) bool {
	return target == mcp.ErrInputRequired
}

// inputs is what Ask works with, shared by tools and prompts.
type inputs struct {
	rpc       *rpc.Request
	modern    bool
	responses map[string]json.RawMessage // this round's inputResponses
	state     []byte                     // verified requestState payload
	newState  []byte
	stateSet  bool
	task      *taskRun // set once the call runs as a task: Ask parks it
}

// Ask gets the client's answers to requests, by key. In the legacy era
// each request is sent to the client as a request of the server's own, in
// key order, and Ask waits for the answers. In the 2026-07-28 era the
// answers come with the retried request: Ask returns them when all are
// there, and otherwise ErrInputRequired, which the handler must return
// (the client is then sent input_required with the unanswered requests).
// Handlers must therefore be ready to run more than once per call, with
// the same effects until their last Ask.
func (in *inputs) Ask(ctx context.Context, requests map[string]mcp.InputRequest) (map[string]json.RawMessage, error) {
	if in.task != nil {
		return in.task.ask(ctx, requests)
	}
	out := make(map[string]json.RawMessage, len(requests))
	if !in.modern {
		keys := make([]string, 0, len(requests))
		for k := range requests {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			r := requests[k]
			res, err := in.rpc.Conn().Call(ctx, r.Method, r.Params)
			if err != nil {
				return nil, fmt.Errorf("mcp: asking the client (%s): %w", r.Method, err)
			}
			out[k] = res
		}
		return out, nil
	}
	missing := map[string]mcp.InputRequest{}
	for k, r := range requests {
		if res, ok := in.responses[k]; ok {
			out[k] = res
		} else {
			missing[k] = r
		}
	}
	if len(missing) > 0 {
		return nil, &inputRequiredError{requests: missing}
	}
	return out, nil
}

// State is the state the handler set in the previous round of this call
// (SetState), verified to be the server's own; nil in the first round and
// in the legacy era.
func (in *inputs) State() []byte { return in.state }

// SetState keeps data for the next round of a 2026-07-28 call: it travels
// to the client as requestState, signed, so a client cannot alter it, and
// comes back as State. It is not encrypted: do not put secrets in it.
func (in *inputs) SetState(data []byte) { in.newState, in.stateSet = bytes.Clone(data), true }

// ElicitResult is the answer to an elicitation.
type ElicitResult struct {
	Action  string         `json:"action"` // accept, decline or cancel
	Content map[string]any `json:"content,omitempty"`
}

// Elicit asks the client to fill in a form (requestedSchema is a JSON
// Schema object) and returns its answer; see Ask for the eras.
func (in *inputs) Elicit(ctx context.Context, key, message string, requestedSchema any) (*ElicitResult, error) {
	res, err := in.Ask(ctx, map[string]mcp.InputRequest{key: {Method: mcp.MethodElicit, Params: map[string]any{"message": message, "requestedSchema": requestedSchema}}})
	if err != nil {
		return nil, err
	}
	var r ElicitResult
	if err := json.Unmarshal(res[key], &r); err != nil {
		return nil, mcp.InvalidParams("invalid params: the elicitation answer %q: %v", key, err)
	}
	return &r, nil
}

// parseInputs reads a 2026-07-28 retry's inputResponses and requestState.
// inputResponses that is not an object, or an answer that is not one, is
// -32602; a requestState that is not the server's own is -32602.
func (s *Server) parseInputs(p *mcp.RequestParams, target func() string, in *inputs) error {
	*in = inputs{modern: true}
	if p.InputResponses != nil {
		if err := json.Unmarshal(p.InputResponses, &in.responses); err != nil || in.responses == nil {
			return mcp.InvalidParams("invalid params: inputResponses must be an object")
		}
		for k, v := range in.responses {
			if len(v) == 0 || v[0] != '{' {
				return mcp.InvalidParams("invalid params: inputResponses[%q] must be an object", k)
			}
		}
	}
	if p.RequestState != nil {
		str, ok := jsonrpc.StringValue(p.RequestState)
		if !ok {
			return mcp.InvalidParams("invalid params: requestState must be a string")
		}
		state, ok := s.verifyState(str, target())
		if !ok {
			return mcp.InvalidParams("invalid params: invalid requestState")
		}
		in.state = state
	}
	return nil
}

// inputRequiredResult is what a 2026-07-28 handler that needs input gets
// sent: the unanswered requests and, when it set one, its signed state.
func (s *Server) inputRequiredResult(e *inputRequiredError, in *inputs, target string) (map[string]any, error) {
	r := map[string]any{"resultType": mcp.ResultTypeInputRequired, "inputRequests": e.requests}
	if in.stateSet {
		state, err := s.signState(in.newState, target)
		if err != nil {
			return nil, err
		}
		r["requestState"] = state
	}
	return r, nil
}

// ----- requestState: payload and HMAC, bound to the request's target -----

// KeyRing holds the keys that seal requestState: Current signs, Current
// and Previous verify, so that a key can be replaced without failing the
// multi-round-trip retries sealed with the one before (rotate no more
// often than a state lives, an hour). Every instance behind a load
// balancer must see the same ring. StaticKeys is a fixed ring; a shared
// one (say, on Redis) rotates for a fleet. Keys are at least 32 bytes.
type KeyRing interface {
	StateKeys(ctx context.Context) (current []byte, previous [][]byte, err error)
}

// StaticKeys returns a ring of fixed keys: current signs, all verify.
func StaticKeys(current []byte, previous ...[]byte) KeyRing {
	return staticRing{current: bytes.Clone(current), previous: slices.Clone(previous)}
}

type staticRing struct {
	current  []byte
	previous [][]byte
}

func (r staticRing) StateKeys(context.Context) ([]byte, [][]byte, error) {
	return r.current, r.previous, nil
}

// ErrNoStateKey: the key ring could not give a key (a shared ring whose
// store is unreachable and that has none cached).
var ErrNoStateKey = errors.New("mcp: no key to seal requestState")

// keyRingTimeout bounds one look into the key ring.
const keyRingTimeout = 2 * time.Second

// stateKeys returns the ring's keys: Options.StateKeys, or the single
// StateKey, or a random key of this Server's.
func (s *Server) stateKeys() ([]byte, [][]byte, error) {
	if ring := s.opts.StateKeys; ring != nil {
		ctx, cancel := context.WithTimeout(context.Background(), keyRingTimeout)
		defer cancel()
		cur, prev, err := ring.StateKeys(ctx)
		if err == nil && len(cur) == 0 {
			err = ErrNoStateKey
		}
		if err != nil {
			s.opts.Logger.Warn("mcp: the requestState key ring gave no key", "error", err)
			return nil, nil, fmt.Errorf("%w: %v", ErrNoStateKey, err)
		}
		return cur, prev, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.opts.StateKey) > 0 {
		return s.opts.StateKey, nil, nil
	}
	if s.randomKey == nil {
		s.randomKey = make([]byte, 32)
		rand.Read(s.randomKey)
	}
	return s.randomKey, nil, nil
}

func mac(key, payload []byte, target string) []byte {
	h := hmac.New(sha256.New, key)
	h.Write([]byte(target))
	h.Write([]byte{0})
	h.Write(payload)
	return h.Sum(nil)
}

// stateTTL bounds how long a requestState is honoured.
const stateTTL = time.Hour

// signState returns base64url(nonce || issued || data) "." base64url(mac),
// the MAC covering the request's target (method, name and a digest of its
// arguments): state is valid only for the call it was issued for, for an
// hour. The nonce makes every round's state different.
func (s *Server) signState(data []byte, target string) (string, error) {
	key, _, err := s.stateKeys()
	if err != nil {
		return "", jsonrpc.NewError(jsonrpc.CodeInternalError, "Internal error: cannot seal requestState now", nil)
	}
	payload := make([]byte, 16+len(data))
	rand.Read(payload[:8])
	binary.BigEndian.PutUint64(payload[8:16], uint64(time.Now().Unix()))
	copy(payload[16:], data)
	enc := base64.RawURLEncoding
	return enc.EncodeToString(payload) + "." + enc.EncodeToString(mac(key, payload, target)), nil
}

// verifyState checks the whole string: strict decoding, so that nothing
// appended or altered passes; then the MAC (under any key of the ring)
// and the age.
func (s *Server) verifyState(state, target string) ([]byte, bool) {
	p, m, ok := strings.Cut(state, ".")
	if !ok {
		return nil, false
	}
	enc := base64.RawURLEncoding.Strict()
	payload, err1 := enc.DecodeString(p)
	sum, err2 := enc.DecodeString(m)
	if err1 != nil || err2 != nil || len(payload) < 16 || enc.EncodeToString(payload) != p || enc.EncodeToString(sum) != m {
		return nil, false
	}
	cur, prev, err := s.stateKeys()
	if err != nil {
		return nil, false
	}
	valid := hmac.Equal(sum, mac(cur, payload, target))
	for _, k := range prev {
		valid = valid || hmac.Equal(sum, mac(k, payload, target))
	}
	if !valid {
		return nil, false
	}
	issued := time.Unix(int64(binary.BigEndian.Uint64(payload[8:16])), 0)
	if age := time.Since(issued); age < -time.Minute || age > stateTTL {
		return nil, false
	}
	return payload[16:], true
}

// stateTarget names what a requestState is for: the method, the tool or
// prompt, and a digest of its arguments.
func stateTarget(method, name string, arguments []byte) string {
	sum := sha256.Sum256(arguments)
	return method + "\x00" + name + "\x00" + string(sum[:])
}

// asInputRequired reports whether err asks for input.
func asInputRequired(err error) (*inputRequiredError, bool) {
	var e *inputRequiredError
	if errors.As(err, &e) {
		return e, true
	}
	return nil, false
}
