package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/agentwire/agentwire/jsonrpc"
	"github.com/agentwire/agentwire/mcp"
)

const (
	ruleTools    = "MCP tools: a tool not annotated readOnlyHint: true is presumed to modify its environment; called only with --call-tools=all"
	ruleToolCall = "MCP tools/call: a result, an error result or a JSON-RPC error is an answer (input_required too, in 2026-07-28); a call past its time is cancelled"
)

// readOnly says whether a tool is annotated readOnlyHint: true. The spec's
// defaults presume everything else may write, delete or reach out.
func readOnly(t mcp.Tool) bool {
	return t.Annotations != nil && t.Annotations.ReadOnlyHint != nil && *t.Annotations.ReadOnlyHint
}

// checkCallTools calls the tools --call-tools allows, one row each, on a
// live server: a tool that kills or hangs the server is blamed for it, and
// a fresh process serves the tools after it.
func (c *checker) checkCallTools(rule string) string {
	ctx, cancel := c.step(2 * c.opts.requestTimeout)
	tools, err := c.sess.ListTools(ctx)
	cancel()
	if err != nil {
		if isAnswer(err) {
			c.add("call tools", warn, "tools/list: "+answerNote(err), rule)
			return ""
		}
		result, ev, state := c.noAnswer("tools/list", err)
		c.add("call tools", result, ev, rule)
		return state
	}
	type call struct {
		name string
		args map[string]any
	}
	var calls []call
	var notReadOnly, skipped, unfillable []string
	for _, t := range tools {
		switch {
		case c.opts.skipTools[t.Name]:
			skipped = append(skipped, t.Name)
			continue
		case c.opts.callTools != callAll && !readOnly(t):
			notReadOnly = append(notReadOnly, t.Name)
			continue
		}
		args, why := fillArgs(t.InputSchema)
		if why != "" {
			unfillable = append(unfillable, fmt.Sprintf("%s (%s)", t.Name, why))
			continue
		}
		calls = append(calls, call{t.Name, args})
	}
	names := make([]string, len(calls))
	for i, cl := range calls {
		names[i] = cl.name
	}
	ev := fmt.Sprintf("%d tool(s) listed; calling %d", len(tools), len(calls))
	if len(calls) > 0 {
		ev += ": " + strings.Join(names, ", ")
	}
	if c.opts.callTools == callAll {
		ev += " (--call-tools=all: read-only or not)"
	}
	if len(notReadOnly) > 0 {
		ev += "; not called, not annotated readOnlyHint: true (--call-tools=all calls them): " + strings.Join(notReadOnly, ", ")
	}
	if len(skipped) > 0 {
		ev += "; skipped by --skip-tools: " + strings.Join(skipped, ", ")
	}
	if len(unfillable) > 0 {
		ev += "; not called, arguments not fillable from the schema: " + strings.Join(unfillable, ", ")
	}
	c.add("call tools", info, ev, rule)

	state := ""
	for _, cl := range calls {
		row := "tool " + cl.name
		if c.sess == nil {
			c.add(row, notRun, c.lost, ruleToolCall)
			continue
		}
		from := len(c.results)
		state = c.callTool(row, cl.name, cl.args, ruleToolCall)
		if state != "" && state != healthOK {
			c.replace("tools/call "+cl.name, state, from)
			state = ""
		}
	}
	return state
}

