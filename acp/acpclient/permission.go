package acpclient

import (
	"context"
	"encoding/json"
	"errors"
	"sync/atomic"

	"github.com/agentwire/agentwire/acp"
	"github.com/agentwire/agentwire/jsonrpc"
	"github.com/agentwire/agentwire/rpc"
)

// PermissionPolicy answers an agent's session/request_permission: a human
// asked on a terminal, a rule set, or one of DenyAll and AllowOnce. It runs
// on a goroutine of its own and may take as long as a human does; its ctx
// ends when the turn is cancelled, the agent withdraws the question
// ($/cancel_request), or the session or connection closes, and the answer
// then no longer matters (the spec's "cancelled" is sent without waiting
// for it).
type PermissionPolicy interface {
	RequestPermission(ctx context.Context, s *Session, req *PermissionRequest) (PermissionOutcome, error)
}

// PermissionFunc adapts a function to PermissionPolicy.
type PermissionFunc func(ctx context.Context, s *Session, req *PermissionRequest) (PermissionOutcome, error)

// RequestPermission calls f.
func (f PermissionFunc) RequestPermission(ctx context.Context, s *Session, req *PermissionRequest) (PermissionOutcome, error) {
	return f(ctx, s, req)
}

// PermissionRequest is one question. ToolCall is the tool call it is about
// as the request describes it; the session's earlier updates (the tool call
// announced) have been handled before it is asked.
type PermissionRequest struct {
	Session     *Session
	ToolCall    acp.ToolCall
	ToolCallRaw json.RawMessage
	Options     []acp.PermissionOption
	// DuringPrompt is false for a question asked while the session has no
	// Prompt in flight: nobody may be there to answer it (a terminal UI
	// reading its next prompt must not take the answer for one).
	DuringPrompt bool
}

// Option returns the first offered option of a kind (allow_once,
// allow_always, reject_once, reject_always).
func (r *PermissionRequest) Option(kind string) (acp.PermissionOption, bool) {
	for _, o := range r.Options {
		if o.Kind == kind {
			return o, true
		}
	}
	return acp.PermissionOption{}, false
}

// PermissionOutcome is the answer: an offered option, or cancelled.
type PermissionOutcome struct {
	Cancelled bool
	OptionID  string
}

// Selected returns the outcome choosing an option.
func Selected(optionID string) PermissionOutcome { return PermissionOutcome{OptionID: optionID} }

// DenyAll refuses: reject_once, else reject_always, else cancelled. It is the
// default policy.
var DenyAll PermissionPolicy = PermissionFunc(func(_ context.Context, _ *Session, r *PermissionRequest) (PermissionOutcome, error) {
	return denyChoice(r), nil
})

// AllowOnce allows once: allow_once, else allow_always, else as DenyAll.
var AllowOnce PermissionPolicy = PermissionFunc(func(_ context.Context, _ *Session, r *PermissionRequest) (PermissionOutcome, error) {
	for _, k := range []string{"allow_once", "allow_always"} {
		if o, ok := r.Option(k); ok {
			return Selected(o.OptionID), nil
		}
	}
	return denyChoice(r), nil
})

func denyChoice(r *PermissionRequest) PermissionOutcome {
	for _, k := range []string{"reject_once", "reject_always"} {
		if o, ok := r.Option(k); ok {
			return Selected(o.OptionID)
		}
	}
	return PermissionOutcome{Cancelled: true}
}

// PermissionStats counts the questions and their answers.
type PermissionStats struct {
	Asked, Allowed, Rejected, Cancelled, PolicyErrors int64
	// Overflow counts questions refused without asking because
	// MaxPendingPermissions were already being decided.
	Overflow int64
}

type permissionCounters struct {
	asked, allowed, rejected, cancelled, policyErrors, overflow atomic.Int64
}

func (p *permissionCounters) snapshot() PermissionStats {
	return PermissionStats{p.asked.Load(), p.allowed.Load(), p.rejected.Load(), p.cancelled.Load(), p.policyErrors.Load(), p.overflow.Load()}
}

var (
	errPolicyPanic     = errors.New("acpclient: permission policy panicked")
	errUnofferedOption = errors.New("acpclient: permission policy chose an option the agent did not offer")
)

