package mcp

import (
	"encoding/json"
	"reflect"
	"strings"
)

// SchemaFor infers a JSON Schema for the arguments type of v: structs
// become objects whose properties are the JSON field names, required unless
// the field is a pointer or tagged omitempty (the fields of an embedded
// struct are the struct's own, as encoding/json has them); a
// `description:"…"` tag is copied. Strings, booleans, integers, numbers, slices and maps map to their
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
		structFields(t, depth, true, props, &required)
		s := map[string]any{"type": "object", "properties": props}
		if len(required) > 0 {
			s["required"] = required
		}
		return s
	}
	return map[string]any{}
}

// structFields adds the properties of t's fields to props. The fields of
// an embedded struct without a JSON name are its own, as encoding/json
// has them; they are required only when the embedding is (not through a
// pointer). A name already taken by a shallower field is not replaced.
func structFields(t reflect.Type, depth int, req bool, props map[string]any, required *[]string) {
	var embedded []reflect.StructField
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" {
			continue
		}
		if f.Anonymous && name == "" {
			et := f.Type
			if et.Kind() == reflect.Pointer {
				et = et.Elem()
			}
			if et.Kind() == reflect.Struct {
				embedded = append(embedded, f)
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		if _, ok := props[name]; ok {
			continue
		}
		ps := schemaOf(f.Type, depth+1)
		if d := f.Tag.Get("description"); d != "" {
			ps["description"] = d
		}
		props[name] = ps
		if req && f.Type.Kind() != reflect.Pointer && !strings.Contains(opts, "omitempty") {
			*required = append(*required, name)
		}
	}
	for _, f := range embedded {
		if depth >= 8 {
			break
		}
		et := f.Type
		if et.Kind() == reflect.Pointer {
			et = et.Elem()
		}
		structFields(et, depth+1, req && f.Type.Kind() != reflect.Pointer, props, required)
	}
}
