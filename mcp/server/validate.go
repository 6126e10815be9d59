package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/agentwire/agentwire/jsonrpc"
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
// they conform. Absent arguments are an empty object. It works on the raw
// bytes, which the rpc layer has already checked to be valid JSON without
// repeated keys (they are not checked again: on invalid input the walk
// neither panics nor reads past args, but what it reports is
// unspecified): nothing is decoded or copied unless something is wrong
// (or enum/const must compare a value), because a tool call is on every
// MCP server's hot path and its arguments may be most of a 4 MiB body.
func (s *argSchema) check(args json.RawMessage) []string {
	args = bytes.TrimSpace(args)
	if len(args) == 0 {
		args = json.RawMessage("{}")
	}
	var problems []string
	var buf [maxSchemaDepth + 1]pathStep // walk goes no deeper than the schema
	s.walk(args, buf[:0], &problems)
	if len(problems) > maxArgProblems {
		n := len(problems) - maxArgProblems
		problems = append(problems[:maxArgProblems], fmt.Sprintf("and %d more", n))
	}
	return problems
}

// argPath is where a value stands in the arguments (empty for the
// arguments themselves): member names and array indexes, in a buffer of
// check's, built into a string only for a message.
type argPath []pathStep

type pathStep struct {
	key   []byte // a member's name, or nil for an array element
	index int
}

func (p argPath) String() string {
	out := ""
	for _, st := range p {
		if st.key == nil {
			out += "[" + strconv.Itoa(st.index) + "]"
		} else {
			out = join(out, string(st.key))
		}
	}
	return out
}

func (p argPath) describe() string {
	if len(p) == 0 {
		return "the arguments"
	}
	return "argument " + strconv.Quote(p.String())
}

// walk checks the raw value v, found at path.
func (s *argSchema) walk(v []byte, path argPath, problems *[]string) {
	if len(*problems) > maxArgProblems {
		return
	}
	if s.never {
		*problems = append(*problems, path.describe()+" is not accepted")
		return
	}
	got := rawJSONType(v)
	if len(s.types) > 0 && !slices.ContainsFunc(s.types, func(t string) bool { return typeMatches(got, t) }) {
		*problems = append(*problems, fmt.Sprintf("%s must be %s, not %s", path.describe(), typeList(s.types), article(got)))
		return
	}
	if s.constant != nil || s.enum != nil {
		c := canonicalJSON(v)
		if s.constant != nil && c != *s.constant {
			*problems = append(*problems, fmt.Sprintf("%s must be %s", path.describe(), *s.constant))
		}
		if s.enum != nil && !slices.Contains(s.enum, c) {
			*problems = append(*problems, fmt.Sprintf("%s must be one of %s", path.describe(), strings.Join(s.enum, ", ")))
		}
	}
	switch got {
	case "object":
		var seen []bool
		if len(s.required) > 0 {
			var buf [16]bool
			seen = buf[:0]
			if len(s.required) > len(buf) {
				seen = make([]bool, 0, len(s.required))
			}
			seen = seen[:len(s.required)]
		}
		jsonrpc.EachMember(v, func(key, value []byte) bool {
			for i, name := range s.required {
				if !seen[i] && string(key) == name {
					seen[i] = true
				}
			}
			switch sub, ok := s.properties[string(key)]; {
			case ok:
				sub.walk(value, append(path, pathStep{key: key}), problems)
			case s.closed:
				msg := fmt.Sprintf("argument %q is not accepted", join(path.String(), string(key)))
				if len(s.order) > 0 {
					msg += " (accepted: " + strings.Join(s.order, ", ") + ")"
				}
				*problems = append(*problems, msg)
			case s.additional != nil:
				s.additional.walk(value, append(path, pathStep{key: key}), problems)
			}
			return true
		})
		for i, name := range s.required {
			if !seen[i] {
				*problems = append(*problems, fmt.Sprintf("argument %q is required but missing", join(path.String(), name)))
			}
		}
	case "array":
		if s.items != nil {
			n := 0
			jsonrpc.EachElement(v, func(item []byte) bool {
				s.items.walk(item, append(path, pathStep{index: n}), problems)
				n++
				return true
			})
		}
	}
}

// rawJSONType names the JSON Schema type of a raw value.
func rawJSONType(v []byte) string {
	if len(v) == 0 {
		return "value"
	}
	switch v[0] {
	case '{':
		return "object"
	case '[':
		return "array"
	case '"':
		return "string"
	case 't', 'f':
		return "boolean"
	case 'n':
		return "null"
	}
	if bytes.IndexAny(v, ".eE") < 0 || isInteger(json.Number(v)) {
		return "integer"
	}
	return "number"
}

// typeMatches reports whether a value of type got is of the JSON Schema
// type want; an integer is a number whose fractional part is zero (1.0
// included).
func typeMatches(got, want string) bool {
	switch want {
	case "number":
		return got == "number" || got == "integer"
	case "integer", "null", "boolean", "string", "array", "object":
		return got == want
	}
	return true // a type this check does not know: not refused
}

func join(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
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
