//go:build unix

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// runAgentwire runs the built binary with stdin not a terminal (/dev/null)
// and returns its exit status, stdout and stderr.
func runAgentwire(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	cmd := exec.Command(binary, args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode(), out.String(), errb.String()
	} else if err != nil {
		t.Fatal(err)
	}
	return 0, out.String(), errb.String()
}

func fixtureServer() []string {
	return []string{"--", binary, "serve", "mcp", "--fixtures", "conformance"}
}

// Defect: call could not answer the server. A tool that elicits failed
// (2026-07-28: exit 2, the transport code; legacy: "method not found:
// elicitation/create", which read as the server's fault). Now the answers
// come from --input or --input-file, in both eras; without them, and with
// stdin not a terminal, call says how to answer and exits 3.
func TestCallCannotAnswerTheServer(t *testing.T) {
	t.Parallel()
	answers := `{"elicitation/create":{"username":"ann","email":"ann@example.com"}}`
	file := filepath.Join(t.TempDir(), "input.json")
	if err := os.WriteFile(file, []byte(answers), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, era := range []string{"modern", "legacy"} {
		t.Run(era, func(t *testing.T) {
			t.Parallel()
			tool := []string{"call", "--era", era, "--tool", "test_elicitation", "--args", `{"message":"Who are you?"}`}
			for name, extra := range map[string][]string{"--input": {"--input", answers}, "--input-file": {"--input-file", file}} {
				code, out, errText := runAgentwire(t, append(append(tool, extra...), fixtureServer()...)...)
				if code != 0 || !strings.Contains(out, `action=accept`) || !strings.Contains(out, `ann@example.com`) {
					t.Errorf("%s: exit %d, stdout %q, stderr %q", name, code, out, errText)
				}
			}
			code, out, errText := runAgentwire(t, append(tool, fixtureServer()...)...)
			if code != 3 || out != "" || !strings.Contains(errText, `asked for input that was not given: elicitation/create "Who are you?"`) ||
				!strings.Contains(errText, "--input") || strings.Contains(errText, "method not found") {
				t.Errorf("without input: exit %d, stdout %q, stderr %q", code, out, errText)
			}
		})
	}
	// One object answers a two-round form, each round its own field.
	code, out, errText := runAgentwire(t, append([]string{"call", "--tool", "test_input_required_result_multi_round",
		"--input", `{"elicitation/create":{"name":"Ann","color":"blue"}}`}, fixtureServer()...)...)
	if code != 0 || !strings.Contains(out, "Ann likes blue") {
		t.Errorf("multi round: exit %d, stdout %q, stderr %q", code, out, errText)
	}
	// Only what --input answers is declared: this tool asks for what the
	// client declared, so one answer comes back.
	code, out, errText = runAgentwire(t, append([]string{"call", "--tool", "test_input_required_result_capabilities",
		"--input", `{"elicitation/create":{"name":"Ann"}}`}, fixtureServer()...)...)
	if code != 0 || !strings.Contains(out, "Got 1 answers") {
		t.Errorf("capabilities: exit %d, stdout %q, stderr %q", code, out, errText)
	}
	// Sampling and roots, answered in the shorthand.
	code, out, errText = runAgentwire(t, append([]string{"call", "--tool", "test_input_required_result_multiple_inputs",
		"--input", `{"elicitation/create":{"name":"Ann"},"sampling/createMessage":"hello","roots/list":{"roots":["/srv"]}}`}, fixtureServer()...)...)
	if code != 0 || !strings.Contains(out, "Got 3 answers; greeting: hello") {
		t.Errorf("multiple inputs: exit %d, stdout %q, stderr %q", code, out, errText)
	}
}

// Defect: --tool with --method, and --args without --tool, were silently
// ignored; --era none defaulted to ping, which the echo server lacks.
// They are usage errors now, like a bad --input.
func TestCallFlagsSilentlyIgnored(t *testing.T) {
	t.Parallel()
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"--tool", "echo", "--method", "tools/list"}, "does not combine with --method"},
		{[]string{"--tool", "echo", "--params", "{}"}, "does not combine with --params"},
		{[]string{"--args", `{"a":1}`}, "--args goes with --tool"},
		{[]string{"--era", "none"}, "--era none needs --method"},
		{[]string{"--input", `{"elicitation/create":`}, "--input: not a JSON object"},
		{[]string{"--input", `{"bogus/method":{}}`}, `unknown method "bogus/method"`},
		{[]string{"--input", "{}", "--input-file", "x"}, "exclude each other"},
		{[]string{"--era", "none", "--method", "echo", "--input", "{}"}, "--era none has none"},
	}
	for _, tc := range cases {
		code, out, errText := runAgentwire(t, append(append([]string{"call"}, tc.args...), "--", binary, "serve", "echo")...)
		if code != 2 || out != "" || !strings.Contains(errText, tc.want) || !strings.Contains(errText, "usage: agentwire call") {
			t.Errorf("%q: exit %d, stdout %q, stderr %q", tc.args, code, out, errText)
		}
	}
}

