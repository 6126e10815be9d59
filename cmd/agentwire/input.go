package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/agentwire/agentwire/jsonrpc"
	"github.com/agentwire/agentwire/mcp"
)

// callInput answers what a server asks while `call`'s request runs: a
// form (elicitation/create), a model's reply (sampling/createMessage), the
// client's roots (roots/list). In the legacy era these are the server's
// own requests; in 2026-07-28 they come back in an input_required result
// and the request is retried with the answers (host.Options.OnInput
// does both). Answers come from --input/--input-file, else from the user
// when stdin is a terminal; a request neither answers ends the call with
// exitInput and a message saying how to answer it.
type callInput struct {
	given map[string]*answers // by method, from --input
	term  *prompter           // nil unless stdin is a terminal

	mu      sync.Mutex
	missing string // the first request left unanswered, for the message
	// stop ends the call as soon as a request is left unanswered (a
	// legacy server would otherwise go on with an error of ours).
	stop func()
	// clock is the call's --timeout, stopped while the user is asked.
	clock *pausableDeadline
}

// answers are --input's answers to one method: one answer for every
// request, or a list used in turn.
type answers struct {
	list   []json.RawMessage
	repeat bool
	next   int
}

var inputMethods = []string{mcp.MethodElicit, mcp.MethodSample, mcp.MethodListRoots}

// parseInput reads --input: an object keyed by method, each value one
// answer or an array of answers used in turn:
//
//	{"elicitation/create": {"name": "Ann"}}                   accept, with this content
//	{"elicitation/create": {"action": "decline"}}             a whole ElicitResult
//	{"sampling/createMessage": "Paris"}                       the model's text reply
//	{"roots/list": {"roots": ["/tmp", "file:///srv"]}}        paths or URIs
func parseInput(b []byte) (map[string]*answers, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil || m == nil {
		return nil, errors.New(`not a JSON object keyed by method (e.g. {"elicitation/create":{"name":"Ann"}})`)
	}
	out := map[string]*answers{}
	for method, v := range m {
		known := false
		for _, k := range inputMethods {
			known = known || k == method
		}
		if !known {
			return nil, fmt.Errorf("unknown method %q (elicitation/create, sampling/createMessage or roots/list)", method)
		}
		a := &answers{}
		v = bytes.TrimSpace(v)
		if len(v) > 0 && v[0] == '[' {
			if err := json.Unmarshal(v, &a.list); err != nil || len(a.list) == 0 {
				return nil, fmt.Errorf("%s: an array of answers must not be empty", method)
			}
		} else {
			a.list, a.repeat = []json.RawMessage{v}, true
		}
		for _, x := range a.list {
			x = bytes.TrimSpace(x)
			if len(x) > 0 && (x[0] == '{' || method == mcp.MethodSample && x[0] == '"') {
				continue
			}
			what := "an object"
			if method == mcp.MethodSample {
				what = "an object or a string"
			}
			return nil, fmt.Errorf("%s: an answer is %s, not %s", method, what, cutLine(string(x), 80))
		}
		out[method] = a
	}
	return out, nil
}

func (a *answers) take() (json.RawMessage, bool) {
	if a.repeat {
		return a.list[0], true
	}
	if a.next >= len(a.list) {
		return nil, false
	}
	a.next++
	return a.list[a.next-1], true
}

// capabilities declares what this client can answer: every kind on a
// terminal, else what --input answers. Nothing is declared that would
// only be refused.
func (ci *callInput) capabilities() map[string]any {
	caps := map[string]any{}
	for _, m := range inputMethods {
		if ci.term == nil && ci.given[m] == nil {
			continue
		}
		switch m {
		case mcp.MethodElicit:
			if ci.term != nil {
				caps["elicitation"] = map[string]any{"form": map[string]any{}, "url": map[string]any{}}
			} else {
				caps["elicitation"] = map[string]any{}
			}
		case mcp.MethodSample:
			caps["sampling"] = map[string]any{}
		case mcp.MethodListRoots:
			caps["roots"] = map[string]any{}
		}
	}
	return caps
}

// errUnanswered is what the server is told of a request nothing answered.
var errUnanswered = errors.New("no answer for the server's request")

