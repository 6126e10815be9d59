package server_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/agentwire/agentwire/internal/wiretest"
	"github.com/agentwire/agentwire/mcp"
	"github.com/agentwire/agentwire/mcp/internal/mcptest"
	"github.com/agentwire/agentwire/mcp/server"
)

// featureServer has one of each feature.
func featureServer(s *server.Server) {
	s.AddResource(mcp.Resource{URI: "test://a", Name: "a", MIMEType: "text/plain"},
		func(context.Context, *server.ReadRequest) ([]mcp.ResourceContents, error) {
			return []mcp.ResourceContents{{URI: "test://a", MIMEType: "text/plain", Text: ""}}, nil
		})
	s.AddResource(mcp.Resource{URI: "test://bin", Name: "bin"},
		func(context.Context, *server.ReadRequest) ([]mcp.ResourceContents, error) {
			return []mcp.ResourceContents{{URI: "test://bin", Blob: []byte{0, 1, 2}}}, nil
		})
	s.AddResourceTemplate(mcp.ResourceTemplate{URITemplate: "test://items/{id}/v{version}", Name: "item"},
		func(_ context.Context, r *server.ReadRequest) ([]mcp.ResourceContents, error) {
			if r.Vars["id"] == "missing" {
				return nil, server.ErrResourceNotFound
			}
			return []mcp.ResourceContents{{URI: r.URI, Text: r.Vars["id"] + "@" + r.Vars["version"]}}, nil
		})
	s.AddPrompt(mcp.Prompt{Name: "greet", Description: "d", Arguments: []mcp.PromptArgument{{Name: "who", Required: true}}},
		func(_ context.Context, r *server.PromptRequest) (*mcp.PromptResult, error) {
			return &mcp.PromptResult{Messages: []mcp.PromptMessage{
				{Role: "user", Content: mcp.Text("hi " + r.Arguments["who"])},
				{Role: "user", Content: mcp.ResourceLink(mcp.Resource{URI: "test://a", Name: "a"})},
			}}, nil
		})
	s.SetCompletion(func(_ context.Context, r *server.CompletionRequest) ([]string, error) {
		return []string{r.RefType + ":" + r.Name + r.URI + ":" + r.Argument + "=" + r.Value}, nil
	})
	s.AddTool(mcp.Tool{Name: "logs", Description: "d"}, func(_ context.Context, r *server.ToolRequest) (*mcp.ToolResult, error) {
		r.Log("debug", "t", "fine detail")
		r.Log("warning", "t", "careful")
		return mcp.TextResult("done"), nil
	})
}

func runFeatures(t *testing.T, f func(w *wiretest.Wire)) {
	t.Helper()
	synctest.Test(t, func(t *testing.T) {
		s := mcptest.NewServer(nil)
		featureServer(s)
		w := wiretest.Start(t, s.Handler(), s.ConnOptions(nil), true)
		defer w.Finish()
		f(w)
	})
}

func modernReq(id, method, params string) string {
	p := "{" + mcptest.Meta
	if params != "" {
		p += "," + params
	}
	return `{"jsonrpc":"2.0","id":` + id + `,"method":"` + method + `","params":` + p + `}}`
}