// The terminal answers a form field by field, in the schema's order, with
// defaults, types and enums; :decline declines.
func TestCallPromptsForAForm(t *testing.T) {
	params := json.RawMessage(`{"message":"Tell me","requestedSchema":{"type":"object","properties":{
		"name":{"type":"string"},"age":{"type":"integer","default":30},"ok":{"type":"boolean"},
		"color":{"type":"string","enum":["red","green"]},"tags":{"type":"array","items":{"enum":["a","b","c"]}}},
		"required":["name","ok"]}}`)
	var out bytes.Buffer
	p := &prompter{in: strings.NewReader("\nAnn\nold\n\nyes\n2\n1, c\n"), out: &out}
	res, err := p.ask(context.Background(), "elicitation/create", params)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(res)
	if string(b) != `{"action":"accept","content":{"age":30,"color":"green","name":"Ann","ok":true,"tags":["a","c"]}}` {
		t.Errorf("got %s; prompts:\n%s", b, out.String())
	}
	if i, j := strings.Index(out.String(), "name (string, required)"), strings.Index(out.String(), "age (integer)"); i < 0 || j < i {
		t.Errorf("fields not asked in order:\n%s", out.String())
	}
	p = &prompter{in: strings.NewReader(":decline\n"), out: &out}
	if res, err := p.ask(context.Background(), "elicitation/create", params); err != nil || res.(map[string]any)["action"] != "decline" {
		t.Errorf("decline: %v %v", res, err)
	}
	// Sampling: the user replies in the model's place; roots: paths or URIs.
	p = &prompter{in: strings.NewReader("Paris\n/srv file:///tmp\n"), out: &out}
	res, err = p.ask(context.Background(), "sampling/createMessage", json.RawMessage(`{"messages":[{"role":"user","content":{"type":"text","text":"Capital of France?"}}],"maxTokens":9}`))
	b, _ = json.Marshal(res)
	if err != nil || !strings.Contains(string(b), `"text":"Paris"`) || !strings.Contains(out.String(), "user: Capital of France?") {
		t.Errorf("sampling: %s %v", b, err)
	}
	res, err = p.ask(context.Background(), "roots/list", json.RawMessage(`{}`))
	b, _ = json.Marshal(res)
	if err != nil || string(b) != `{"roots":[{"uri":"file:///srv"},{"uri":"file:///tmp"}]}` {
		t.Errorf("roots: %s %v", b, err)
	}
}

// Defect: -32601 for a feature the server lacks said the method was "not
// available in protocol version 2026-07-28" (it is).
func TestCallMethodNotFoundSaysTheServerLacksIt(t *testing.T) {
	t.Parallel()
	code, out, _ := runAgentwire(t, "call", "--era", "modern", "--method", "resources/list", "--", binary, "serve", "mcp")
	if code != 1 || !strings.Contains(out, "this server offers no resources") || strings.Contains(out, "not available in protocol version") {
		t.Errorf("exit %d, stdout %q", code, out)
	}
}
