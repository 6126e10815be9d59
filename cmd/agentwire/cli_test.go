//go:build unix

package main

import (
	"strings"
	"testing"
)

// Defect: SUBCMD --help was a usage error (exit 2, flag defaults on
// stderr, no synopsis); demo --help and serve --help were refused. Now
// each prints its synopsis, with -- CMD where it takes one, and exits 0.
func TestSubcommandHelpWasAUsageError(t *testing.T) {
	t.Parallel()
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"call", "--help"}, "usage: agentwire call [flags] -- CMD [ARGS...]"},
		{[]string{"tap", "-h"}, "usage: agentwire tap [--log FILE] [--grace D] -- CMD [ARGS...]"},
		{[]string{"bridge", "--help"}, "usage: agentwire bridge --http [HOST:]PORT [HTTP flags] -- CMD [ARGS...]"},
		{[]string{"serve", "--help"}, "usage: agentwire serve echo|mcp|acp [flags]"},
		{[]string{"serve", "mcp", "--help"}, "usage: agentwire serve mcp [flags]"},
		{[]string{"demo", "--help"}, "usage: agentwire demo [wire]"},
		{[]string{"demo", "wire", "--help"}, "usage: agentwire demo [wire]"},
	}
	for _, tc := range cases {
		code, out, errText := runAgentwire(t, tc.args...)
		if code != 0 || !strings.HasPrefix(out, tc.want) || errText != "" {
			t.Errorf("%q: exit %d, stdout %.200q, stderr %q", tc.args, code, out, errText)
		}
	}
	code, out, _ := runAgentwire(t, "call", "--help")
	for _, want := range []string{"-input", "Exit status: 0 result, 1 JSON-RPC error, 2 usage error or transport failure", "3 the server asked for input"} {
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("call --help lacks %q:\n%s", want, out)
		}
	}
	if code, out, _ := runAgentwire(t, "--version"); code != 0 || !strings.HasPrefix(out, "agentwire ") {
		t.Errorf("--version: exit %d, %q", code, out)
	}
}

// One convention for usage errors: exit 2, one line saying what is wrong,
// the synopsis, never the whole usage text.
func TestUsageErrorsOneConvention(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"call", "--bogus"}, {"call", "--grace", "x", "--", "cat"}, {"tap", "--bogus"}, {"tap"},
		{"bridge", "--bogus"}, {"bridge", "--http", "0"}, {"serve", "bogus"}, {"serve"}, {"serve", "echo", "--bogus"},
		{"serve", "echo", "extra"}, {"demo", "bogus"}, {"bogus"},
	} {
		code, out, errText := runAgentwire(t, args...)
		lines := strings.Count(errText, "\n")
		if code != 2 || out != "" || lines > 6 || !strings.Contains(errText, "usage: agentwire") {
			t.Errorf("%q: exit %d, stdout %q, %d stderr lines:\n%s", args, code, out, lines, errText)
		}
	}
}

// Defect: a server that failed at start had its usage text printed twice
// (in the message and again in the report), and wide stderr lines went
// out whole. The message leaves the tail to the report when there is one,
// the report quotes a tail repeated by the restart once, and the message
// cuts lines and keeps the first and last ones of a long tail.
func TestFailingServerUsageTextRepeated(t *testing.T) {
	t.Parallel()
	code, _, errText := runAgentwire(t, "call", "--report", "--", binary, "serve", "bogus")
	if code != 2 || strings.Count(errText, `unknown server \"bogus\"`)+strings.Count(errText, `unknown server "bogus"`) != 1 {
		t.Errorf("exit %d; stderr:\n%s", code, errText)
	}
	code, _, errText = runAgentwire(t, "call", "--", "sh", "-c", `for i in $(seq 200); do echo line $i >&2; done; printf '%3000s\n' wide >&2; exit 3`)
	lines := strings.Split(strings.TrimSpace(errText), "\n")
	if code != 2 || len(lines) > maxErrLines || !strings.Contains(errText, "lines omitted") || !strings.Contains(errText, "line 1\n") {
		t.Errorf("exit %d, %d lines:\n%s", code, len(lines), errText)
	}
	for _, l := range lines {
		if len(l) > maxErrLineSize+40 {
			t.Errorf("a line of %d bytes", len(l))
		}
	}
}
