package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/agentwire/agentwire/mcp"
	"regexp"
	"slices"
	"strings"

	"github.com/agentwire/agentwire/jsonrpc"
	"github.com/agentwire/agentwire/rpc"
)

// ----- resources -----

// ReadRequest is one resources/read as a resource handler sees it.
type ReadRequest struct {
	URI string
	// Vars are the template's variables, for a resource read through a
	// ResourceTemplate.
	Vars            map[string]string
	ProtocolVersion string
}

// ResourceHandler reads a resource. ErrResourceNotFound (or nil contents)
// answers "Resource not found".
type ResourceHandler func(ctx context.Context, req *ReadRequest) ([]mcp.ResourceContents, error)

// ErrResourceNotFound is what a ResourceHandler returns for a URI it does
// not have: the client gets -32602 with data.uri (2026-07-28, SEP-2164;
// -32002 before).
var ErrResourceNotFound = errors.New("mcp: resource not found")

type registeredResource struct {
	res     mcp.Resource
	handler ResourceHandler
}

type registeredTemplate struct {
	tmpl    mcp.ResourceTemplate
	re      *regexp.Regexp
	vars    []string
	handler ResourceHandler
}

// AddResource registers (or replaces) a resource.
func (s *Server) AddResource(r mcp.Resource, h ResourceHandler) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.resources.put(r.URI, &registeredResource{res: r, handler: h})
	s.notifyLocked(kindResources)
}

// RemoveResource unregisters a resource.
func (s *Server) RemoveResource(uri string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.resources.remove(uri) {
		s.notifyLocked(kindResources)
	}
}

// watchUpdates registers a listen stream for ResourceUpdated.
func (s *Server) watchUpdates() chan string {
	ch := make(chan string, 64)
	s.mu.Lock()
	if s.updates == nil {
		s.updates = map[chan string]struct{}{}
	}
	s.updates[ch] = struct{}{}
	s.mu.Unlock()
	return ch
}

func (s *Server) unwatchUpdates(ch chan string) {
	s.mu.Lock()
	delete(s.updates, ch)
	s.mu.Unlock()
}

// AddResourceTemplate registers a template: reads of URIs that match it go
// to h with the variables in ReadRequest.Vars. A variable matches one path
// segment ({id}) or, written {+path}, any run of characters.
func (s *Server) AddResourceTemplate(t mcp.ResourceTemplate, h ResourceHandler) error {
	re, vars, err := compileTemplate(t.URITemplate)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.templates = append(s.templates, &registeredTemplate{tmpl: t, re: re, vars: vars, handler: h})
	s.notifyLocked(kindResources)
	return nil
}

var templateVar = regexp.MustCompile(`\{(\+?)([A-Za-z0-9_]+)\}`)

func compileTemplate(t string) (*regexp.Regexp, []string, error) {
	var b strings.Builder
	var vars []string
	b.WriteString("^")
	last := 0
	for _, m := range templateVar.FindAllStringSubmatchIndex(t, -1) {
		if strings.ContainsAny(t[last:m[0]], "{}") {
			return nil, nil, fmt.Errorf("mcp: unsupported URI template %q (only {var} and {+var})", t)
		}
		b.WriteString(regexp.QuoteMeta(t[last:m[0]]))
		if m[3] > m[2] { // {+var}: reserved expansion, slashes allowed
			b.WriteString("(.+)")
		} else {
			b.WriteString("([^/?#]+)")
		}
		vars = append(vars, t[m[4]:m[5]])
		last = m[1]
	}
	rest := t[last:]
	if strings.ContainsAny(rest, "{}") {
		return nil, nil, fmt.Errorf("mcp: unsupported URI template %q (only {var} and {+var})", t)
	}
	b.WriteString(regexp.QuoteMeta(rest))
	b.WriteString("$")
	re, err := regexp.Compile(b.String())
	return re, vars, err
}

// ResourceUpdated tells the clients subscribed to uri that it changed
// (legacy resources/subscribe connections, and 2026-07-28 listen streams
// with resourceSubscriptions), here and on the other instances of the
// fleet (Options.Bus).
func (s *Server) ResourceUpdated(uri string) {
	s.resourceUpdated(uri)
	s.fan.share(kindUpdated, uri)
}