// answer is host.Options.OnInput.
func (ci *callInput) answer(ctx context.Context, req mcp.InputRequest) (any, error) {
	raw, _ := json.Marshal(req.Params)
	ci.mu.Lock()
	if ci.missing != "" {
		return nil, ci.refuseLocked()
	}
	if a := ci.given[req.Method]; a != nil {
		if v, ok := a.take(); ok {
			res, err := fromInput(req.Method, raw, v)
			if err != nil {
				ci.missing = fmt.Sprintf("%s: --input's answer does not do: %v", describe(req.Method, raw), err)
				return nil, ci.refuseLocked()
			}
			ci.mu.Unlock()
			return res, nil
		}
	}
	if ci.term != nil {
		// Not under mu: the user may take their time, and a signal must
		// not wait for them.
		clock := ci.clock
		ci.mu.Unlock()
		clock.pause()
		defer clock.resume()
		return ci.term.ask(ctx, req.Method, raw)
	}
	ci.missing = describe(req.Method, raw)
	if ci.given[req.Method] != nil {
		ci.missing += " (--input's answers to " + req.Method + " were used up)"
	}
	return nil, ci.refuseLocked()
}

// refuseLocked ends the call and returns the error the server gets; it
// unlocks mu.
func (ci *callInput) refuseLocked() error {
	stop := ci.stop
	ci.mu.Unlock()
	if stop != nil {
		stop()
	}
	return &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "agentwire call: " + errUnanswered.Error()}
}

// unansweredRequest is the request left unanswered, described, or "".
func (ci *callInput) unansweredRequest() string {
	ci.mu.Lock()
	defer ci.mu.Unlock()
	return ci.missing
}

// inputHelp is the message of exitInput.
func inputHelp(missing string) string {
	return fmt.Sprintf(`agentwire call: the server asked for input that was not given: %s
Answer it with --input JSON or --input-file FILE, an object keyed by method, e.g.
  --input '{"elicitation/create":{"name":"Ann"}}'   (the form's fields; {"action":"decline"} refuses)
  --input '{"sampling/createMessage":"the reply of the model"}'
  --input '{"roots/list":{"roots":["/path/or/uri"]}}'
or run call with stdin on a terminal to be asked.`, missing)
}

// elicitParams is what elicitation/create asks.
type elicitParams struct {
	Mode            string          `json:"mode"`
	Message         string          `json:"message"`
	URL             string          `json:"url"`
	RequestedSchema json.RawMessage `json:"requestedSchema"`
}

type fieldSchema struct {
	Type        any               `json:"type"`
	Title       string            `json:"title"`
	Description string            `json:"description"`
	Default     json.RawMessage   `json:"default"`
	Enum        []json.RawMessage `json:"enum"`
	EnumNames   []string          `json:"enumNames"`
	OneOf       []struct {
		Const json.RawMessage `json:"const"`
		Title string          `json:"title"`
	} `json:"oneOf"`
	Items *struct {
		Enum  []json.RawMessage `json:"enum"`
		AnyOf []struct {
			Const json.RawMessage `json:"const"`
			Title string          `json:"title"`
		} `json:"anyOf"`
	} `json:"items"`
}

type formSchema struct {
	Properties map[string]fieldSchema `json:"properties"`
	Required   []string               `json:"required"`
	order      []string
}

func parseForm(raw json.RawMessage) formSchema {
	var f formSchema
	json.Unmarshal(raw, &f)
	var top map[string]json.RawMessage
	json.Unmarshal(raw, &top)
	f.order = objectKeys(top["properties"])
	return f
}

// objectKeys returns the keys of a JSON object in the order they are
// written (a form's fields are asked in the server's order).
func objectKeys(raw json.RawMessage) []string {
	d := json.NewDecoder(bytes.NewReader(raw))
	if t, err := d.Token(); err != nil || t != json.Delim('{') {
		return nil
	}
	var keys []string
	for d.More() {
		t, err := d.Token()
		if err != nil {
			return keys
		}
		k, _ := t.(string)
		keys = append(keys, k)
		var skip json.RawMessage
		if d.Decode(&skip) != nil {
			return keys
		}
	}
	return keys
}

func (f formSchema) required(name string) bool {
	for _, r := range f.Required {
		if r == name {
			return true
		}
	}
	return false
}

// describe names a request for a message: its method and what it asks.
func describe(method string, params json.RawMessage) string {
	switch method {
	case mcp.MethodElicit:
		var p elicitParams
		json.Unmarshal(params, &p)
		d := fmt.Sprintf("%s %q", method, cutLine(p.Message, 160))
		if f := parseForm(p.RequestedSchema); len(f.order) > 0 {
			d += " (fields: " + strings.Join(f.order, ", ") + ")"
		}
		return d
	case mcp.MethodSample:
		return method + " (a reply from the client's model)"
	}
	return method + " (the client's roots)"
}

