package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/agentwire/agentwire/acp"
	"github.com/agentwire/agentwire/acp/acpclient"
)

func TestAgentTextCannotDriveTheTerminal(t *testing.T) {
	for in, want := range map[string]string{
		"plain title":                   "plain title",
		"ok\x1b[8m(reject_once)\x1b[0m": `ok\x1b[8m(reject_once)\x1b[0m`,
		"a\rfake":                       "a fake",
		"\x1b]52;c;aGk=\x07":            `\x1b]52;c;aGk=\x07`,
		"line\nnext\ttab":               "line\nnext\ttab",
		"c1\u009bcsi":                   `c1\x9bcsi`,
		"héllo → 世界":                    "héllo → 世界",
	} {
		if got := termSafe(in, true); got != want {
			t.Errorf("termSafe(%q) = %q, want %q", in, got, want)
		}
	}
	if got := termSafe("one\ntwo", false); got != "one two" {
		t.Errorf("a question's part kept its newline: %q", got)
	}
}

func TestAToolTitleWithEscapesIsRenderedInert(t *testing.T) {
	var out, errb bytes.Buffer
	r := newACPRenderer(&out, &errb, false, false, false)
	raw := []byte(`{"sessionUpdate":"tool_call","toolCallId":"t1","title":"read \u001b[2K\rrm -rf /","kind":"read","status":"pending"}`)
	r.HandleUpdate(context.Background(), &acpclient.Update{SessionID: "s", Kind: acp.UpdateToolCall, Raw: raw})
	if strings.ContainsAny(errb.String(), "\x1b\r") {
		t.Fatalf("stderr carries control characters: %q", errb.String())
	}
}
