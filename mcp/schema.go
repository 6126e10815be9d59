package mcp

import (
	"encoding/json"
	"reflect"
	"strings"
)

// SchemaFor infers a JSON Schema for the arguments type of v: structs
// become objects whose properties are the JSON field names, required unless
// the field is a pointer or tagged omitempty; a `description:"…"` tag is
// copied. Strings, booleans, integers, numbers, slices and maps map to their
// JSON types; anything else is left unconstrained. A tool that needs more
// (enums, formats, bounds) sets Tool.InputSchema itself.
func SchemaFor(v any) json.RawMessage {
	s := schemaOf(reflect.TypeOf(v), 0)
	if s["type"] != "object" {
		s = map[string]any{"type": "object"}
	}
	b, _ := json.Marshal(s)
	return b
}

func schemaOf(t reflect.Type, depth int) map[string]any {
	if t == nil || depth > 8 {
		return map[string]any{}
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.String:
		return map[string]any{"type": "string"}
	case reflect.Bool:
		return map[string]any{"type": "boolean"}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return map[string]any{"type": "integer"}
	case reflect.Float32, reflect.Float64:
		return map[string]any{"type": "number"}
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 && t.Kind() == reflect.Slice {
			return map[string]any{"type": "string"} // []byte marshals as base64
		}
		return map[string]any{"type": "array", "items": schemaOf(t.Elem(), depth+1)}
	case reflect.Map:
		return map[string]any{"type": "object", "additionalProperties": schemaOf(t.Elem(), depth+1)}
	case reflect.Struct:
		props := map[string]any{}
		var required []string
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			if !f.IsExported() {
				continue
			}
			name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
			if name == "-" {
				continue
			}
			if name == "" {
				name = f.Name
			}
			ps := schemaOf(f.Type, depth+1)
			if d := f.Tag.Get("description"); d != "" {
				ps["description"] = d
			}
			props[name] = ps
			if f.Type.Kind() != reflect.Pointer && !strings.Contains(opts, "omitempty") {
				required = append(required, name)
			}
		}
		s := map[string]any{"type": "object", "properties": props}
		if len(required) > 0 {
			s["required"] = required
		}
		return s
	}
	return map[string]any{}
}
