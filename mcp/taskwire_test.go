package mcp_test

import (
	"encoding/json"
	"testing"

	"github.com/agentwire/agentwire/jsonrpc"
	"github.com/agentwire/agentwire/mcp"
)

// declaresTasksReference is DeclaresTasks by encoding/json: the
// extensions member of the capabilities object has the tasks extension
// as an object. (Repeated keys are refused before this runs: both read
// the same member.)
func declaresTasksReference(caps []byte) bool {
	var c map[string]json.RawMessage
	if json.Unmarshal(caps, &c) != nil {
		return false
	}
	var ext map[string]json.RawMessage
	if json.Unmarshal(c["extensions"], &ext) != nil {
		return false
	}
	v, ok := ext[mcp.ExtensionTasks]
	return ok && len(v) > 0 && v[0] == '{'
}

func TestDeclaresTasks(t *testing.T) {
	for caps, want := range map[string]bool{
		`{"extensions":{"io.modelcontextprotocol/tasks":{}}}`:                            true,
		`{"sampling":{},"extensions":{"a":1,"io.modelcontextprotocol/tasks":{"x":[1]}}}`: true,
		`{"extensions":{"io.modelcontextprotocol/tasks":null}}`:                          false,
		`{"extensions":{"io.modelcontextprotocol/tasks":true}}`:                          false,
		`{"extensions":{}}`: false,
		`{"tasks":{}}`:      false, // the 2025-11-25 slot is not the extension
		`{"extensions":{"io.modelcontextprotocol/Tasks":{}}}`: false, // member names match exactly
		`{}`: false,
		``:   false,
	} {
		if got := mcp.DeclaresTasks([]byte(caps)); got != want {
			t.Errorf("DeclaresTasks(%s) = %v, want %v", caps, got, want)
		}
	}
}

// DeclaresTasks walks bytes the rpc layer has validated (valid JSON, no
// repeated keys); on any such input it agrees with encoding/json.
func FuzzDeclaresTasks(f *testing.F) {
	for _, s := range []string{`{"extensions":{"io.modelcontextprotocol/tasks":{}}}`, `{"extensions":{"io.modelcontextprotocol/tasks":[]}}`,
		`{"extensions":1}`, `{"a":{"extensions":{"io.modelcontextprotocol/tasks":{}}}}`, `[]`, `"x"`, `{"extensions":{"io.modelcontextprotocol\/tasks":{}}}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, caps []byte) {
		if !acceptedByDecode(caps) {
			return
		}
		if got, want := mcp.DeclaresTasks(caps), declaresTasksReference(caps); got != want {
			t.Fatalf("DeclaresTasks(%q) = %v, encoding/json says %v", caps, got, want)
		}
	})
}

// acceptedByDecode reports whether v, as a request's params member,
// passes jsonrpc.Decode: valid JSON, no repeated keys, valid UTF-8 —
// what every handler's bytes have passed.
func acceptedByDecode(v []byte) bool {
	line := append(append([]byte(`{"jsonrpc":"2.0","id":1,"method":"m","params":{"c":`), v...), "}}"...)
	_, err := jsonrpc.Decode(line, nil)
	return err == nil
}