var cancelledOutcome = json.RawMessage(`{"outcome":{"outcome":"cancelled"}}`)

func selectedOutcome(id string) json.RawMessage {
	b := append([]byte(`{"outcome":{"outcome":"selected","optionId":`), jsonrpc.AppendString(nil, id)...)
	return append(b, "}}"...)
}

// requestPermission serves session/request_permission (ACP: a cancelled
// turn's pending questions MUST be answered cancelled).
func (c *Conn) requestPermission(ctx context.Context, req *rpc.Request) (any, error) {
	var p struct {
		SessionID string                 `json:"sessionId"`
		ToolCall  json.RawMessage        `json:"toolCall"`
		Options   []acp.PermissionOption `json:"options"`
	}
	if err := req.UnmarshalParams(&p); err != nil {
		return nil, err
	}
	s, err := c.sessionFor(p.SessionID)
	if err != nil {
		return nil, err
	}
	c.perm.asked.Add(1)
	turnDone := s.turnDone()
	select {
	case <-turnDone:
		c.perm.cancelled.Add(1)
		return cancelledOutcome, nil
	default:
	}
	pr := &PermissionRequest{Session: s, ToolCallRaw: p.ToolCall, Options: p.Options, DuringPrompt: turnDone != nil}
	_ = json.Unmarshal(p.ToolCall, &pr.ToolCall)
	// Each question's policy runs on a goroutine of its own, which a
	// policy that ignores its ctx keeps after the agent withdrew the
	// question: their number is bounded, and past it the agent is refused
	// without asking.
	select {
	case c.policySlots <- struct{}{}:
	default:
		c.perm.overflow.Add(1)
		c.perm.rejected.Add(1)
		c.refusedLog.warn("acpclient: refused a permission question without asking: too many pending", "limit", cap(c.policySlots))
		out := denyChoice(pr)
		if out.Cancelled {
			return cancelledOutcome, nil
		}
		return selectedOutcome(out.OptionID), nil
	}
	// A human may take minutes: this request must not hold a handler slot.
	_ = req.Detach()

	pctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(s.ctx, cancel)
	defer stop()
	type answer struct {
		out PermissionOutcome
		err error
	}
	ch := make(chan answer, 1)
	go func() {
		defer func() { <-c.policySlots }()
		defer func() {
			if r := recover(); r != nil {
				ch <- answer{err: errPolicyPanic}
			}
		}()
		out, err := c.perms.RequestPermission(pctx, s, pr)
		ch <- answer{out, err}
	}()
	var a answer
	select {
	case a = <-ch:
	case <-turnDone:
		c.perm.cancelled.Add(1)
		return cancelledOutcome, nil
	case <-s.ctx.Done():
		c.perm.cancelled.Add(1)
		return cancelledOutcome, nil
	case <-ctx.Done():
		return nil, context.Cause(ctx) // the agent withdrew it: -32800
	}
	select {
	case <-turnDone: // cancelled while the policy decided: the spec wins
		c.perm.cancelled.Add(1)
		return cancelledOutcome, nil
	default:
	}
	out := a.out
	if a.err == nil && !out.Cancelled && !offeredOption(pr, out.OptionID) {
		a.err = errUnofferedOption
	}
	if a.err != nil {
		// Never "cancelled" for our own failure: agents read that as the
		// user cancelling the turn.
		c.perm.policyErrors.Add(1)
		c.log.Warn("acpclient: permission policy failed; refusing", "session", s.id, "error", a.err)
		out = denyChoice(pr)
	}
	if out.Cancelled {
		c.perm.cancelled.Add(1)
		return cancelledOutcome, nil
	}
	if o, _ := optionByID(pr, out.OptionID); len(o.Kind) >= 5 && o.Kind[:5] == "allow" {
		c.perm.allowed.Add(1)
	} else {
		c.perm.rejected.Add(1)
	}
	return selectedOutcome(out.OptionID), nil
}

func offeredOption(r *PermissionRequest, id string) bool {
	_, ok := optionByID(r, id)
	return ok
}

func optionByID(r *PermissionRequest, id string) (acp.PermissionOption, bool) {
	for _, o := range r.Options {
		if o.OptionID == id {
			return o, true
		}
	}
	return acp.PermissionOption{}, false
}
