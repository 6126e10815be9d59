package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/agentwire/agentwire/jsonrpc"
	"github.com/agentwire/agentwire/mcp"
	"github.com/agentwire/agentwire/mcp/host"
	"github.com/agentwire/agentwire/mcp/streamable"
)

// The rules the HTTP rows cite.
const (
	ruleHTTPEra    = "MCP Streamable HTTP era detection: a result or a modern error is modern; 401, 403, 5xx and network errors are never legacy evidence (docs/guarantees.md#t2)"
	ruleStatus     = "MCP Streamable HTTP: 400 for a body that is not JSON, 202 for a notification; 2026-07-28 has no GET stream (405); -32601 for an unknown method"
	ruleHeaders    = "MCP 2026-07-28 Streamable HTTP: MCP-Protocol-Version, Mcp-Method and Mcp-Name mirror the body; a missing or different one is 400 with -32020"
	ruleOrigin     = "MCP Streamable HTTP: servers MUST validate Origin (DNS rebinding); 403 for one not allowed"
	ruleDisconnect = "MCP Streamable HTTP: closing the response stream cancels the request; the server keeps serving"
	ruleListen     = "MCP 2026-07-28: subscriptions/listen is acknowledged, then carries the server's notifications"
	ruleOAuth      = "MCP authorization: the 401 names the protected resource metadata, which names the authorization server; PKCE S256, resource and iss (docs/auth.md)"
)

// foreignOrigin is an origin no server allows.
const foreignOrigin = "https://agentwire-check.invalid"

// httpProber sends the raw requests of the HTTP battery: the Session
// would send correct headers, and these probes are about incorrect ones.
type httpProber struct {
	c       *checker
	url     string
	client  *http.Client
	era     mcp.Era
	version string
	nextID  int
}

// rawAnswer is what a raw request got: the status, and the JSON-RPC error
// or result in the body (JSON or the first event of a stream).
type rawAnswer struct {
	status int
	ctype  string
	code   int64 // the JSON-RPC error code, 0 when none
	msg    string
	result bool // the body is a JSON-RPC success
	sid    string
	err    error
}

func (a rawAnswer) String() string {
	if a.err != nil {
		return a.err.Error()
	}
	s := fmt.Sprintf("%d", a.status)
	switch {
	case a.code != 0:
		s += fmt.Sprintf(" with %d %q", a.code, clip(a.msg, 60))
	case a.result:
		s += " with a result"
	}
	return s
}

