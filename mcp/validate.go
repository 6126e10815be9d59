package mcp

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// argSchema is the part of a tool's inputSchema (JSON Schema) that typed
// tools check arguments against before their handler runs: type (one name
// or a list), required, properties, additionalProperties, items, enum and
// const, at any depth. Other keywords (formats, bounds, patterns,
// combinators, $ref) are not checked; the handler sees whatever they
// would have refused. The MCP specification asks servers to validate tool
// inputs (2025-11-25 server/tools, "Security Considerations"), and a
// failure is a tool execution error, reported in the result with isError
// so that the model can read it and correct its call.
type argSchema struct {
	never      bool     // the schema false: no value is valid
	types      []string // empty: any type
	required   []string
	properties map[string]*argSchema
	order      []string   // properties in the schema's order, for messages
	additional *argSchema // additionalProperties as a schema
	closed     bool       // additionalProperties: false
	items      *argSchema
	enum       []string // canonical JSON of each allowed value
	constant   *string  // canonical JSON of const
}

// maxSchemaDepth bounds how deep a schema is followed; deeper parts are
// not checked.
const maxSchemaDepth = 32

// compileArgSchema reads a tool's inputSchema; nil when it cannot be read
// (nothing is checked then).
func compileArgSchema(raw json.RawMessage) *argSchema {
	s, ok := parseArgSchema(raw, 0)
	if !ok {
		return nil
	}
	return s
}

func parseArgSchema(raw json.RawMessage, depth int) (*argSchema, bool) {
	raw = bytes.TrimSpace(raw)
	switch string(raw) {
	case "true", "":
		return &argSchema{}, true
	case "false":
		return &argSchema{never: true}, true
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil {
		return nil, false
	}
	s := &argSchema{}
	if depth > maxSchemaDepth {
		return s, true
	}
	if t, ok := m["type"]; ok {
		var one string
		if json.Unmarshal(t, &one) == nil {
			s.types = []string{one}
		} else if json.Unmarshal(t, &s.types) != nil {
			return nil, false
		}
	}
	if string(bytes.TrimSpace(m["nullable"])) == "true" && len(s.types) > 0 {
		s.types = append(s.types, "null") // the OpenAPI spelling of ["T","null"]
	}
	if r, ok := m["required"]; ok && json.Unmarshal(r, &s.required) != nil {
		return nil, false
	}
	if p, ok := m["properties"]; ok {
		var props map[string]json.RawMessage
		if json.Unmarshal(p, &props) != nil {
			return nil, false
		}
		s.properties = make(map[string]*argSchema, len(props))
		for name, ps := range props {
			sub, ok := parseArgSchema(ps, depth+1)
			if !ok {
				return nil, false
			}
			s.properties[name] = sub
		}
		s.order = objectKeys(p)
	}
	if a, ok := m["additionalProperties"]; ok {
		sub, ok := parseArgSchema(a, depth+1)
		if !ok {
			return nil, false
		}
		if sub.never {
			s.closed = true
		} else {
			s.additional = sub
		}
	}
	if it, ok := m["items"]; ok {
		if bytes.HasPrefix(bytes.TrimSpace(it), []byte("[")) {
			// The older tuple form: not checked.
		} else if sub, ok := parseArgSchema(it, depth+1); ok {
			s.items = sub
		} else {
			return nil, false
		}
	}
	if e, ok := m["enum"]; ok {
		var values []json.RawMessage
		if json.Unmarshal(e, &values) != nil {
			return nil, false
		}
		for _, v := range values {
			s.enum = append(s.enum, canonicalJSON(v))
		}
	}
	if c, ok := m["const"]; ok {
		v := canonicalJSON(c)
		s.constant = &v
	}
	return s, true
}

// objectKeys lists an object's keys in the order they are written.
func objectKeys(raw json.RawMessage) []string {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil
	}
	var keys []string
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return keys
		}
		keys = append(keys, t.(string))
		var skip json.RawMessage
		if dec.Decode(&skip) != nil {
			return keys
		}
	}
	return keys
}

// canonicalJSON re-encodes a value so that equal values compare equal
// (object keys sorted, numbers as float64, no spaces).
func canonicalJSON(raw json.RawMessage) string {
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return string(raw)
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// maxArgProblems bounds what one error result lists.
const maxArgProblems = 10

// check returns what is wrong with args, one sentence each; none when
// they conform. Absent arguments are an empty object.
func (s *argSchema) check(args json.RawMessage) []string {
	if len(bytes.TrimSpace(args)) == 0 {
		args = json.RawMessage("{}")
	}
	dec := json.NewDecoder(bytes.NewReader(args))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return []string{"the arguments are not valid JSON: " + err.Error()}
	}
	var problems []string
	s.walk(v, "", &problems)
	if len(problems) > maxArgProblems {
		n := len(problems) - maxArgProblems
		problems = append(problems[:maxArgProblems], fmt.Sprintf("and %d more", n))
	}
	return problems
}