// resourceUpdated tells this server's subscribers.
func (s *Server) resourceUpdated(uri string) {
	s.mu.Lock()
	for ch := range s.updates { // 2026-07-28 listen streams
		select {
		case ch <- uri:
		default: // a stream that is this far behind misses the update
		}
	}
	s.mu.Unlock()
	// Legacy subscribers (resources/subscribe): each told on its own,
	// bounded, so that a client that does not read holds up neither the
	// others nor the caller.
	s.legacy.updated(uri)
}

func (s *Server) listResources() []mcp.Resource {
	s.mu.Lock()
	defer s.mu.Unlock()
	return list(&s.resources, func(r *registeredResource) mcp.Resource { return r.res })
}

func (s *Server) listTemplates() []mcp.ResourceTemplate {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]mcp.ResourceTemplate, 0, len(s.templates))
	for _, t := range s.templates {
		out = append(out, t.tmpl)
	}
	return out
}

func (s *Server) hasResources() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.resources.len() > 0 || len(s.templates) > 0
}

func notFound(uri string, modern bool) error {
	code := jsonrpc.CodeInvalidParams
	if !modern {
		code = -32002 // the legacy revisions' resource-not-found
	}
	return jsonrpc.NewError(code, "Resource not found", map[string]any{"uri": uri})
}

func (ss *session) readResource(ctx context.Context, p *mcp.RequestParams, version string) (map[string]any, error) {
	uri, ok := jsonrpc.StringValue(p.URI)
	if !ok || uri == "" {
		return nil, mcp.InvalidParams("invalid params: resources/read needs a uri")
	}
	s := ss.srv
	req := &ReadRequest{URI: uri, ProtocolVersion: version}
	s.mu.Lock()
	var h ResourceHandler
	if r, ok := s.resources.get(uri); ok {
		h = r.handler
	} else {
		for _, t := range s.templates {
			if m := t.re.FindStringSubmatch(uri); m != nil {
				req.Vars = map[string]string{}
				for i, v := range t.vars {
					req.Vars[v] = m[i+1]
				}
				h = t.handler
				break
			}
		}
	}
	s.mu.Unlock()
	modern := mcp.IsModern(version)
	if h == nil {
		return nil, notFound(uri, modern)
	}
	contents, err := h(ctx, req)
	switch {
	case errors.Is(err, ErrResourceNotFound) || (err == nil && len(contents) == 0):
		return nil, notFound(uri, modern)
	case err != nil:
		return nil, err
	}
	return map[string]any{"contents": contents}, nil
}

// subscribe records (or, with on false, removes) a legacy subscription
// on this connection; it lasts until the connection ends.
func (ss *session) subscribe(conn *rpc.Conn, p *mcp.RequestParams, on bool) (any, error) {
	uri, ok := jsonrpc.StringValue(p.URI)
	if !ok || uri == "" {
		return nil, mcp.InvalidParams("invalid params: a uri is required")
	}
	if err := ss.srv.legacy.subscribe(conn, uri, on); err != nil {
		return nil, err
	}
	return struct{}{}, nil
}

// ----- prompts -----

// PromptRequest is one prompts/get as a prompt handler sees it; the
// required arguments have been checked.
type PromptRequest struct {
	Name            string
	Arguments       map[string]string
	ProtocolVersion string
	// Ask, Elicit, State and SetState get input from the client, as for
	// tools.
	inputs
}

// PromptHandler renders a prompt.
type PromptHandler func(ctx context.Context, req *PromptRequest) (*mcp.PromptResult, error)

type registeredPrompt struct {
	prompt  mcp.Prompt
	handler PromptHandler
}

// AddPrompt registers (or replaces) a prompt.
func (s *Server) AddPrompt(p mcp.Prompt, h PromptHandler) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.prompts.put(p.Name, &registeredPrompt{prompt: p, handler: h})
	s.notifyLocked(kindPrompts)
}

// RemovePrompt unregisters a prompt.
func (s *Server) RemovePrompt(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.prompts.remove(name) {
		s.notifyLocked(kindPrompts)
	}
}

func (s *Server) listPrompts() []mcp.Prompt {
	s.mu.Lock()
	defer s.mu.Unlock()
	return list(&s.prompts, func(p *registeredPrompt) mcp.Prompt { return p.prompt })
}

func (s *Server) hasPrompts() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.prompts.len() > 0
}