// E7: resources, templates, prompts and completion in the 2026-07-28 era,
// one raw exchange per row.
func TestFeaturesModern(t *testing.T) {
	cases := []struct {
		name, method, params string
		want                 []string // substrings of the answer
		code                 int64
	}{
		{name: "discover declares them", method: "server/discover", want: []string{`"resources":{"listChanged":true,"subscribe":true}`, `"prompts":{"listChanged":true}`, `"completions":{}`}},
		{name: "resources/list", method: "resources/list", want: []string{`"uri":"test://a"`, `"uri":"test://bin"`, `"ttlMs":0`, `"cacheScope":"public"`, `"resultType":"complete"`}},
		{name: "templates", method: "resources/templates/list", want: []string{`"uriTemplate":"test://items/{id}/v{version}"`, `"ttlMs"`}},
		{name: "read empty text", method: "resources/read", params: `"uri":"test://a"`, want: []string{`"text":""`, `"ttlMs"`}},
		{name: "read blob", method: "resources/read", params: `"uri":"test://bin"`, want: []string{`"blob":"AAEC"`}},
		{name: "read through a template", method: "resources/read", params: `"uri":"test://items/42/v7"`, want: []string{`"text":"42@7"`}},
		{name: "unknown resource", method: "resources/read", params: `"uri":"test://nope"`, code: -32602, want: []string{`"data":{"uri":"test://nope"}`}},
		{name: "template says not found", method: "resources/read", params: `"uri":"test://items/missing/v1"`, code: -32602, want: []string{`"uri":"test://items/missing/v1"`}},
		{name: "prompts/list", method: "prompts/list", want: []string{`"name":"greet"`, `"required":true`, `"cacheScope"`}},
		{name: "prompts/get", method: "prompts/get", params: `"name":"greet","arguments":{"who":"you"}`, want: []string{`"text":"hi you"`, `"type":"resource_link"`, `"resultType":"complete"`}},
		{name: "missing required argument", method: "prompts/get", params: `"name":"greet"`, code: -32602},
		{name: "unknown prompt", method: "prompts/get", params: `"name":"nope"`, code: -32602},
		{name: "completion", method: "completion/complete", params: `"ref":{"type":"ref/prompt","name":"greet"},"argument":{"name":"who","value":"y"}`,
			want: []string{`"values":["ref/prompt:greet:who=y"]`, `"total":1`, `"hasMore":false`}},
		{name: "logging/setLevel is legacy only", method: "logging/setLevel", params: `"level":"debug"`, code: -32601},
		{name: "resources/subscribe is legacy only", method: "resources/subscribe", params: `"uri":"test://a"`, code: -32601},
	}
	runFeatures(t, func(w *wiretest.Wire) {
		for i, tc := range cases {
			got := mcptest.One(t, w.Exchange(modernReq(strconv.Itoa(i+1), tc.method, tc.params)))
			if tc.code != 0 {
				if c := wiretest.ErrCode(t, got); c != tc.code {
					t.Errorf("%s: code %d, want %d: %s", tc.name, c, tc.code, got)
				}
			} else if strings.Contains(got, `"error"`) {
				t.Errorf("%s: %s", tc.name, got)
			}
			for _, s := range tc.want {
				if !strings.Contains(got, s) {
					t.Errorf("%s: lacks %s: %s", tc.name, s, got)
				}
			}
		}
	})
}

