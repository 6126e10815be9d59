package mcp

import "testing"

// parseParams reads the members MCP names, exactly (case-sensitive keys,
// escapes decoded), as raw slices of the params; anything but an object
// yields empty params.
func TestParseParams(t *testing.T) {
	var p RequestParams
	ParseRequestParams([]byte(` {"n\u0061me":"echo", "Name":"other", "uri":"file:///a", "arguments":{"a":[1]},"cursor":"MQ",
		"inputResponses":{}, "requestState":"s", "_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28",
		"io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"c"},
		"io.modelcontextprotocol/logLevel":"debug","progressToken":7}} `), &p)
	for _, c := range []struct{ name, got, want string }{
		{"name", string(p.Name), `"echo"`},
		{"uri", string(p.URI), `"file:///a"`},
		{"arguments", string(p.Arguments), `{"a":[1]}`},
		{"cursor", string(p.Cursor), `"MQ"`},
		{"inputResponses", string(p.InputResponses), `{}`},
		{"requestState", string(p.RequestState), `"s"`},
	} {
		if c.got != c.want {
			t.Errorf("%s: %s, want %s", c.name, c.got, c.want)
		}
	}
	m := p.Meta
	if m != &p.metaValue {
		t.Fatal("_meta not read into p")
	}
	if string(m.ProtocolVersion) != `"2026-07-28"` || string(m.ClientCapabilities) != `{}` || string(m.ClientInfo) != `{"name":"c"}` ||
		m.LogLevel != "debug" || m.logLevelInvalid || string(m.ProgressToken) != "7" {
		t.Errorf("_meta read as %+v", *m)
	}

	var q RequestParams
	ParseRequestParams([]byte(`{"_meta":{"io.modelcontextprotocol/logLevel":3}}`), &q)
	if q.Meta == nil || !q.Meta.logLevelInvalid || q.Meta.LogLevel != "" {
		t.Errorf("a logLevel that is not a string: %+v", q.Meta)
	}
	var r RequestParams
	ParseRequestParams([]byte(`{"_meta":{"io.modelcontextprotocol/logLevel":"x"},"_meta":null}`), &r)
	if r.Meta != nil {
		t.Error("a _meta that is not an object left a meta")
	}
	for _, in := range []string{`[{"name":"echo"}]`, `"name"`, `null`, ``} {
		var e RequestParams
		ParseRequestParams([]byte(in), &e)
		if e.Name != nil || e.Meta != nil {
			t.Errorf("%q yielded params %+v", in, e)
		}
	}
	// Params come from jsonrpc.Decode, which has validated them, and are
	// not validated again; anything else must still not panic.
	for _, in := range []string{`{"name":"echo"`, `{"name"`, `{"_meta":{"a`, `{"n\`, `{"a":[1,{`} {
		var e RequestParams
		ParseRequestParams([]byte(in), &e)
	}
}

// A member that equals one the request path reads only under case folding
// is found in the same walk that reads the others, in params and in _meta.
func TestParseParamsFindsCaseFoldedTwins(t *testing.T) {
	for _, c := range []struct{ in, params, meta string }{
		{`{"name":"a","Name":"b"}`, "Name", ""},
		{`{"ARGUMENTS":{}}`, "ARGUMENTS", ""},
		{"{\"na\u212ae\":1}", "", ""},         // the Kelvin sign folds to k, not to m
		{"{\"\u212anown\":1}", "", ""},        // no such member
		{`{"nAme":1,"_Meta":{}}`, "nAme", ""}, // the first one found
		{`{"_meta":{"io.modelcontextprotocol/ProtocolVersion":"x"}}`, "", "io.modelcontextprotocol/ProtocolVersion"},
		{`{"name":"a","cursor":"c","Cursor":1}`, "", ""}, // not a routed member
	} {
		var p RequestParams
		ParseRequestParams([]byte(c.in), &p)
		if p.Ambiguous != c.params || p.MetaAmbiguous != c.meta {
			t.Errorf("%s: Ambiguous %q, MetaAmbiguous %q; want %q, %q", c.in, p.Ambiguous, p.MetaAmbiguous, c.params, c.meta)
		}
	}
	var k RequestParams
	ParseRequestParams([]byte("{\"\u212aey\":1,\"ur\u0130\":2}"), &k) // Unicode folding: no ASCII twin
	if k.Ambiguous != "" {
		t.Errorf("Ambiguous %q for keys with no ASCII twin", k.Ambiguous)
	}
}
