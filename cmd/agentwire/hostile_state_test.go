package main

import (
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
)

// The hostile-client suite: a 2026-07-28 requestState is the server's own
// memory handed to the client; a client that edits it, replays it with
// other arguments or forges one must get -32602 and nothing else.
func TestHostileTamperedRequestState(t *testing.T) {
	url, _ := startServeHTTP(t, "0", "--fixtures", "conformance")
	post := func(params string) (int, string) {
		t.Helper()
		body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{` + hostileMeta + `,` + params + `}}`
		req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("MCP-Protocol-Version", "2026-07-28")
		req.Header.Set("Mcp-Method", "tools/call")
		var p struct{ Name string }
		json.Unmarshal([]byte("{"+params+"}"), &p)
		req.Header.Set("Mcp-Name", p.Name)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		s := string(b)
		if i := strings.Index(s, "data: "); i >= 0 { // an event stream: its last data line
			lines := strings.Split(strings.TrimSpace(s), "\n")
			for j := len(lines) - 1; j >= 0; j-- {
				if d, ok := strings.CutPrefix(lines[j], "data: "); ok {
					s = d
					break
				}
			}
		}
		return resp.StatusCode, s
	}
	_, first := post(`"name":"test_input_required_result_tampered_state","arguments":{}`)
	var r struct {
		Result struct {
			ResultType   string `json:"resultType"`
			RequestState string `json:"requestState"`
		} `json:"result"`
	}
	if err := json.Unmarshal([]byte(first), &r); err != nil || r.Result.ResultType != "input_required" || r.Result.RequestState == "" {
		t.Fatalf("first round: %s", first)
	}
	state := r.Result.RequestState
	answer := `"inputResponses":{"confirm":{"action":"accept","content":{"ok":true}}}`
	flipped := []byte(state)
	flipped[len(flipped)/2] ^= 1
	forged := base64.RawURLEncoding.EncodeToString([]byte(`{"method":"tools/call","name":"test_input_required_result_tampered_state","exp":99999999999}`))
	for name, params := range map[string]string{
		"one byte flipped":    `"name":"test_input_required_result_tampered_state","arguments":{},` + answer + `,"requestState":"` + string(flipped) + `"`,
		"appended":            `"name":"test_input_required_result_tampered_state","arguments":{},` + answer + `,"requestState":"` + state + `A"`,
		"other arguments":     `"name":"test_input_required_result_tampered_state","arguments":{"extra":1},` + answer + `,"requestState":"` + state + `"`,
		"other tool":          `"name":"test_input_required_result_request_state","arguments":{},` + answer + `,"requestState":"` + state + `"`,
		"forged without MAC":  `"name":"test_input_required_result_tampered_state","arguments":{},` + answer + `,"requestState":"` + forged + `"`,
		"not a string":        `"name":"test_input_required_result_tampered_state","arguments":{},` + answer + `,"requestState":{"x":1}`,
		"a megabyte of state": `"name":"test_input_required_result_tampered_state","arguments":{},` + answer + `,"requestState":"` + strings.Repeat("A", 1<<20) + `"`,
	} {
		code, got := post(params)
		if !strings.Contains(got, `"code":-32602`) || strings.Contains(got, "state verified") {
			t.Errorf("%s: status %d, %.300s", name, code, got)
		}
	}
	if _, got := post(`"name":"test_input_required_result_tampered_state","arguments":{},` + answer + `,"requestState":"` + state + `"`); !strings.Contains(got, "state verified") {
		t.Errorf("the genuine state was not honoured: %.300s", got)
	}
}