// E7 legacy: the same features after initialize, logging/setLevel with
// its threshold, subscriptions, and -32002 for an unknown resource.
func TestFeaturesLegacy(t *testing.T) {
	runFeatures(t, func(w *wiretest.Wire) {
		init := mcptest.One(t, w.Exchange(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}`))
		for _, s := range []string{`"resources":{"listChanged":true,"subscribe":true}`, `"prompts":{"listChanged":true}`, `"logging":{}`, `"completions":{}`} {
			if !strings.Contains(init, s) {
				t.Errorf("initialize lacks %s: %s", s, init)
			}
		}
		w.Send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
		if got := mcptest.One(t, w.Exchange(`{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":"test://items/5/v1"}}`)); !strings.Contains(got, `"text":"5@1"`) || strings.Contains(got, "resultType") {
			t.Errorf("read: %s", got)
		}
		if c := wiretest.ErrCode(t, mcptest.One(t, w.Exchange(`{"jsonrpc":"2.0","id":2,"method":"resources/read","params":{"uri":"test://nope"}}`))); c != -32002 {
			t.Errorf("unknown resource: %d", c)
		}
		mcptest.JSONEq(t, mcptest.One(t, w.Exchange(`{"jsonrpc":"2.0","id":3,"method":"resources/subscribe","params":{"uri":"test://a"}}`)), `{"jsonrpc":"2.0","id":3,"result":{}}`)
		// Default threshold: info; the warning is sent, the debug line not.
		got := w.Exchange(`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"logs"}}`)
		if len(got) != 2 || !strings.Contains(strings.Join(got, " "), `"level":"warning"`) {
			t.Errorf("default logging: %q", got)
		}
		mcptest.JSONEq(t, mcptest.One(t, w.Exchange(`{"jsonrpc":"2.0","id":5,"method":"logging/setLevel","params":{"level":"debug"}}`)), `{"jsonrpc":"2.0","id":5,"result":{}}`)
		if got := w.Exchange(`{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"logs"}}`); len(got) != 3 {
			t.Errorf("after setLevel debug: %q", got)
		}
		if c := wiretest.ErrCode(t, mcptest.One(t, w.Exchange(`{"jsonrpc":"2.0","id":7,"method":"logging/setLevel","params":{"level":"loud"}}`))); c != -32602 {
			t.Errorf("bad level: %d", c)
		}
	})
}

// Logging is per request in 2026-07-28: nothing without _meta logLevel.
func TestLogOnlyWhenAsked(t *testing.T) {
	runFeatures(t, func(w *wiretest.Wire) {
		if got := w.Exchange(modernReq("1", "tools/call", `"name":"logs"`)); len(got) != 1 {
			t.Errorf("without logLevel: %q", got)
		}
		withLevel := `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{` + strings.TrimSuffix(mcptest.Meta, "}") + `,"io.modelcontextprotocol/logLevel":"debug"},"name":"logs"}}`
		if got := w.Exchange(withLevel); len(got) != 3 {
			t.Errorf("with logLevel debug: %q", got)
		}
	})
}

// Lists are paged with PageSize; the client follows nextCursor, and a
// cursor the server did not make is -32602.
func TestPagination(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := mcptest.NewServer(&server.Options{PageSize: 2})
		featureServer(s)
		w := wiretest.Start(t, s.Handler(), s.ConnOptions(nil), true)
		defer w.Finish()
		first := mcptest.One(t, w.Exchange(modernReq("1", "tools/list", "")))
		if !strings.Contains(first, `"nextCursor"`) || strings.Count(first, `"inputSchema"`) != 2 {
			t.Fatalf("first page: %s", first)
		}
		if c := wiretest.ErrCode(t, mcptest.One(t, w.Exchange(modernReq("2", "tools/list", `"cursor":"bogus"`)))); c != -32602 {
			t.Errorf("bogus cursor: %d", c)
		}
	})
	s := mcptest.NewServer(&server.Options{PageSize: 1})
	featureServer(s)
	sess, err := mcptest.ConnectServer(t, s)
	if err != nil {
		t.Fatal(err)
	}
	tools, err := sess.ListTools(t.Context())
	if err != nil || len(tools) != 4 {
		t.Fatalf("tools %d %v", len(tools), err)
	}
	if rs, err := sess.ListResources(t.Context()); err != nil || len(rs) != 2 {
		t.Fatalf("resources %v %v", rs, err)
	}
	if ps, err := sess.ListPrompts(t.Context()); err != nil || len(ps) != 1 {
		t.Fatalf("prompts %v %v", ps, err)
	}
	if got, err := sess.Complete(t.Context(), "ref/prompt", "greet", "who", "x", nil); err != nil || len(got) != 1 {
		t.Fatalf("complete %v %v", got, err)
	}
	if c, err := sess.ReadResource(t.Context(), "test://bin"); err != nil || string(c[0].Blob) != "\x00\x01\x02" {
		t.Fatalf("read %v %v", c, err)
	}
	if p, err := sess.GetPrompt(t.Context(), "greet", map[string]string{"who": "me"}); err != nil || p.Messages[0].Content.Text != "hi me" {
		t.Fatalf("prompt %+v %v", p, err)
	}
}

// E6 with the whole surface: a listen stream honours prompt and resource
// list changes and resource subscriptions, with the subscription id.
func TestListenPromptsAndResources(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := mcptest.NewServer(nil)
		featureServer(s)
		w := wiretest.Start(t, s.Handler(), s.ConnOptions(nil), true)
		defer w.Finish()
		ack := mcptest.One(t, w.Exchange(modernReq(`"L"`, "subscriptions/listen", `"notifications":{"promptsListChanged":true,"resourcesListChanged":true,"resourceSubscriptions":["test://a"]}`)))
		for _, want := range []string{`"promptsListChanged":true`, `"resourcesListChanged":true`, `"resourceSubscriptions":["test://a"]`} {
			if !strings.Contains(ack, want) {
				t.Errorf("ack lacks %s: %s", want, ack)
			}
		}
		s.AddPrompt(mcp.Prompt{Name: "p2", Description: "d"}, nil)
		w.Settle()
		s.ResourceUpdated("test://other")
		s.ResourceUpdated("test://a")
		w.Settle()
		s.RemoveResource("test://bin")
		w.Settle()
		got := strings.Join(w.Take(), "\n")
		for _, want := range []string{`"method":"notifications/prompts/list_changed","params":{"_meta":{"io.modelcontextprotocol/subscriptionId":"L"}}`,
			`"method":"notifications/resources/updated"`, `"uri":"test://a"`, `"method":"notifications/resources/list_changed"`} {
			if !strings.Contains(got, want) {
				t.Errorf("stream lacks %s:\n%s", want, got)
			}
		}
		if strings.Contains(got, "test://other") {
			t.Errorf("an update nobody subscribed to: %s", got)
		}
	})
}