// walk checks v, found at path ("" for the arguments themselves).
func (s *argSchema) walk(v any, path string, problems *[]string) {
	if len(*problems) > maxArgProblems {
		return
	}
	what := "the arguments"
	if path != "" {
		what = "argument " + strconv.Quote(path)
	}
	if s.never {
		*problems = append(*problems, what+" is not accepted")
		return
	}
	if len(s.types) > 0 && !slices.ContainsFunc(s.types, func(t string) bool { return hasType(v, t) }) {
		*problems = append(*problems, fmt.Sprintf("%s must be %s, not %s", what, typeList(s.types), article(jsonType(v))))
		return
	}
	if s.constant != nil || s.enum != nil {
		b, _ := json.Marshal(v)
		got := canonicalJSON(b)
		if s.constant != nil && got != *s.constant {
			*problems = append(*problems, fmt.Sprintf("%s must be %s", what, *s.constant))
		}
		if s.enum != nil && !slices.Contains(s.enum, got) {
			*problems = append(*problems, fmt.Sprintf("%s must be one of %s", what, strings.Join(s.enum, ", ")))
		}
	}
	switch x := v.(type) {
	case map[string]any:
		for _, name := range s.required {
			if _, ok := x[name]; !ok {
				*problems = append(*problems, fmt.Sprintf("argument %q is required but missing", join(path, name)))
			}
		}
		names := make([]string, 0, len(x))
		for name := range x {
			names = append(names, name)
		}
		slices.Sort(names)
		for _, name := range names {
			switch sub, ok := s.properties[name]; {
			case ok:
				sub.walk(x[name], join(path, name), problems)
			case s.closed:
				msg := fmt.Sprintf("argument %q is not accepted", join(path, name))
				if len(s.order) > 0 {
					msg += " (accepted: " + strings.Join(s.order, ", ") + ")"
				}
				*problems = append(*problems, msg)
			case s.additional != nil:
				s.additional.walk(x[name], join(path, name), problems)
			}
		}
	case []any:
		if s.items != nil {
			for i, item := range x {
				s.items.walk(item, path+"["+strconv.Itoa(i)+"]", problems)
			}
		}
	}
}

func join(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

func jsonType(v any) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case string:
		return "string"
	case json.Number:
		if isInteger(x) {
			return "integer"
		}
		return "number"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	}
	return "value"
}

// hasType reports whether v is of the JSON Schema type t; an integer is a
// number whose fractional part is zero (1.0 included).
func hasType(v any, t string) bool {
	got := jsonType(v)
	switch t {
	case "number":
		return got == "number" || got == "integer"
	case "integer", "null", "boolean", "string", "array", "object":
		return got == t
	}
	return true // a type this check does not know: not refused
}

// isInteger reports whether a JSON number has no fractional part, from its
// digits alone: 2.50e1 and 1e1000000 are integers, 1.5 and 1e-1000000 are
// not. No float or big number is built, so a huge exponent costs nothing.
func isInteger(n json.Number) bool {
	s := strings.TrimPrefix(string(n), "-")
	if !strings.ContainsAny(s, ".eE") {
		return true
	}
	mant, exp, _ := strings.Cut(strings.ToLower(s), "e")
	intPart, frac, _ := strings.Cut(mant, ".")
	digits := strings.TrimRight(intPart+frac, "0")
	if strings.Trim(digits, "0") == "" {
		return true // zero
	}
	// The value is digits × 10^(e - len(frac) + trailing zeros).
	shift := int64(len(intPart+frac)-len(digits)) - int64(len(frac))
	e, neg := strings.CutPrefix(strings.TrimPrefix(exp, "+"), "-")
	e = strings.TrimLeft(e, "0")
	if len(e) > 15 {
		return !neg // far beyond any fraction the digits could have
	}
	v, _ := strconv.ParseInt("0"+e, 10, 64)
	if neg {
		v = -v
	}
	return v+shift >= 0
}

func article(t string) string {
	switch t {
	case "integer", "array", "object":
		return "an " + t
	case "null":
		return "null"
	}
	return "a " + t
}

func typeList(types []string) string {
	out := make([]string, len(types))
	for i, t := range types {
		out[i] = article(t)
	}
	if len(out) == 1 {
		return out[0]
	}
	return strings.Join(out[:len(out)-1], ", ") + " or " + out[len(out)-1]
}