// fromInput turns an --input answer into the result for the request.
func fromInput(method string, params, v json.RawMessage) (any, error) {
	switch method {
	case mcp.MethodElicit:
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(v, &obj); err != nil {
			return nil, err
		}
		if _, whole := obj["action"]; !whole {
			obj = map[string]json.RawMessage{"action": json.RawMessage(`"accept"`), "content": v}
		}
		var action string
		json.Unmarshal(obj["action"], &action)
		var p elicitParams
		json.Unmarshal(params, &p)
		f := parseForm(p.RequestedSchema)
		if action != "accept" || len(f.order) == 0 {
			return obj, nil
		}
		// One object may answer several forms: each gets its own fields.
		var content map[string]json.RawMessage
		json.Unmarshal(obj["content"], &content)
		kept := map[string]json.RawMessage{}
		var lacking []string
		for _, name := range f.order {
			if c, ok := content[name]; ok {
				kept[name] = c
			} else if f.required(name) {
				lacking = append(lacking, name)
			}
		}
		if len(lacking) > 0 {
			return nil, fmt.Errorf("it lacks the required field(s) %s", strings.Join(lacking, ", "))
		}
		obj["content"], _ = json.Marshal(kept)
		return obj, nil
	case mcp.MethodSample:
		var text string
		if json.Unmarshal(v, &text) == nil {
			return samplingResult(text), nil
		}
		return v, nil
	}
	var r struct {
		Roots []json.RawMessage `json:"roots"`
	}
	if err := json.Unmarshal(v, &r); err != nil {
		return nil, err
	}
	roots := []any{}
	for _, x := range r.Roots {
		var s string
		if json.Unmarshal(x, &s) == nil {
			roots = append(roots, map[string]any{"uri": rootURI(s)})
		} else {
			roots = append(roots, x)
		}
	}
	return map[string]any{"roots": roots}, nil
}

func samplingResult(text string) map[string]any {
	return map[string]any{"role": "assistant", "content": map[string]any{"type": "text", "text": text},
		"model": "agentwire-call (human)", "stopReason": "endTurn"}
}

// rootURI makes a file URI of a path; a URI is kept.
func rootURI(s string) string {
	if strings.Contains(s, "://") {
		return s
	}
	if abs, err := filepath.Abs(s); err == nil {
		s = abs
	}
	return (&url.URL{Scheme: "file", Path: filepath.ToSlash(s)}).String()
}

// prompter asks the user on the terminal: prompts on stderr (stdout is the
// result's), answers from stdin, one request at a time.
type prompter struct {
	in    io.Reader
	out   io.Writer
	mu    sync.Mutex // one request is asked at a time
	once  sync.Once
	lines chan string // closed at end of input
}

func (p *prompter) readLine(ctx context.Context) (string, error) {
	p.once.Do(func() {
		p.lines = make(chan string)
		// Reading the terminal cannot be interrupted: the reader goroutine
		// ends with the process (or at end of input).
		go func() {
			defer close(p.lines)
			r := bufio.NewReader(p.in)
			for {
				l, err := r.ReadString('\n')
				if l != "" || err == nil {
					p.lines <- strings.TrimRight(l, "\r\n")
				}
				if err != nil {
					return
				}
			}
		}()
	})
	select {
	case l, ok := <-p.lines:
		if !ok {
			return "", io.EOF
		}
		return l, nil
	case <-ctx.Done():
		fmt.Fprintln(p.out)
		return "", context.Cause(ctx)
	}
}

// errDeclined ends a form on :decline, errCancelled on :cancel or EOF.
var (
	errDeclined  = errors.New("declined")
	errCancelled = errors.New("cancelled")
)

func (p *prompter) line(ctx context.Context, prompt string) (string, error) {
	fmt.Fprint(p.out, prompt)
	l, err := p.readLine(ctx)
	if errors.Is(err, io.EOF) {
		fmt.Fprintln(p.out)
		return "", errCancelled
	}
	if err != nil {
		return "", err
	}
	switch strings.TrimSpace(l) {
	case ":decline":
		return "", errDeclined
	case ":cancel":
		return "", errCancelled
	}
	return l, nil
}