// callTool calls one tool within --tool-timeout and reports what came
// back. A call past the limit is cancelled; if the server goes on
// answering, that is a warning with the evidence, and the loop goes on.
func (c *checker) callTool(row, name string, args map[string]any, rule string) string {
	sess := c.sess
	before := sess.Client().Stats().LateResponses
	ctx, cancel := c.step(c.opts.toolTimeout)
	t0 := time.Now()
	res, err := sess.CallTool(ctx, name, args)
	took := time.Since(t0)
	cancel()
	var je *jsonrpc.Error
	switch {
	case err == nil:
		ev := "a result in " + millis(took)
		if res.IsError {
			ev = "an error result (isError) in " + millis(took)
			for _, ct := range res.Content {
				if ct.Type == "text" && ct.Text != "" {
					ev += fmt.Sprintf(": %q", clip(ct.Text, 80))
					break
				}
			}
		}
		c.add(row, pass, ev, rule)
		return ""
	case errors.Is(err, mcp.ErrInputRequired):
		c.add(row, pass, "input_required in "+millis(took)+": the server asks the client for input, a valid 2026-07-28 answer (check gives none)", rule)
		return ""
	case errors.As(err, &je):
		c.add(row, pass, fmt.Sprintf("a JSON-RPC error in %s: %d %q", millis(took), je.Code, clip(je.Message, 80)), rule)
		return ""
	case errors.Is(err, context.DeadlineExceeded) && c.ctx.Err() == nil:
		t1 := time.Now()
		state := c.health()
		waited := time.Since(t1)
		late := sess.Client().Stats().LateResponses - before
		limit := fmt.Sprintf("no result within %v (--tool-timeout)", c.opts.toolTimeout)
		switch state {
		case healthOK:
			ev := limit + "; cancelled, and the server kept answering"
			if late > 0 {
				ev += " (its response came after the cancellation)"
			}
			c.add(row, warn, ev, rule)
		case healthDead:
			c.add(row, fail, limit+"; the server died after the cancellation ("+deathNote(sess.Client().Process())+")", rule)
		default:
			c.add(row, warn, fmt.Sprintf("%s; after the cancellation the server answered nothing for %s (still running): the call was not stopped", limit, millis(waited)), rule)
		}
		return state
	}
	result, ev, state := c.noAnswer("tools/call "+name, err)
	c.add(row, result, ev, rule)
	return state
}

// fillArgs builds arguments for a tool from its input schema: every
// required property, from const, default, enum or examples when given,
// else a value of the first type that can be made (type lists, anyOf and
// oneOf are tried in order; allOf is merged). why says what could not be
// filled.
func fillArgs(schema json.RawMessage) (args map[string]any, why string) {
	if len(schema) == 0 || string(schema) == "null" {
		return map[string]any{}, ""
	}
	var s map[string]any
	if err := json.Unmarshal(schema, &s); err != nil {
		return nil, "the input schema is not a JSON object"
	}
	if _, ok := s["type"]; !ok {
		s["type"] = "object"
	}
	v, why := fillValue(s, s, 0)
	if why != "" {
		return nil, why
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, "the input schema is not an object"
	}
	return m, ""
}

func fillValue(root, s map[string]any, depth int) (any, string) {
	if depth > 8 {
		return nil, "nested too deeply"
	}
	if v, ok := s["const"]; ok {
		return v, ""
	}
	if v, ok := s["default"]; ok {
		return v, ""
	}
	if e, ok := s["enum"].([]any); ok && len(e) > 0 {
		for _, v := range e {
			if v != nil {
				return v, ""
			}
		}
		return e[0], ""
	}
	if ex, ok := s["examples"].([]any); ok && len(ex) > 0 {
		return ex[0], ""
	}
	if ref, ok := s["$ref"].(string); ok {
		target, ok := resolveRef(root, ref)
		if !ok {
			return nil, "$ref " + ref + " is not in the schema"
		}
		merged := without(s, "$ref")
		mergeSchema(merged, target)
		return fillValue(root, merged, depth+1)
	}
	if all, ok := s["allOf"].([]any); ok {
		merged := without(s, "allOf")
		for _, a := range all {
			if am, ok := a.(map[string]any); ok {
				mergeSchema(merged, am)
			}
		}
		return fillValue(root, merged, depth+1)
	}
	for _, key := range []string{"anyOf", "oneOf"} {
		alts, ok := s[key].([]any)
		if !ok {
			continue
		}
		base := without(s, key)
		last := key + " is empty"
		for _, a := range alts {
			am, ok := a.(map[string]any)
			if !ok {
				continue
			}
			merged := without(base)
			mergeSchema(merged, am)
			v, why := fillValue(root, merged, depth+1)
			if why == "" {
				return v, ""
			}
			last = why
		}
		return nil, key + ": no alternative can be filled (" + last + ")"
	}
	var types []string
	switch t := s["type"].(type) {
	case string:
		types = []string{t}
	case []any:
		for _, x := range t {
			if xs, ok := x.(string); ok && xs != "null" {
				types = append(types, xs)
			}
		}
		if len(types) == 0 {
			types = []string{"null"}
		}
	case nil:
		switch {
		case s["properties"] != nil || s["required"] != nil:
			types = []string{"object"}
		case s["items"] != nil:
			types = []string{"array"}
		default:
			types = []string{"string"} // any value will do
		}
	}
	last := "no type"
	for _, t := range types {
		v, why := fillType(root, t, s, depth)
		if why == "" {
			return v, ""
		}
		last = why
	}
	return nil, last
}

