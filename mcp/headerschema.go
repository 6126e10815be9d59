package mcp

import (
	"encoding/json"
	"regexp"
	"strings"

	"github.com/agentwire/agentwire/jsonrpc"
)

// Tool arguments annotated with x-mcp-header travel in Mcp-Param-{Name}
// headers too (2026-07-28 transports, SEP-2243). An annotation counts only
// on a schema reached from the root through properties alone, on a
// property of type string, integer or boolean, with a header name that is
// an HTTP token, unique in the tool (case-insensitively). "Invalid
// annotations" make the tool invalid: clients drop it from tools/list.

// ArgPathSep joins the property names of an argument's path into a map key.
const ArgPathSep = "\x00"

var headerToken = regexp.MustCompile("^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")

// SchemaHeaders returns the annotated arguments of a tool's input schema
// (path -> header name), and whether the annotations are valid.
func SchemaHeaders(schema json.RawMessage) (map[string]string, bool) {
	var root any
	if len(schema) == 0 || json.Unmarshal(schema, &root) != nil {
		return nil, true
	}
	var out map[string]string
	seen := map[string]bool{}
	valid := true
	// The path to a node is a list linked towards the root, so that going
	// one property deeper costs the same at any depth (copying the path at
	// every level was quadratic in a deeply nested schema's size); it is
	// joined only for an annotation, whose key holds it anyway.
	var walk func(node any, path *schemaPath, reachable bool)
	walk = func(node any, path *schemaPath, reachable bool) {
		switch n := node.(type) {
		case []any:
			for _, v := range n {
				walk(v, path, false)
			}
		case map[string]any:
			if h, ok := n["x-mcp-header"]; ok {
				name, isString := h.(string)
				typ, _ := n["type"].(string)
				switch {
				case !reachable || path == nil || !isString || !headerToken.MatchString(name),
					typ != "string" && typ != "integer" && typ != "boolean",
					seen[strings.ToLower(name)]:
					valid = false
				default:
					seen[strings.ToLower(name)] = true
					if out == nil {
						out = map[string]string{}
					}
					out[path.join()] = name
				}
			}
			for k, v := range n {
				switch k {
				case "const", "enum", "default", "examples", "x-mcp-header":
					continue // data, not schemas
				case "properties":
					if props, ok := v.(map[string]any); ok {
						for name, sub := range props {
							walk(sub, &schemaPath{parent: path, name: name, n: path.len() + 1}, reachable)
						}
						continue
					}
				}
				walk(v, path, false)
			}
		}
	}
	walk(root, nil, true)
	if !valid {
		return nil, false
	}
	return out, true
}

// schemaPath is the property names from the root to a schema, last first.
type schemaPath struct {
	parent *schemaPath
	name   string
	n      int // names on the path
}

func (p *schemaPath) len() int {
	if p == nil {
		return 0
	}
	return p.n
}

// join returns the names root first, joined with pathSep.
func (p *schemaPath) join() string {
	names := make([]string, p.len())
	for q := p; q != nil; q = q.parent {
		names[q.n-1] = q.name
	}
	return strings.Join(names, ArgPathSep)
}

// ToolHeaderMap maps each tool that has valid x-mcp-header arguments to
// them; tools with invalid annotations map to nil (and are reported).
func ToolHeaderMap(tools []Tool) (map[string]map[string]string, map[string]bool) {
	m, invalid := map[string]map[string]string{}, map[string]bool{}
	for _, t := range tools {
		h, ok := SchemaHeaders(t.InputSchema)
		switch {
		case !ok:
			invalid[t.Name] = true
		case h != nil:
			m[t.Name] = h
		}
	}
	return m, invalid
}

// ArgAt returns the argument at path (a key of SchemaHeaders' map) in a
// tool call's arguments, or nil.
func ArgAt(args map[string]json.RawMessage, path string) json.RawMessage {
	steps := strings.Split(path, ArgPathSep)
	v, ok := args[steps[0]]
	if !ok {
		return nil
	}
	for _, step := range steps[1:] {
		var next json.RawMessage
		jsonrpc.EachMember(v, func(key, value []byte) bool {
			if string(key) == step {
				next = value
			}
			return true
		})
		if next == nil {
			return nil
		}
		v = next
	}
	return v
}