func (p *prompter) ask(ctx context.Context, method string, params json.RawMessage) (any, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch method {
	case mcp.MethodElicit:
		res, err := p.elicit(ctx, params)
		switch {
		case errors.Is(err, errDeclined):
			return map[string]any{"action": "decline"}, nil
		case errors.Is(err, errCancelled):
			return map[string]any{"action": "cancel"}, nil
		}
		return res, err
	case mcp.MethodSample:
		var sp struct {
			SystemPrompt string `json:"systemPrompt"`
			Messages     []struct {
				Role    string          `json:"role"`
				Content json.RawMessage `json:"content"`
			} `json:"messages"`
		}
		json.Unmarshal(params, &sp)
		fmt.Fprintln(p.out, "The server asks for a reply from your model (you answer in its place):")
		if sp.SystemPrompt != "" {
			fmt.Fprintf(p.out, "  system: %s\n", cutLine(sp.SystemPrompt, 400))
		}
		for _, m := range sp.Messages {
			var c struct {
				Type string `json:"type"`
				Text string `json:"text"`
			}
			json.Unmarshal(m.Content, &c)
			if c.Type != "text" {
				c.Text = "[" + c.Type + " content]"
			}
			fmt.Fprintf(p.out, "  %s: %s\n", m.Role, cutLine(c.Text, 400))
		}
		text, err := p.line(ctx, "reply (:decline refuses): ")
		if errors.Is(err, errDeclined) || errors.Is(err, errCancelled) {
			return nil, &jsonrpc.Error{Code: -1, Message: "User rejected sampling request"}
		}
		if err != nil {
			return nil, err
		}
		return samplingResult(text), nil
	}
	fmt.Fprintln(p.out, "The server asks for your roots (the directories it may work in).")
	l, err := p.line(ctx, "paths or URIs, separated by spaces (empty for none): ")
	if errors.Is(err, errDeclined) || errors.Is(err, errCancelled) {
		return nil, &jsonrpc.Error{Code: -1, Message: "User rejected the roots request"}
	}
	if err != nil {
		return nil, err
	}
	roots := []any{}
	for _, f := range strings.Fields(l) {
		roots = append(roots, map[string]any{"uri": rootURI(f)})
	}
	return map[string]any{"roots": roots}, nil
}

// elicit asks a form field by field, in the schema's order.
func (p *prompter) elicit(ctx context.Context, params json.RawMessage) (any, error) {
	var ep elicitParams
	json.Unmarshal(params, &ep)
	fmt.Fprintf(p.out, "The server asks: %s\n", cutLine(ep.Message, 1000))
	if ep.Mode == "url" {
		fmt.Fprintf(p.out, "  open %s\n", ep.URL)
		if _, err := p.line(ctx, "press Enter when done (:decline, :cancel): "); err != nil {
			return nil, err
		}
		return map[string]any{"action": "accept"}, nil
	}
	f := parseForm(ep.RequestedSchema)
	fmt.Fprintln(p.out, "  (an empty line takes the default or skips an optional field; :decline or :cancel refuses)")
	content := map[string]any{}
	for _, name := range f.order {
		fs := f.Properties[name]
		v, err := p.field(ctx, name, fs, f.required(name))
		if err != nil {
			return nil, err
		}
		if v != nil {
			content[name] = v
		}
	}
	return map[string]any{"action": "accept", "content": content}, nil
}

