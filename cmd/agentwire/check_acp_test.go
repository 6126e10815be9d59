//go:build unix

package main

import (
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
)

// acpRows are the rows of check --acp against agentwire's own agent: all
// pass (the auth methods row is information).
var acpRows = map[string]string{
	"initialize": pass, "auth methods": info, "unknown method": pass, "not JSON": pass, "batch": pass,
	"session/new": pass, "unknown session": pass, "prompt": pass, "control during prompt": pass, "cancel": pass,
	"$/cancel_request": pass, "undeclared methods": pass, "EOF behaviour": pass, "stdout hygiene": pass,
	"stderr use": pass, "shutdown": pass,
}

// with returns acpRows with some rows changed.
func with(changes map[string]string) map[string]string {
	m := map[string]string{}
	for k, v := range acpRows {
		m[k] = v
	}
	for k, v := range changes {
		m[k] = v
	}
	return m
}

var slowACP = []string{"--acp", "--slow-prompt", "slow 20"}

// agentwire's own agent passes the whole ACP battery.
func TestCheckACPAgentwireAgentPassesEveryRow(t *testing.T) {
	t.Parallel()
	out, err := exec.Command(binary, append(append([]string{"check", "--json", "--grace", checkGrace}, slowACP...), "--", binary, "serve", "acp")...).Output()
	var rep checkReport
	if jerr := json.Unmarshal(out, &rep); jerr != nil {
		t.Fatalf("%q: %v (%v)", out, jerr, err)
	}
	wantRows(t, rep, acpRows)
	if len(rep.Checks) != len(acpRows) {
		t.Errorf("%d rows, want %d", len(rep.Checks), len(acpRows))
	}
	if err != nil || !rep.Passed {
		t.Errorf("exit %v, passed %v", err, rep.Passed)
	}
	if r := row(rep, "initialize"); !strings.Contains(r.Evidence, "agentwire-acp-example 1.0.0, protocol version 1") {
		t.Errorf("initialize evidence: %s", r.Evidence)
	}
}

// Without a slow prompt the probes during a prompt cannot run: "not run",
// never blamed on the agent.
func TestCheckACPWithoutASlowPromptDoesNotBlame(t *testing.T) {
	t.Parallel()
	out, _ := exec.Command(binary, "check", "--acp", "--json", "--grace", checkGrace, "--", binary, "serve", "acp").Output()
	var rep checkReport
	if err := json.Unmarshal(out, &rep); err != nil {
		t.Fatalf("%q: %v", out, err)
	}
	wantRows(t, rep, with(map[string]string{"control during prompt": notRun, "cancel": notRun, "$/cancel_request": notRun,
		"EOF behaviour": notRun}))
	if !rep.Passed {
		t.Error("failed")
	}
}

// Each misbehaviour is blamed on its row, and only there.
func TestCheckACPMisbehavingAgents(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		mode     string
		args     []string
		changes  map[string]string
		evidence map[string]string
	}{
		{mode: "acp-pollutes", changes: map[string]string{"stdout hygiene": fail},
			evidence: map[string]string{"stdout hygiene": "agent starting (debug build)"}},
		{mode: "acp-error-on-cancel", changes: map[string]string{"cancel": fail, "$/cancel_request": warn},
			evidence: map[string]string{"cancel": "MUST reply cancelled, not an error"}},
		{mode: "acp-updates-after-response", changes: map[string]string{"prompt": fail},
			evidence: map[string]string{"prompt": "1 update(s) came after the response"}},
		{mode: "acp-ignores-eof", changes: map[string]string{"shutdown": warn},
			evidence: map[string]string{"shutdown": "ignored stdin EOF"}},
		{mode: "acp-auth-required", changes: map[string]string{"session/new": info, "prompt": notRun, "control during prompt": notRun,
			"cancel": notRun, "$/cancel_request": notRun, "EOF behaviour": notRun},
			evidence: map[string]string{"session/new": "authentication required: agent-login, api-key", "prompt": "needs --auth"}},
		{mode: "acp-auth-required", args: []string{"--auth", "agent-login"}, changes: map[string]string{"authenticate": pass}},
	} {
		t.Run(tc.mode+strings.Join(tc.args, ""), func(t *testing.T) {
			t.Parallel()
			rep, code, _, _ := runCheckMode(t, tc.mode, append(append([]string{}, slowACP...), tc.args...)...)
			wantRows(t, rep, with(tc.changes))
			for k, v := range tc.evidence {
				if r := row(rep, k); !strings.Contains(r.Evidence, v) {
					t.Errorf("%s evidence %q lacks %q", k, r.Evidence, v)
				}
			}
			failed := false
			for _, v := range tc.changes {
				failed = failed || v == fail
			}
			if (code == 1) != failed || rep.Passed == failed {
				t.Errorf("exit %d, passed %v", code, rep.Passed)
			}
		})
	}
}

// The ACP battery's flags are check's own: --acp is found before "--" only.
func TestCheckACPFlagIsFoundBeforeTheCommandOnly(t *testing.T) {
	for args, want := range map[string]bool{
		"--acp -- x": true, "-acp -- x": true, "--json --acp -- x": true, "-- x --acp": false, "--acp=true -- x": true, "--json -- x": false,
	} {
		if got := acpFlagGiven(strings.Fields(args)); got != want {
			t.Errorf("%q: %v, want %v", args, got, want)
		}
	}
}
