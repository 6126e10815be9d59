package mcp

import "testing"

// parseParams reads the members MCP names, exactly (case-sensitive keys,
// escapes decoded), as raw slices of the params; anything but an object
// yields empty params.
func TestParseParams(t *testing.T) {
	var p params
	parseParams([]byte(` {"n\u0061me":"echo", "Name":"other", "uri":"file:///a", "arguments":{"a":[1]},"cursor":"MQ",
		"inputResponses":{}, "requestState":"s", "_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28",
		"io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"c"},
		"io.modelcontextprotocol/logLevel":"debug","progressToken":7}} `), &p)
	for _, c := range []struct{ name, got, want string }{
		{"name", string(p.name), `"echo"`},
		{"uri", string(p.uri), `"file:///a"`},
		{"arguments", string(p.arguments), `{"a":[1]}`},
		{"cursor", string(p.cursor), `"MQ"`},
		{"inputResponses", string(p.inputResponses), `{}`},
		{"requestState", string(p.requestState), `"s"`},
	} {
		if c.got != c.want {
			t.Errorf("%s: %s, want %s", c.name, c.got, c.want)
		}
	}
	m := p.meta
	if m != &p.metaValue {
		t.Fatal("_meta not read into p")
	}
	if string(m.ProtocolVersion) != `"2026-07-28"` || string(m.ClientCapabilities) != `{}` || string(m.ClientInfo) != `{"name":"c"}` ||
		m.LogLevel != "debug" || m.logLevelInvalid || string(m.ProgressToken) != "7" {
		t.Errorf("_meta read as %+v", *m)
	}

	var q params
	parseParams([]byte(`{"_meta":{"io.modelcontextprotocol/logLevel":3}}`), &q)
	if q.meta == nil || !q.meta.logLevelInvalid || q.meta.LogLevel != "" {
		t.Errorf("a logLevel that is not a string: %+v", q.meta)
	}
	var r params
	parseParams([]byte(`{"_meta":{"io.modelcontextprotocol/logLevel":"x"},"_meta":null}`), &r)
	if r.meta != nil {
		t.Error("a _meta that is not an object left a meta")
	}
	for _, in := range []string{`[{"name":"echo"}]`, `"name"`, `null`, ``, `{"name":"echo"`} {
		var e params
		parseParams([]byte(in), &e)
		if e.name != nil || e.meta != nil {
			t.Errorf("%q yielded params %+v", in, e)
		}
	}
}