// field asks one field until the answer fits its type; nil skips it.
func (p *prompter) field(ctx context.Context, name string, fs fieldSchema, required bool) (any, error) {
	typ, _ := fs.Type.(string)
	var options []json.RawMessage
	var labels []string
	multi := typ == "array"
	switch {
	case len(fs.OneOf) > 0:
		for _, o := range fs.OneOf {
			options, labels = append(options, o.Const), append(labels, o.Title)
		}
	case len(fs.Enum) > 0:
		options = fs.Enum
		labels = fs.EnumNames
	case multi && fs.Items != nil && len(fs.Items.AnyOf) > 0:
		for _, o := range fs.Items.AnyOf {
			options, labels = append(options, o.Const), append(labels, o.Title)
		}
	case multi && fs.Items != nil:
		options = fs.Items.Enum
	}
	desc := fs.Title
	if desc == "" {
		desc = fs.Description
	}
	var b strings.Builder
	fmt.Fprintf(&b, "  %s", name)
	var notes []string
	if typ != "" {
		notes = append(notes, typ)
	}
	if required {
		notes = append(notes, "required")
	}
	if len(notes) > 0 {
		fmt.Fprintf(&b, " (%s)", strings.Join(notes, ", "))
	}
	if desc != "" {
		fmt.Fprintf(&b, ": %s", cutLine(desc, 200))
	}
	if len(options) > 0 {
		b.WriteString("\n")
		for i, o := range options {
			label := ""
			if i < len(labels) && labels[i] != "" {
				label = " " + labels[i]
			}
			fmt.Fprintf(&b, "      %d) %s%s\n", i+1, o, label)
		}
		if multi {
			b.WriteString("    numbers or values, separated by commas")
		} else {
			b.WriteString("    a number or a value")
		}
	}
	if len(fs.Default) > 0 {
		fmt.Fprintf(&b, " [%s]", fs.Default)
	}
	b.WriteString(": ")
	for {
		l, err := p.line(ctx, b.String())
		if err != nil {
			return nil, err
		}
		l = strings.TrimSpace(l)
		if l == "" {
			if len(fs.Default) > 0 {
				return fs.Default, nil
			}
			if !required {
				return nil, nil
			}
			fmt.Fprintln(p.out, "    this field is required")
			continue
		}
		v, err := fieldValue(l, typ, options, multi)
		if err == nil {
			return v, nil
		}
		fmt.Fprintf(p.out, "    %v\n", err)
	}
}

// fieldValue converts what was typed to the field's type.
func fieldValue(l, typ string, options []json.RawMessage, multi bool) (any, error) {
	pick := func(s string) (json.RawMessage, error) {
		s = strings.TrimSpace(s)
		if n, err := strconv.Atoi(s); err == nil && n >= 1 && n <= len(options) {
			return options[n-1], nil
		}
		for _, o := range options {
			var str string
			if json.Unmarshal(o, &str) == nil && str == s || string(o) == s {
				return o, nil
			}
		}
		return nil, fmt.Errorf("%q is not one of the options", s)
	}
	if multi {
		var picked []json.RawMessage
		for _, part := range strings.Split(l, ",") {
			if strings.TrimSpace(part) == "" {
				continue
			}
			if len(options) == 0 {
				b, _ := json.Marshal(strings.TrimSpace(part))
				picked = append(picked, b)
				continue
			}
			o, err := pick(part)
			if err != nil {
				return nil, err
			}
			picked = append(picked, o)
		}
		return picked, nil
	}
	if len(options) > 0 {
		return pick(l)
	}
	switch typ {
	case "integer":
		n, err := strconv.ParseInt(l, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("%q is not an integer", l)
		}
		return n, nil
	case "number":
		n, err := strconv.ParseFloat(l, 64)
		if err != nil {
			return nil, fmt.Errorf("%q is not a number", l)
		}
		return n, nil
	case "boolean":
		switch strings.ToLower(l) {
		case "y", "yes", "true", "1":
			return true, nil
		case "n", "no", "false", "0":
			return false, nil
		}
		return nil, fmt.Errorf("%q: answer yes or no", l)
	}
	return l, nil
}

// stdinTerminal reports whether stdin is a terminal a user can answer on.
func stdinTerminal() bool { return isTerminal(os.Stdin) }

// pausableDeadline is a context cancelled (with cause DeadlineExceeded)
// once d of unpaused time has passed.
type pausableDeadline struct {
	ctx    context.Context
	cancel context.CancelCauseFunc

	mu      sync.Mutex
	timer   *time.Timer
	left    time.Duration
	since   time.Time
	paused  int
	expired bool
}

func newPausableDeadline(parent context.Context, d time.Duration) *pausableDeadline {
	ctx, cancel := context.WithCancelCause(parent)
	p := &pausableDeadline{ctx: ctx, cancel: cancel, left: d, since: time.Now()}
	p.timer = time.AfterFunc(d, func() {
		p.mu.Lock()
		p.expired = true
		p.mu.Unlock()
		cancel(context.DeadlineExceeded)
	})
	return p
}

// pause stops the clock (nested pauses need as many resumes); nil-safe.
func (p *pausableDeadline) pause() {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.paused == 0 && !p.expired && p.timer.Stop() {
		p.left -= time.Since(p.since)
	}
	p.paused++
}

func (p *pausableDeadline) resume() {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.paused--
	if p.paused == 0 && !p.expired {
		p.since = time.Now()
		p.timer.Reset(max(p.left, 0))
	}
}

// stop releases the clock.
func (p *pausableDeadline) stop() {
	p.timer.Stop()
	p.cancel(context.Canceled)
}
