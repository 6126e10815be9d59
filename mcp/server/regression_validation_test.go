package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/agentwire/agentwire/mcp"
	"github.com/agentwire/agentwire/mcp/host"
	"github.com/agentwire/agentwire/mcp/internal/mcptest"
	"github.com/agentwire/agentwire/mcp/server"
)

type validationFilter struct {
	Since string   `json:"since"`
	Tags  []string `json:"tags,omitempty"`
}

type validationArgs struct {
	Text   string            `json:"text"`
	Count  int               `json:"count,omitempty"`
	Ratio  float64           `json:"ratio,omitempty"`
	Loud   *bool             `json:"loud"`
	Filter *validationFilter `json:"filter"`
	Labels map[string]int    `json:"labels,omitempty"`
}

// validationServer has typed tools with an inferred schema (check) and
// with a schema of their own (mode), and counts the calls their handlers
// get.
func validationServer(calls *atomic.Int32) *server.Server {
	s := server.New(mcp.Implementation{Name: "validation", Version: "1"}, nil)
	server.AddTool(s, mcp.Tool{Name: "check"}, func(_ context.Context, _ *server.ToolRequest, in validationArgs) (*mcp.ToolResult, error) {
		calls.Add(1)
		return mcp.TextResult("ran with " + in.Text), nil
	})
	server.AddTool(s, mcp.Tool{Name: "mode", InputSchema: json.RawMessage(`{"type":"object",` +
		`"properties":{"mode":{"type":"string","enum":["fast","slow"]},"level":{"type":["integer","null"]},"note":{"type":"string","nullable":true},` +
		`"point":{"type":"object","properties":{"x":{"type":"number"},"y":{"type":"number"}},"required":["x","y"],"additionalProperties":false}},` +
		`"required":["mode"],"additionalProperties":false}`)},
		func(_ context.Context, _ *server.ToolRequest, in map[string]any) (*mcp.ToolResult, error) {
			calls.Add(1)
			return mcp.TextResult(fmt.Sprint(in["mode"])), nil
		})
	return s
}

// The defect: typed tools published a schema and did not hold their
// arguments to it. `serve mcp`'s echo, whose schema requires text, ran on
// {} and echoed "". The arguments are now checked against the published
// schema before the handler runs (required members, types, nested
// objects, array items, additionalProperties, enum), and a failure is a
// tool result with isError whose text says what was wrong, for the model
// to correct its call (2025-11-25 server/tools: input validation errors
// are tool execution errors); the handler is not called. Both eras.
func TestRegressionTypedToolArgumentsAreValidated(t *testing.T) {
	for _, mode := range []mcp.Eras{mcp.LegacyOnly, mcp.ModernOnly} {
		t.Run(fmt.Sprint(mode), func(t *testing.T) {
			var calls atomic.Int32
			sess, _ := mcptest.PipeSession(t, validationServer(&calls), &host.Options{Eras: mode})
			for _, tc := range []struct {
				tool, args string
				want       []string // each in the error text; none: the call succeeds
			}{
				{"check", `{}`, []string{`argument "text" is required but missing`}},
				{"check", `{"text":"hi"}`, nil}, // pointers and omitempty fields are optional
				{"check", `{"text":"hi","loud":true,"filter":{"since":"2020"}}`, nil},
				{"check", `{"text":"hi","loud":null,"filter":{"since":"2020"}}`, []string{`argument "loud" must be a boolean, not null`}},
				{"check", `{"text":5,"loud":true,"filter":{"since":"x"}}`, []string{`argument "text" must be a string, not an integer`}},
				{"check", `{"text":"a","loud":true,"filter":{"since":"x"},"count":1.5}`, []string{`argument "count" must be an integer, not a number`}},
				{"check", `{"text":"a","loud":true,"filter":{"since":"x"},"count":2,"ratio":3}`, nil},
				{"check", `{"text":"a","loud":"yes","filter":{}}`, []string{`argument "loud" must be a boolean, not a string`, `argument "filter.since" is required but missing`}},
				{"check", `{"text":"a","loud":true,"filter":{"since":"x","tags":["a",2]}}`, []string{`argument "filter.tags[1]" must be a string, not an integer`}},
				{"check", `{"text":"a","loud":true,"filter":{"since":"x"},"labels":{"a":1,"b":"two"}}`, []string{`argument "labels.b" must be an integer, not a string`}},
				{"check", `{"text":"a","loud":true,"filter":[1]}`, []string{`argument "filter" must be an object, not an array`}},
				{"mode", `{"mode":"fast"}`, nil},
				{"mode", `{"mode":"fast","level":null,"note":null}`, nil},
				{"mode", `{"mode":"fast","note":1}`, []string{`argument "note" must be a string or null, not an integer`}},
				{"mode", `{"mode":"fast","level":"high"}`, []string{`argument "level" must be an integer or null, not a string`}},
				{"mode", `{"mode":"quick"}`, []string{`argument "mode" must be one of "fast", "slow"`}},
				{"mode", `{"mode":"slow","extra":1}`, []string{`argument "extra" is not accepted (accepted: mode, level, note, point)`}},
				{"mode", `{"mode":"slow","point":{"x":1,"z":2}}`, []string{`argument "point.y" is required but missing`, `argument "point.z" is not accepted`}},
			} {
				before := calls.Load()
				res, err := sess.CallTool(t.Context(), tc.tool, json.RawMessage(tc.args))
				if err != nil {
					t.Fatalf("%s %s: %v", tc.tool, tc.args, err)
				}
				ran := calls.Load() != before
				if tc.want == nil {
					if res.IsError || !ran {
						t.Errorf("%s %s: refused: %+v", tc.tool, tc.args, res)
					}
					continue
				}
				if !res.IsError || ran || len(res.Content) != 1 {
					t.Errorf("%s %s: isError %v, handler ran %v: %+v", tc.tool, tc.args, res.IsError, ran, res)
					continue
				}
				text := res.Content[0].Text
				if !strings.HasPrefix(text, "invalid arguments for "+tc.tool+": ") {
					t.Errorf("%s %s: %q", tc.tool, tc.args, text)
				}
				for _, w := range tc.want {
					if !strings.Contains(text, w) {
						t.Errorf("%s %s: %q does not say %q", tc.tool, tc.args, text, w)
					}
				}
			}
		})
	}
}