func (p *httpProber) do(method string, body []byte, header map[string]string) rawAnswer {
	ctx, cancel := p.c.step(p.c.opts.requestTimeout)
	defer cancel()
	var r io.Reader
	if body != nil {
		r = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, p.url, r)
	if err != nil {
		return rawAnswer{err: err}
	}
	req.Header.Set("Accept", "application/json, text/event-stream")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if a := p.c.opts.auth; a != nil {
		if err := a.Authorize(req); err != nil {
			return rawAnswer{err: err}
		}
	} else if p.c.opts.token != "" {
		req.Header.Set("Authorization", "Bearer "+p.c.opts.token)
	}
	for k, v := range header {
		if v == "" {
			req.Header.Del(k)
		} else {
			req.Header.Set(k, v)
		}
	}
	resp, err := p.client.Do(req)
	if err != nil {
		return rawAnswer{err: err}
	}
	defer resp.Body.Close()
	a := rawAnswer{status: resp.StatusCode, ctype: resp.Header.Get("Content-Type"), sid: resp.Header.Get(mcp.HeaderSessionID)}
	if method == http.MethodGet {
		return a // a stream that may never end: the status says it
	}
	var msg []byte
	if strings.HasPrefix(a.ctype, "text/event-stream") {
		sc := bufio.NewScanner(io.LimitReader(resp.Body, 1<<20))
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			if line, ok := strings.CutPrefix(sc.Text(), "data:"); ok {
				msg = []byte(strings.TrimSpace(line))
				if bytes.Contains(msg, []byte(`"id"`)) {
					break
				}
			}
		}
	} else {
		msg, _ = io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	}
	var m struct {
		Result json.RawMessage `json:"result"`
		Error  *struct {
			Code    int64  `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(msg, &m) == nil {
		if m.Error != nil {
			a.code, a.msg = m.Error.Code, m.Error.Message
		}
		a.result = len(m.Result) > 0
	}
	return a
}

// request is a body and headers for method in the server's era, correct
// unless the caller changes the headers.
func (p *httpProber) request(method string, params map[string]any, notification bool) ([]byte, map[string]string) {
	if params == nil {
		params = map[string]any{}
	}
	h := map[string]string{}
	if p.era == mcp.Modern {
		params["_meta"] = map[string]any{
			mcp.MetaProtocolVersion:    p.version,
			mcp.MetaClientInfo:         mcp.Implementation{Name: "agentwire-check", Version: "1"},
			mcp.MetaClientCapabilities: map[string]any{},
		}
		h[mcp.HeaderProtocolVersion] = p.version
		h[mcp.HeaderMethod] = method
		if name, ok := params["name"].(string); ok {
			h[mcp.HeaderName] = name
		}
	} else if method != "initialize" {
		h[mcp.HeaderProtocolVersion] = p.version
	}
	msg := map[string]any{"jsonrpc": "2.0", "method": method, "params": params}
	if !notification {
		p.nextID++
		msg["id"] = 990000 + p.nextID
	}
	b, _ := json.Marshal(msg)
	return b, h
}

// legacyInit is an initialize request: over legacy HTTP the one request
// that needs no session.
func (p *httpProber) legacyInit() ([]byte, map[string]string) {
	return p.request("initialize", map[string]any{"protocolVersion": p.version, "capabilities": map[string]any{},
		"clientInfo": mcp.Implementation{Name: "agentwire-check", Version: "1"}}, false)
}

// endSession deletes a legacy session a probe's initialize opened.
func (p *httpProber) endSession(a rawAnswer) {
	if a.sid != "" {
		p.do(http.MethodDelete, nil, map[string]string{mcp.HeaderSessionID: a.sid, mcp.HeaderProtocolVersion: p.version})
	}
}

// verdict collects the parts of one row; the row gets the worst result.
type verdict struct {
	result string
	parts  []string
}

func (v *verdict) add(result, part string) {
	rank := map[string]int{"": 0, notRun: 1, info: 1, pass: 2, warn: 3, fail: 4}
	if rank[result] > rank[v.result] {
		v.result = result
	}
	v.parts = append(v.parts, result+": "+part)
}

func (v *verdict) report(c *checker, check, rule string) {
	c.add(check, v.result, strings.Join(v.parts, "; "), rule)
}

// transportFailure says whether a raw answer is no answer at all.
func transportFailure(a rawAnswer) bool { return a.err != nil }

// runHTTP is check --url: the battery that applies to Streamable HTTP.
func (c *checker) runHTTP(url string) {
	rows := []struct{ name, rule string }{
		{"status codes", ruleStatus}, {"header mirroring", ruleHeaders}, {"origin", ruleOrigin},
		{"disconnect", ruleDisconnect}, {"listen", ruleListen},
	}
	if r := c.opts.authRow; r != nil {
		c.add(r.Check, r.Result, r.Evidence, r.Rule)
		if r.Result == fail {
			c.add("era", notRun, "no token (the authorization failed)", ruleHTTPEra)
			for _, r := range rows {
				c.add(r.name, notRun, "no token (the authorization failed)", r.rule)
			}
			return
		}
	}
	opts := &host.Options{ProbeTimeout: c.opts.probeTimeout, ConnectTimeout: c.opts.connectTimeout,
		Info: mcp.Implementation{Name: "agentwire-check", Version: "1"}}
	co := &streamable.ClientOptions{Token: c.opts.token}
	if c.opts.auth != nil {
		co = &streamable.ClientOptions{Authorizer: c.opts.auth}
	}
	sess, err := streamable.Connect(c.ctx, url, opts, co)
	if err != nil {
		ev := err.Error()
		var ce *host.ConnectError
		if errors.As(err, &ce) {
			ev = fmt.Sprintf("probe %s after %s: %v", ce.Probe, millis(ce.Duration), err)
		}
		c.add("era", fail, ev, ruleHTTPEra)
		for _, r := range rows {
			c.add(r.name, notRun, "no MCP session (the era check failed)", r.rule)
		}
		return
	}
	defer sess.Close()
	c.sess = sess
	c.add("era", pass, fmt.Sprintf("%s %s; probe %s in %s", sess.Era(), sess.ProtocolVersion(), sess.Probe(), millis(sess.ConnectDuration())), ruleHTTPEra)
	p := &httpProber{c: c, url: url, era: sess.Era(), version: sess.ProtocolVersion(), client: &http.Client{
		Transport: http.DefaultTransport.(*http.Transport).Clone(),
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}}
	defer p.client.CloseIdleConnections()

	probes := []func(){
		func() { c.httpStatusCodes(p, ruleStatus) },
		func() { c.httpHeaderMirroring(p, ruleHeaders) },
		func() { c.httpOrigin(p, ruleOrigin) },
		func() { c.httpDisconnect(ruleDisconnect) },
		func() { c.httpListen(ruleListen) },
	}
	lost := ""
	for i, probe := range probes {
		switch {
		case c.ctx.Err() != nil:
			c.add(rows[i].name, notRun, c.cutReason(), rows[i].rule)
			continue
		case lost != "":
			c.add(rows[i].name, notRun, lost, rows[i].rule)
			continue
		}
		from := len(c.results)
		probe()
		if c.cutShort(from) {
			continue
		}
		// Every probe starts on a server that has just answered.
		if err := c.httpHealth(); err != nil && c.ctx.Err() == nil {
			lost = fmt.Sprintf("the server stopped answering after %q (%s: %v)", rows[i].name, pingMethod(c.sess), err)
			c.add("server health", fail, lost, "a server keeps answering after a refused or cancelled request")
		}
	}
}

func (c *checker) httpStatusCodes(p *httpProber, rule string) {
	var v verdict
	_, h := p.request("tools/list", nil, false)
	a := p.do(http.MethodPost, []byte("this is not json"), h)
	switch {
	case transportFailure(a):
		v.add(fail, "a body that is not JSON: no answer: "+a.String())
	case a.status == http.StatusBadRequest:
		v.add(pass, "a body that is not JSON: "+a.String())
	case a.status >= 400 && a.status < 500:
		v.add(warn, "a body that is not JSON: "+a.String()+" (400 expected)")
	default:
		v.add(fail, "a body that is not JSON: "+a.String())
	}

	a = p.do(http.MethodGet, nil, map[string]string{"Accept": "text/event-stream", mcp.HeaderProtocolVersion: p.version})
	switch {
	case transportFailure(a):
		v.add(fail, "GET: no answer: "+a.String())
	case a.status >= 500:
		v.add(fail, "GET: "+a.String())
	case p.era == mcp.Modern && a.status == http.StatusMethodNotAllowed:
		v.add(pass, "GET: 405")
	case p.era == mcp.Modern:
		v.add(warn, fmt.Sprintf("GET: %d (405 expected: there is no GET stream in 2026-07-28)", a.status))
	case a.status == http.StatusOK && !strings.HasPrefix(a.ctype, "text/event-stream"):
		v.add(warn, "GET: 200 "+a.ctype+" (an event stream or 405 expected)")
	default:
		v.add(pass, fmt.Sprintf("GET: %d %s", a.status, a.ctype))
	}

	if p.era == mcp.Modern {
		body, h := p.request("agentwire/no-such-method", nil, false)
		a = p.do(http.MethodPost, body, h)
		switch {
		case transportFailure(a) || a.status >= 500:
			v.add(fail, "an unknown method: "+a.String())
		case a.code == jsonrpc.CodeMethodNotFound:
			v.add(pass, "an unknown method: "+a.String())
		case a.result:
			v.add(fail, "an unknown method: "+a.String()+" (it succeeded)")
		default:
			v.add(warn, "an unknown method: "+a.String()+" (-32601 expected)")
		}
		body, h = p.request("notifications/cancelled", map[string]any{"requestId": 987654321, "reason": "agentwire check"}, true)
		a = p.do(http.MethodPost, body, h)
		switch {
		case transportFailure(a) || a.status >= 500:
			v.add(fail, "a notification: "+a.String())
		case a.status == http.StatusAccepted:
			v.add(pass, "a notification: 202")
		default:
			v.add(warn, "a notification: "+a.String()+" (202 expected)")
		}
	} else {
		// A legacy server may want its session: ask through it.
		ctx, cancel := c.step(c.opts.requestTimeout)
		_, err := c.sess.Request(ctx, "agentwire/no-such-method", nil)
		cancel()
		var je *jsonrpc.Error
		var hse *streamable.HTTPStatusError
		status := ""
		if errors.As(err, &hse) {
			status = fmt.Sprintf("%d ", hse.StatusCode)
		}
		switch {
		case errors.As(err, &je) && je.Code == jsonrpc.CodeMethodNotFound:
			v.add(pass, fmt.Sprintf("an unknown method: %s-32601", status))
		case errors.As(err, &je):
			v.add(warn, fmt.Sprintf("an unknown method: %s%d %q (-32601 expected)", status, je.Code, clip(je.Message, 60)))
		case err == nil:
			v.add(fail, "an unknown method succeeded")
		default:
			v.add(fail, "an unknown method: "+err.Error())
		}
	}
	v.report(c, "status codes", rule)
}

func (c *checker) httpHeaderMirroring(p *httpProber, rule string) {
	if p.era != mcp.Modern {
		c.add("header mirroring", notRun, "a legacy server: the mirroring headers are 2026-07-28's", rule)
		return
	}
	var v verdict
	probe := func(what string, body []byte, h map[string]string) {
		a := p.do(http.MethodPost, body, h)
		switch {
		case transportFailure(a) || a.status >= 500:
			v.add(fail, what+": "+a.String())
		case a.status == http.StatusBadRequest && a.code == mcp.CodeHeaderMismatch:
			v.add(pass, what+": 400 -32020")
		case a.status >= 200 && a.status < 300:
			v.add(fail, what+": "+a.String()+" (served as if it matched)")
		default:
			v.add(warn, what+": "+a.String()+" (400 with -32020 expected)")
		}
	}
	body, h := p.request("tools/list", nil, false)
	h[mcp.HeaderMethod] = "prompts/list"
	probe("Mcp-Method prompts/list on tools/list", body, h)
	body, h = p.request("tools/list", nil, false)
	h[mcp.HeaderProtocolVersion] = ""
	probe("no MCP-Protocol-Version", body, h)
	// A tool that does not exist, so that a server that skips the check
	// runs nothing.
	body, h = p.request("tools/call", map[string]any{"name": "agentwire-check-no-such-tool", "arguments": map[string]any{}}, false)
	h[mcp.HeaderName] = "agentwire-check-other-tool"
	probe("Mcp-Name not the tool called", body, h)
	v.report(c, "header mirroring", rule)
}

func (c *checker) httpOrigin(p *httpProber, rule string) {
	body, h := p.request("tools/list", nil, false)
	what := "tools/list"
	if p.era != mcp.Modern {
		body, h = p.legacyInit()
		what = "initialize"
	}
	h["Origin"] = foreignOrigin
	a := p.do(http.MethodPost, body, h)
	defer p.endSession(a)
	ev := fmt.Sprintf("%s from Origin %s: %s", what, foreignOrigin, a)
	switch {
	case transportFailure(a) || a.status >= 500:
		c.add("origin", fail, ev, rule)
	case a.status == http.StatusForbidden:
		c.add("origin", pass, ev, rule)
	case a.status >= 200 && a.status < 300:
		c.add("origin", fail, ev+" (served a foreign page's request)", rule)
	case a.status == http.StatusUnauthorized:
		c.add("origin", notRun, ev+" (refused for its credentials; give --token or --oauth)", rule)
	default:
		c.add("origin", warn, ev+" (403 expected)", rule)
	}
}

// httpHealth says whether the server still answers over HTTP.
func (c *checker) httpHealth() error {
	ctx, cancel := c.step(c.opts.requestTimeout)
	defer cancel()
	_, err := c.sess.Request(ctx, pingMethod(c.sess), nil)
	if err != nil && isAnswer(err) {
		return nil
	}
	return err
}

func (c *checker) httpDisconnect(rule string) {
	tool := c.opts.slowTool
	if tool == "" {
		c.add("disconnect", notRun, "give --slow-tool NAME (and --slow-args) with a tool that runs for more than 300 ms", rule)
		return
	}
	ctx, cancel := c.step(300 * time.Millisecond)
	_, err := c.sess.CallTool(ctx, tool, c.opts.slowArgs)
	cancel()
	if err == nil || !errors.Is(err, context.DeadlineExceeded) {
		if err != nil && !isAnswer(err) {
			c.add("disconnect", fail, fmt.Sprintf("tools/call %s: %v", tool, err), rule)
			return
		}
		c.add("disconnect", warn, fmt.Sprintf("%s finished within 300 ms (%s): nothing to cancel", tool, answerNote(err)), rule)
		return
	}
	if err := c.httpHealth(); err != nil {
		c.add("disconnect", fail, fmt.Sprintf("closed the stream of %s after 300 ms; then the server did not answer %s: %v", tool, pingMethod(c.sess), err), rule)
		return
	}
	c.add("disconnect", pass, fmt.Sprintf("closed the stream of %s after 300 ms; the server went on answering", tool), rule)
}

func (c *checker) httpListen(rule string) {
	if c.sess.Era() != mcp.Modern {
		c.add("listen", notRun, "a legacy server: subscriptions/listen is 2026-07-28's", rule)
		return
	}
	ctx, cancel := c.step(c.opts.requestTimeout)
	defer cancel()
	t0 := time.Now()
	sub, err := c.sess.Listen(ctx, host.ListenFilter{ToolsListChanged: true}, func(string, json.RawMessage) {})
	var je *jsonrpc.Error
	switch {
	case err == nil:
		took := time.Since(t0)
		sub.Close()
		c.add("listen", pass, fmt.Sprintf("subscriptions/listen acknowledged in %s; closed by the client", millis(took)), rule)
	case errors.As(err, &je) && je.Code == jsonrpc.CodeMethodNotFound:
		c.add("listen", warn, "subscriptions/listen: -32601 (the server offers no notifications)", rule)
	case errors.Is(err, context.DeadlineExceeded):
		c.add("listen", fail, fmt.Sprintf("subscriptions/listen: no acknowledgement within %v", c.opts.requestTimeout), rule)
	default:
		c.add("listen", fail, "subscriptions/listen: "+err.Error(), rule)
	}
}