func fillType(root map[string]any, t string, s map[string]any, depth int) (any, string) {
	num := func(key string) (float64, bool) {
		f, ok := s[key].(float64)
		return f, ok
	}
	switch t {
	case "string":
		v := "agentwire"
		switch s["format"] {
		case "uri", "url", "iri":
			v = "https://example.com/"
		case "email":
			v = "agentwire@example.com"
		case "date-time":
			v = "2026-01-01T00:00:00Z"
		case "date":
			v = "2026-01-01"
		case "time":
			v = "00:00:00Z"
		case "uuid":
			v = "00000000-0000-4000-8000-000000000000"
		}
		if n, ok := num("minLength"); ok && float64(len(v)) < n {
			v += strings.Repeat("x", int(n)-len(v))
		}
		if n, ok := num("maxLength"); ok && float64(len(v)) > n {
			v = v[:int(math.Max(n, 0))]
		}
		return v, ""
	case "integer", "number":
		v := 1.0
		if n, ok := num("minimum"); ok && v < n {
			v = n
		}
		if n, ok := num("exclusiveMinimum"); ok && v <= n {
			v = n + 1
		}
		if n, ok := num("maximum"); ok && v > n {
			v = n
		}
		if n, ok := num("exclusiveMaximum"); ok && v >= n {
			v = n - 1
		}
		if t == "integer" {
			v = math.Ceil(v)
			return int64(v), ""
		}
		return v, ""
	case "boolean":
		return false, ""
	case "null":
		return nil, ""
	case "array":
		n := 0
		if m, ok := num("minItems"); ok {
			n = int(m)
		}
		out := []any{}
		prefix, _ := s["prefixItems"].([]any)
		for i := 0; i < n; i++ {
			var item map[string]any
			if i < len(prefix) {
				item, _ = prefix[i].(map[string]any)
			} else {
				item, _ = s["items"].(map[string]any)
			}
			if item == nil {
				item = map[string]any{}
			}
			v, why := fillValue(root, item, depth+1)
			if why != "" {
				return nil, "array items: " + why
			}
			out = append(out, v)
		}
		return out, ""
	case "object":
		props, _ := s["properties"].(map[string]any)
		req, _ := s["required"].([]any)
		out := map[string]any{}
		names := make([]string, 0, len(req))
		for _, r := range req {
			if name, ok := r.(string); ok {
				names = append(names, name)
			}
		}
		sort.Strings(names)
		for _, name := range names {
			ps, _ := props[name].(map[string]any)
			if ps == nil {
				ps, _ = s["additionalProperties"].(map[string]any)
			}
			if ps == nil {
				ps = map[string]any{}
			}
			v, why := fillValue(root, ps, depth+1)
			if why != "" {
				return nil, name + ": " + why
			}
			out[name] = v
		}
		return out, ""
	}
	return nil, "type " + t + " is unknown"
}

// without copies a schema without the given keys.
func without(s map[string]any, keys ...string) map[string]any {
	m := make(map[string]any, len(s))
	for k, v := range s {
		m[k] = v
	}
	for _, k := range keys {
		delete(m, k)
	}
	return m
}

// mergeSchema adds b's constraints to a: properties and required are
// united, any other key of b wins.
func mergeSchema(a, b map[string]any) {
	for k, v := range b {
		switch k {
		case "properties":
			pa, _ := a[k].(map[string]any)
			pa = without(pa)
			if pb, ok := v.(map[string]any); ok {
				for name, ps := range pb {
					pa[name] = ps
				}
			}
			a[k] = pa
		case "required":
			ra, _ := a[k].([]any)
			rb, _ := v.([]any)
			a[k] = append(append([]any{}, ra...), rb...)
		default:
			a[k] = v
		}
	}
}

// resolveRef finds a local reference ("#/$defs/Name", "#/definitions/x")
// in the root schema; other references are not followed.
func resolveRef(root map[string]any, ref string) (map[string]any, bool) {
	path, ok := strings.CutPrefix(ref, "#")
	if !ok {
		return nil, false
	}
	cur := any(root)
	for _, part := range strings.Split(strings.TrimPrefix(path, "/"), "/") {
		if part == "" {
			continue
		}
		part = strings.ReplaceAll(strings.ReplaceAll(part, "~1", "/"), "~0", "~")
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		if cur, ok = m[part]; !ok {
			return nil, false
		}
	}
	m, ok := cur.(map[string]any)
	return m, ok
}
