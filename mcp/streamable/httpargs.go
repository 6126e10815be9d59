package streamable

import (
	"encoding/json"
	"github.com/agentwire/agentwire/mcp"
	"strings"
)

// argAtStrict is argAt for a server checking headers: a key on the path
// that differs from another only in case is reported, as a handler
// decoding into a Go struct would not read the same value.
func argAtStrict(args map[string]json.RawMessage, path string) (json.RawMessage, string) {
	steps := strings.Split(path, mcp.ArgPathSep)
	if k := caseAmbiguousIn(args, steps[0]); k != "" {
		return nil, k
	}
	v, ok := args[steps[0]]
	if !ok {
		return nil, ""
	}
	for _, step := range steps[1:] {
		var obj map[string]json.RawMessage
		if json.Unmarshal(v, &obj) != nil {
			return nil, ""
		}
		if k := caseAmbiguousIn(obj, step); k != "" {
			return nil, k
		}
		if v, ok = obj[step]; !ok {
			return nil, ""
		}
	}
	return v, ""
}
