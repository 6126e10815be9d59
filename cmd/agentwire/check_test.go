//go:build unix

package main

import (
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// checkGrace is the --grace the check tests give a server between stdin
// EOF and SIGTERM. It is long so that a server that exits on EOF, slowly on
// a loaded machine, is not terminated first; only the fixtures that ignore
// EOF wait it out.
const checkGrace = "2s"

func runCheckJSON(t *testing.T, checkArgs []string, serveArgs ...string) (checkReport, int) {
	t.Helper()
	args := append(append([]string{"check", "--json", "--grace", checkGrace}, checkArgs...), "--", binary, "serve", "mcp")
	cmd := exec.Command(binary, append(args, serveArgs...)...)
	out, err := cmd.Output()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	var rep checkReport
	if err := json.Unmarshal(out, &rep); err != nil {
		t.Fatalf("check --json printed %q: %v", out, err)
	}
	return rep, code
}

func verdicts(rep checkReport) map[string]string {
	m := map[string]string{}
	for _, c := range rep.Checks {
		m[c.Check] = c.Result
	}
	return m
}

// check's verdicts on each variant of serve mcp.
func TestCheckVerdicts(t *testing.T) {
	cases := []struct {
		name  string
		check []string
		serve []string
		want  map[string]string
		code  int
	}{
		{"dual", nil, nil, map[string]string{"era": "pass", "unknown method": "pass", "not JSON": "pass", "large request": "pass",
			"concurrency": "pass", "cancellation": "pass", "stdout hygiene": "pass", "stderr use": "pass", "shutdown": "pass"}, 0},
		{"modern", nil, []string{"--era", "modern"}, map[string]string{"era": "pass", "shutdown": "pass"}, 0},
		{"legacy", nil, []string{"--era", "legacy"}, map[string]string{"era": "pass", "unknown method": "pass"}, 0},
		{"silent legacy", []string{"--probe-timeout", "0.5s"}, []string{"--era", "legacy", "--legacy-silent"}, map[string]string{"era": "warn"}, 0},
		{"slow tool", []string{"--slow-tool", "slow_report", "--slow-args", `{"steps":40,"delay_ms":50}`}, nil, map[string]string{"cancellation": "pass"}, 0},
		{"chatty unguarded", []string{"--call-tools=all", "--skip-tools", "crash"}, []string{"--no-stdout-guard"}, map[string]string{"stdout hygiene": "fail", "call tools": "info"}, 1},
		{"chatty guarded", []string{"--call-tools=all", "--skip-tools", "crash"}, nil, map[string]string{"stdout hygiene": "pass"}, 0},
		{"ignores EOF", nil, []string{"--ignore-eof"}, map[string]string{"shutdown": "warn"}, 0},
		{"ignores EOF and SIGTERM", nil, []string{"--ignore-eof", "--ignore-sigterm"}, map[string]string{"shutdown": "fail"}, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			rep, code := runCheckJSON(t, tc.check, tc.serve...)
			got := verdicts(rep)
			for k, v := range tc.want {
				if got[k] != v {
					t.Errorf("%s = %s, want %s (%+v)", k, got[k], v, rep.Checks)
				}
			}
			if code != tc.code || rep.Passed != (tc.code == 0) {
				t.Errorf("exit %d passed %v, want exit %d", code, rep.Passed, tc.code)
			}
			if tc.name == "chatty unguarded" {
				for _, c := range rep.Checks {
					if c.Check == "stdout hygiene" && !strings.Contains(c.Evidence, "DEBUG: looking things up...") {
						t.Errorf("evidence does not quote the line: %s", c.Evidence)
					}
				}
			}
			if tc.name == "ignores EOF and SIGTERM" && time.Since(start) > 5*time.Second {
				t.Errorf("took %v", time.Since(start))
			}
		})
	}
}

// A server that exits on the probe fails the era check with the reason.
func TestCheckServerExitingOnProbe(t *testing.T) {
	cmd := exec.Command(binary, "check", "--json", "--", "sh", "-c", `read line; echo "expected initialize" >&2; exit 1`)
	out, _ := cmd.Output()
	var rep checkReport
	if err := json.Unmarshal(out, &rep); err != nil {
		t.Fatalf("%q: %v", out, err)
	}
	if rep.Passed || len(rep.Checks) == 0 || rep.Checks[0].Check != "era" || rep.Checks[0].Result != "fail" ||
		!strings.Contains(rep.Checks[0].Evidence, "exit") {
		t.Fatalf("report %+v", rep)
	}
}