func (ss *session) getPrompt(ctx context.Context, req *rpc.Request, p *mcp.RequestParams, version string) (any, error) {
	name, ok := jsonrpc.StringValue(p.Name)
	if !ok || name == "" {
		return nil, mcp.InvalidParams("invalid params: prompts/get needs a prompt name")
	}
	s := ss.srv
	s.mu.Lock()
	rp, _ := s.prompts.get(name)
	s.mu.Unlock()
	if rp == nil {
		return nil, mcp.InvalidParams("unknown prompt: %s", name)
	}
	args := map[string]string{}
	if len(p.Arguments) > 0 && string(p.Arguments) != "null" {
		if err := json.Unmarshal(p.Arguments, &args); err != nil {
			return nil, mcp.InvalidParams("invalid params: prompt arguments must be strings: %v", err)
		}
	}
	for _, a := range rp.prompt.Arguments {
		if _, ok := args[a.Name]; a.Required && !ok {
			return nil, mcp.InvalidParams("invalid params: prompt %s needs the argument %q", name, a.Name)
		}
	}
	pr := &PromptRequest{Name: name, Arguments: args, ProtocolVersion: version}
	target := func() string { return stateTarget("prompts/get", name, p.Arguments) }
	if mcp.IsModern(version) {
		if err := s.parseInputs(p, target, &pr.inputs); err != nil {
			return nil, err
		}
	}
	pr.inputs.rpc = req
	res, err := rp.handler(ctx, pr)
	if ire, ok := asInputRequired(err); ok && pr.modern {
		return s.inputRequiredResult(ire, &pr.inputs, target())
	}
	if err != nil {
		return nil, err
	}
	if res == nil {
		res = &mcp.PromptResult{}
	}
	if res.Messages == nil {
		res.Messages = []mcp.PromptMessage{}
	}
	return res, nil
}

// ----- completion -----

// CompletionRequest is one completion/complete: which prompt argument or
// template variable, the value typed so far, and the other arguments
// already filled in.
type CompletionRequest struct {
	// RefType is "ref/prompt" (Name is the prompt) or "ref/resource" (URI
	// is the resource template).
	RefType  string
	Name     string
	URI      string
	Argument string
	Value    string
	Context  map[string]string
}

// CompletionHandler proposes values; at most 100 are sent.
type CompletionHandler func(ctx context.Context, req *CompletionRequest) ([]string, error)

// SetCompletion installs the handler of completion/complete and declares
// the completions capability.
func (s *Server) SetCompletion(h CompletionHandler) {
	s.mu.Lock()
	s.completion = h
	s.mu.Unlock()
}

func (ss *session) complete(ctx context.Context, raw []byte) (map[string]any, error) {
	var p struct {
		Ref struct {
			Type string `json:"type"`
			Name string `json:"name"`
			URI  string `json:"uri"`
		} `json:"ref"`
		Argument struct {
			Name  string `json:"name"`
			Value string `json:"value"`
		} `json:"argument"`
		Context struct {
			Arguments map[string]string `json:"arguments"`
		} `json:"context"`
	}
	if err := json.Unmarshal(raw, &p); err != nil || p.Ref.Type == "" || p.Argument.Name == "" {
		return nil, mcp.InvalidParams("invalid params: completion/complete needs ref and argument")
	}
	ss.srv.mu.Lock()
	h := ss.srv.completion
	ss.srv.mu.Unlock()
	var values []string
	if h != nil {
		v, err := h(ctx, &CompletionRequest{RefType: p.Ref.Type, Name: p.Ref.Name, URI: p.Ref.URI,
			Argument: p.Argument.Name, Value: p.Argument.Value, Context: p.Context.Arguments})
		if err != nil {
			return nil, err
		}
		values = v
	}
	total := len(values)
	if len(values) > 100 {
		values = values[:100]
	}
	if values == nil {
		values = []string{}
	}
	return map[string]any{"completion": map[string]any{"values": values, "total": total, "hasMore": total > len(values)}}, nil
}

// ----- logging -----

// setLevel is the legacy logging/setLevel: it sets this connection's
// threshold for notifications/message.
func (ss *session) setLevel(raw []byte) (any, error) {
	var p struct {
		Level string `json:"level"`
	}
	if json.Unmarshal(raw, &p) != nil || !slices.Contains(mcp.LogLevels, p.Level) {
		return nil, mcp.InvalidParams("invalid params: level must be one of %s", strings.Join(mcp.LogLevels, ", "))
	}
	if !ss.stateless { // over HTTP it cannot outlast its POST
		ss.mu.Lock()
		ss.logLevel = p.Level
		ss.mu.Unlock()
	}
	return struct{}{}, nil
}