// Absent arguments are checked as {}, arguments that are not an object are
// refused, and a long list of problems is cut at ten.
func TestTypedToolArgumentEdgeCases(t *testing.T) {
	var calls atomic.Int32
	s := validationServer(&calls)
	type many struct {
		A, B, C, D, E, F, G, H, I, J, K, L string
	}
	server.AddTool(s, mcp.Tool{Name: "many"}, func(context.Context, *server.ToolRequest, many) (*mcp.ToolResult, error) {
		calls.Add(1)
		return nil, nil
	})
	sess, _ := mcptest.PipeSession(t, s, nil)
	for _, tc := range []struct {
		tool string
		args any
		want string
	}{
		{"check", nil, `argument "text" is required but missing`},
		{"check", json.RawMessage(`[1,2]`), `the arguments must be an object, not an array`},
		{"many", map[string]any{}, `; and 2 more.`},
	} {
		res, err := sess.CallTool(t.Context(), tc.tool, tc.args)
		if err != nil {
			t.Fatal(err)
		}
		if !res.IsError || !strings.Contains(res.Content[0].Text, tc.want) {
			t.Errorf("%s %v: %+v", tc.tool, tc.args, res)
		}
	}
	if n := calls.Load(); n != 0 {
		t.Errorf("handlers ran %d times", n)
	}
}

// Regression: `serve mcp`'s echo accepted {} although its schema
// requires text.
func TestRegressionSeedEchoRequiresText(t *testing.T) {
	sess, _ := mcptest.RecordedSession(t, mcp.BothEras, nil)
	res, err := sess.CallTool(t.Context(), "echo", map[string]any{})
	if err != nil || !res.IsError || !strings.Contains(res.Content[0].Text, `argument "text" is required but missing`) {
		t.Fatalf("%+v %v", res, err)
	}
}

type paging struct {
	Cursor string `json:"cursor,omitempty"`
	Limit  int    `json:"limit"`
}

type listArgs struct {
	paging
	Query string `json:"query"`
	Limit string `json:"limit_name"`
}

// SchemaFor published an embedded struct as one required property named
// after its type, where encoding/json reads its fields flattened: once the
// arguments were checked against that schema, every correct call would
// have been refused. The fields are now the struct's own.
func TestRegressionSchemaForEmbeddedStruct(t *testing.T) {
	var got struct {
		Properties map[string]json.RawMessage `json:"properties"`
		Required   []string                   `json:"required"`
	}
	if err := json.Unmarshal(mcp.SchemaFor(listArgs{}), &got); err != nil {
		t.Fatal(err)
	}
	if _, ok := got.Properties["paging"]; ok || len(got.Properties) != 4 || strings.Join(got.Required, ",") != "query,limit_name,limit" {
		t.Errorf("schema %s", mcp.SchemaFor(listArgs{}))
	}
	s := server.New(mcp.Implementation{Name: "embedded", Version: "1"}, nil)
	server.AddTool(s, mcp.Tool{Name: "list"}, func(_ context.Context, _ *server.ToolRequest, in listArgs) (*mcp.ToolResult, error) {
		return mcp.TextResult(fmt.Sprintf("%s %d", in.Query, in.paging.Limit)), nil
	})
	sess, _ := mcptest.PipeSession(t, s, nil)
	res, err := sess.CallTool(t.Context(), "list", map[string]any{"query": "q", "limit": 5, "limit_name": "x"})
	if err != nil || res.IsError || res.Content[0].Text != "q 5" {
		t.Fatalf("%+v %v", res, err)
	}
}
