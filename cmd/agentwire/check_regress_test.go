//go:build unix

package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/agentwire/agentwire/internal/testserver"
)

// runCheckMode runs `agentwire check --json` against this test binary
// re-executed as a server in mode (with a state directory), and returns
// the report, the exit status, stderr and the state directory.
func runCheckMode(t *testing.T, mode string, checkArgs ...string) (checkReport, int, string, string) {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	args := append(append([]string{"check", "--json", "--grace", checkGrace}, checkArgs...), "--", self)
	cmd := exec.Command(binary, args...)
	cmd.Env = testserver.Command(mode, testserver.StateEnv+"="+dir)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err = cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	var rep checkReport
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("check --json printed %q: %v (stderr %s)", out.Bytes(), err, errb.Bytes())
	}
	return rep, code, errb.String(), dir
}

func row(rep checkReport, check string) checkResult {
	for _, r := range rep.Checks {
		if r.Check == check {
			return r
		}
	}
	return checkResult{}
}

func wantRows(t *testing.T, rep checkReport, want map[string]string) {
	t.Helper()
	for k, v := range want {
		if r := row(rep, k); r.Result != v {
			t.Errorf("%s = %q (%s), want %q", k, r.Result, r.Evidence, v)
		}
	}
	if t.Failed() {
		b, _ := json.MarshalIndent(rep.Checks, "", "  ")
		t.Logf("report: %s", b)
	}
}

// Defect: a server that died on the "not JSON" line was blamed for every
// probe after it (a 1 MiB request, concurrency, cancellation, and a 0 ms
// shutdown pass). The death is reported once, with its evidence, and a
// fresh process runs the rest.
func TestCheckDeadServerIsNotBlamedForLaterProbes(t *testing.T) {
	t.Parallel()
	rep, code, _, dir := runCheckMode(t, "mcp-dies-on-garbage")
	wantRows(t, rep, map[string]string{"era": pass, "unknown method": pass, "not JSON": fail, "restart": info,
		"large request": pass, "concurrency": pass, "cancellation": pass, "stdout hygiene": pass, "shutdown": pass})
	if r := row(rep, "not JSON"); !strings.Contains(r.Evidence, "exit status 2") || !strings.Contains(r.Evidence, "panic: invalid character") {
		t.Errorf("not JSON evidence: %s", r.Evidence)
	}
	if r := row(rep, "restart"); !strings.Contains(r.Evidence, `"not JSON"`) || !strings.Contains(r.Evidence, "fresh process (#2") {
		t.Errorf("restart evidence: %s", r.Evidence)
	}
	if r := row(rep, "shutdown"); !strings.Contains(r.Evidence, "process #2") {
		t.Errorf("shutdown evidence: %s", r.Evidence)
	}
	if code != 1 || rep.Passed {
		t.Errorf("exit %d passed %v", code, rep.Passed)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "starts")); strings.Count(string(b), "\n") != 2 {
		t.Errorf("%d processes started", strings.Count(string(b), "\n"))
	}
}

// The same for a server that stops answering after the line: it is shut
// down, and a fresh process runs the rest.
func TestCheckHungServerIsNotBlamedForLaterProbes(t *testing.T) {
	t.Parallel()
	rep, _, _, _ := runCheckMode(t, "mcp-hangs-on-garbage", "--request-timeout", "1s")
	wantRows(t, rep, map[string]string{"not JSON": warn, "restart": info, "large request": pass, "concurrency": pass,
		"cancellation": pass, "shutdown": pass})
	if r := row(rep, "restart"); !strings.Contains(r.Evidence, "stopped answering") {
		t.Errorf("restart evidence: %s", r.Evidence)
	}
}

// Defect: check on a command that never started said "stdout hygiene
// pass" (and more). Without a session every probe is "not run", and only
// rows with evidence have a verdict.
func TestCheckCommandThatNeverStarted(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		mode, path, evidence, shutdown string
		connect                        string // --connect-timeout
	}{
		{"", "/nonexistent/agentwire-no-such-server", "did not start", notRun, "0.6s"},
		// The server exits on its own as soon as it runs; the connect
		// timeout is long so that a slow start on a loaded machine (a
		// race-built test binary) still ends in that exit, not in the
		// deadline. It costs nothing: the exit ends the wait.
		{"exit-at-start", "", "MCP_API_KEY is not set", notRun, "30s"},
		{"hang-at-start", "", "probe", warn, "0.6s"}, // it ignores stdin EOF; SIGTERM ends it
	} {
		t.Run(tc.mode+tc.path, func(t *testing.T) {
			args := []string{"--probe-timeout", "0.2s", "--connect-timeout", tc.connect}
			var rep checkReport
			var code int
			if tc.path != "" {
				out, _ := exec.Command(binary, append(append([]string{"check", "--json"}, args...), "--", tc.path)...).Output()
				if err := json.Unmarshal(out, &rep); err != nil {
					t.Fatalf("%q: %v", out, err)
				}
				code = 1
				if rep.Passed {
					code = 0
				}
			} else {
				rep, code, _, _ = runCheckMode(t, tc.mode, args...)
			}
			wantRows(t, rep, map[string]string{"era": fail, "unknown method": notRun, "not JSON": notRun, "large request": notRun,
				"concurrency": notRun, "cancellation": notRun, "stdout hygiene": notRun, "shutdown": tc.shutdown})
			if r := row(rep, "era"); !strings.Contains(r.Evidence, tc.evidence) {
				t.Errorf("era evidence: %s", r.Evidence)
			}
			for _, r := range rep.Checks {
				if r.Result == pass && r.Check != "stderr use" {
					t.Errorf("%s passed without a server: %s", r.Check, r.Evidence)
				}
			}
			if code != 1 || rep.Passed {
				t.Errorf("exit %d passed %v", code, rep.Passed)
			}
		})
	}
}

// Defect: check --call-tools called destructive tools. By default only
// tools annotated readOnlyHint: true are called; a tool past
// --tool-timeout that stops when cancelled is a warning, input_required is
// an answer, and list/anyOf arguments are filled from the schema.
func TestCheckCallToolsCallsOnlyReadOnlyTools(t *testing.T) {
	t.Parallel()
	rep, code, stderr, dir := runCheckMode(t, "mcp-tools", "--call-tools", "--tool-timeout", "0.3s")
	wantRows(t, rep, map[string]string{"call tools": info, "tool lookup": pass, "tool slow_lookup": warn, "tool ask_user": pass,
		"tool delete_everything": "", "tool write_file": "", "tool append_note": ""})
	calls, _ := os.ReadFile(filepath.Join(dir, testserver.CallsFile))
	for _, destructive := range []string{"delete_everything", "write_file", "append_note"} {
		if strings.Contains(string(calls), destructive) {
			t.Errorf("%s was called: %s", destructive, calls)
		}
		if !strings.Contains(row(rep, "call tools").Evidence, destructive) {
			t.Errorf("the summary does not name %s: %s", destructive, row(rep, "call tools").Evidence)
		}
	}
	if !strings.Contains(string(calls), "lookup ok") || !strings.Contains(string(calls), "slow_lookup cancelled") {
		t.Errorf("calls: %s", calls)
	}
	if r := row(rep, "tool ask_user"); !strings.Contains(r.Evidence, "input_required") {
		t.Errorf("ask_user: %s", r.Evidence)
	}
	if code != 0 || strings.Contains(stderr, "warning") {
		t.Errorf("exit %d, stderr %s", code, stderr)
	}

	rep, _, stderr, dir = runCheckMode(t, "mcp-tools", "--call-tools=all", "--skip-tools", "slow_lookup")
	calls, _ = os.ReadFile(filepath.Join(dir, testserver.CallsFile))
	for _, destructive := range []string{"delete_everything", "write_file", "append_note"} {
		if !strings.Contains(string(calls), destructive) || row(rep, "tool "+destructive).Result != pass {
			t.Errorf("--call-tools=all did not call %s: %s", destructive, calls)
		}
	}
	if strings.Contains(string(calls), "slow_lookup") || !strings.Contains(stderr, "warning: --call-tools=all") {
		t.Errorf("calls %s, stderr %s", calls, stderr)
	}
}

func TestCheckFillArgs(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ schema, want string }{
		{`{"type":"object","properties":{"q":{"type":"string"}},"required":["q"]}`, `{"q":"agentwire"}`},
		{`{"type":"object","properties":{"k":{"type":["null","integer"],"minimum":5}},"required":["k"]}`, `{"k":5}`},
		{`{"type":"object","properties":{"t":{"type":"array","minItems":2,"items":{"enum":["x","y"]}}},"required":["t"]}`, `{"t":["x","x"]}`},
		{`{"type":"object","properties":{"u":{"anyOf":[{"$ref":"#/x"},{"type":"string","format":"uri"}]}},"required":["u"]}`, `{"u":"https://example.com/"}`},
		{`{"allOf":[{"properties":{"a":{"type":"boolean"}},"required":["a"]},{"properties":{"b":{"const":3}},"required":["b"]}]}`, `{"a":false,"b":3}`},
		{`{"type":"object","properties":{"d":{"type":"string","default":"x"}},"required":["d"]}`, `{"d":"x"}`},
		{`{}`, `{}`},
		{`{"$defs":{"F":{"type":"object","properties":{"n":{"type":"integer","maximum":0}},"required":["n"]}},"type":"object","properties":{"f":{"$ref":"#/$defs/F"}},"required":["f"]}`, `{"f":{"n":0}}`},
	} {
		args, why := fillArgs(json.RawMessage(tc.schema))
		got, _ := json.Marshal(args)
		if why != "" || string(got) != tc.want {
			t.Errorf("%s: %s (%s), want %s", tc.schema, got, why, tc.want)
		}
	}
	if _, why := fillArgs(json.RawMessage(`{"type":"object","properties":{"r":{"$ref":"#/defs/r"}},"required":["r"]}`)); why == "" {
		t.Error("a $ref was filled")
	}
}

// check --url against serve mcp --http in both eras, and against the
// bridge: every row that applies passes, the others are "not run" with
// the reason.
func TestCheckURL(t *testing.T) {
	t.Parallel()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	modern, _ := startServeHTTP(t, "0")
	legacy, _ := startServeHTTP(t, "0", "--era", "legacy")
	bridged, _ := startBridgeHTTP(t, testserver.Command("mcp"), self)
	slow := []string{"--slow-tool", "slow_report", "--slow-args", `{"steps":40,"delay_ms":50}`}
	for _, tc := range []struct {
		name, url string
		args      []string
		want      map[string]string
	}{
		{"modern", modern, slow, map[string]string{"era": pass, "status codes": pass, "header mirroring": pass, "origin": pass,
			"disconnect": pass, "listen": pass}},
		{"legacy", legacy, slow, map[string]string{"era": pass, "status codes": pass, "header mirroring": notRun, "origin": pass,
			"disconnect": pass, "listen": notRun}},
		{"bridge", bridged, nil, map[string]string{"era": pass, "status codes": pass, "header mirroring": pass, "origin": pass,
			"disconnect": notRun, "listen": pass}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rep, code := runCheckURL(t, tc.url, tc.args...)
			wantRows(t, rep, tc.want)
			if code != 0 || !rep.Passed {
				t.Errorf("exit %d passed %v", code, rep.Passed)
			}
			if tc.name == "legacy" && !strings.Contains(row(rep, "era").Evidence, "legacy") {
				t.Errorf("era: %s", row(rep, "era").Evidence)
			}
		})
	}
}

// check --url against an endpoint that wants a bearer token: without
// --token the era fails on the 401 and nothing else has a verdict; with it
// the battery runs (its raw probes send the token too).
func TestCheckURLWithToken(t *testing.T) {
	t.Parallel()
	url, _ := startServeHTTP(t, "0", "--token", "s3cret-token")
	rep, code := runCheckURL(t, url)
	wantRows(t, rep, map[string]string{"era": fail, "status codes": notRun, "origin": notRun, "listen": notRun})
	if r := row(rep, "era"); !strings.Contains(r.Evidence, "401") || code != 1 {
		t.Errorf("exit %d, era %s", code, r.Evidence)
	}
	rep, code = runCheckURL(t, url, "--token", "s3cret-token")
	wantRows(t, rep, map[string]string{"era": pass, "status codes": pass, "header mirroring": pass, "origin": pass, "listen": pass})
	if code != 0 {
		t.Errorf("exit %d", code)
	}
}

// A server that claims 2026-07-28 and then serves everything with 200:
// a body that is not JSON, headers that contradict the body, a foreign
// Origin. check --url fails it on each, saying what it got.
func TestCheckURLAgainstALyingServer(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		json.Unmarshal(body, &m)
		w.Header().Set("Content-Type", "application/json")
		if len(m.ID) == 0 {
			m.ID = json.RawMessage("null")
		}
		result := `{"tools":[],"resultType":"complete"}`
		if m.Method == "server/discover" {
			result = `{"supportedVersions":["2026-07-28"],"capabilities":{"tools":{}},"resultType":"complete","_meta":{"io.modelcontextprotocol/serverInfo":{"name":"liar","version":"1"}}}`
		}
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":%s}`, m.ID, result)
	}))
	t.Cleanup(srv.Close)
	rep, code := runCheckURL(t, srv.URL+"/mcp", "--request-timeout", "0.5s")
	wantRows(t, rep, map[string]string{"era": pass, "status codes": fail, "header mirroring": fail, "origin": fail})
	if r := row(rep, "origin"); !strings.Contains(r.Evidence, "200") {
		t.Errorf("origin evidence: %s", r.Evidence)
	}
	if r := row(rep, "header mirroring"); !strings.Contains(r.Evidence, "served as if it matched") {
		t.Errorf("header evidence: %s", r.Evidence)
	}
	if code != 1 || rep.Passed {
		t.Errorf("exit %d passed %v", code, rep.Passed)
	}
}

func runCheckURL(t *testing.T, url string, args ...string) (checkReport, int) {
	t.Helper()
	cmd := exec.Command(binary, append([]string{"check", "--json", "--url", url}, args...)...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	var rep checkReport
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("check --json printed %q: %v (stderr %s)", out.Bytes(), err, errb.Bytes())
	}
	return rep, code
}

// A server slow to start is not silent: within the startup allowance its
// probe answer counts, and the era row says it was slow.
func TestCheckSlowStartingServer(t *testing.T) {
	t.Parallel()
	rep, code, _, _ := runCheckMode(t, "mcp-slow-start", "--probe-timeout", "0.3s", "--startup-allowance", "2s")
	wantRows(t, rep, map[string]string{"era": pass, "unknown method": pass, "concurrency": pass, "shutdown": pass})
	if r := row(rep, "era"); !strings.Contains(r.Evidence, "slow to start") || !strings.Contains(r.Evidence, "probe result") {
		t.Errorf("era: %s", r.Evidence)
	}
	if code != 0 {
		t.Errorf("exit %d", code)
	}
}

// When the run's --timeout runs out, what was not seen in time is "not
// run", never a warning or a failure of the server (nor a killed shutdown).
func TestCheckRunOutOfTime(t *testing.T) {
	t.Parallel()
	rep, code, _, _ := runCheckMode(t, "mcp-hangs-on-garbage", "--timeout", "1s", "--request-timeout", "5s")
	wantRows(t, rep, map[string]string{"era": pass, "unknown method": pass, "not JSON": notRun, "large request": notRun,
		"cancellation": notRun, "shutdown": notRun})
	if r := row(rep, "not JSON"); !strings.Contains(r.Evidence, "--timeout (1s) ran out") {
		t.Errorf("not JSON: %s", r.Evidence)
	}
	for _, r := range rep.Checks {
		if r.Result == fail || r.Result == warn {
			t.Errorf("%s: %s %s", r.Check, r.Result, r.Evidence)
		}
	}
	if code != 0 {
		t.Errorf("exit %d", code)
	}
}

// A tool that kills the server is that tool's failure, with the exit
// status; a fresh process serves the tools after it and the rest of the
// battery.
func TestCheckCallToolsGoesOnAfterAToolKillsTheServer(t *testing.T) {
	t.Parallel()
	rep, code := runCheckJSON(t, []string{"--call-tools=all"})
	wantRows(t, rep, map[string]string{"tool crash": fail, "restart": info, "tool echo": pass, "cancellation": pass, "shutdown": pass})
	if r := row(rep, "tool crash"); !strings.Contains(r.Evidence, "exit status 3") {
		t.Errorf("crash: %s", r.Evidence)
	}
	crashAt, last := -1, -1
	for i, r := range rep.Checks {
		if r.Check == "tool crash" {
			crashAt = i
		}
		if strings.HasPrefix(r.Check, "tool ") {
			last = i
		}
	}
	if crashAt < 0 || last <= crashAt+1 {
		t.Errorf("no tool was called after crash (crash at %d, last tool at %d)", crashAt, last)
	}
	if code != 1 {
		t.Errorf("exit %d", code)
	}
}

// A server that dies by itself soon after it starts is not blamed on the
// probe that happened to run: a fresh process left alone dies too, and
// the report says the server exits by itself.
func TestCheckServerThatDiesByItself(t *testing.T) {
	t.Parallel()
	rep, code, _, _ := runCheckMode(t, "mcp-dies-soon", "--slow-tool", "slow_report", "--slow-args", `{"steps":40,"delay_ms":50}`)
	// Which probe runs at 300 ms depends on the machine's speed; the
	// cancellation probe (1.3 s with the slow tool) most likely.
	wantRows(t, rep, map[string]string{"era": pass, "lifetime": fail, "shutdown": notRun})
	if r := row(rep, "lifetime"); !strings.Contains(r.Evidence, "lost the database connection") || !strings.Contains(r.Evidence, "nothing but pings") {
		t.Errorf("lifetime: %s", r.Evidence)
	}
	for _, r := range rep.Checks {
		if r.Result == fail && r.Check != "lifetime" {
			t.Errorf("%s blamed: %s", r.Check, r.Evidence)
		}
	}
	if code != 1 {
		t.Errorf("exit %d", code)
	}
}

// A probe's kill is confirmed by the control: the fresh process, left
// alone, outlives the dead one.
func TestCheckDeathIsConfirmedByAControl(t *testing.T) {
	t.Parallel()
	rep, _, _, _ := runCheckMode(t, "mcp-dies-on-garbage")
	if r := row(rep, "restart"); !strings.Contains(r.Evidence, "the death was the probe's doing") {
		t.Errorf("restart: %s", r.Evidence)
	}
}

// An HTTP server that hangs after a body that is not JSON is blamed for
// that, once: the probes after it are not run.
func TestCheckURLAgainstAServerThatHangs(t *testing.T) {
	t.Parallel()
	var hung atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if hung.Load() || (r.Method == http.MethodPost && !json.Valid(body)) {
			hung.Store(true)
			<-r.Context().Done()
			return
		}
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		json.Unmarshal(body, &m)
		w.Header().Set("Content-Type", "application/json")
		result := `{"tools":[],"resultType":"complete"}`
		if m.Method == "server/discover" {
			result = `{"supportedVersions":["2026-07-28"],"capabilities":{"tools":{}},"resultType":"complete","_meta":{"io.modelcontextprotocol/serverInfo":{"name":"hangs","version":"1"}}}`
		}
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":%s}`, m.ID, result)
	}))
	t.Cleanup(srv.Close)
	rep, code := runCheckURL(t, srv.URL+"/mcp", "--request-timeout", "0.3s")
	wantRows(t, rep, map[string]string{"era": pass, "status codes": fail, "server health": fail, "header mirroring": notRun,
		"origin": notRun, "disconnect": notRun, "listen": notRun})
	if r := row(rep, "header mirroring"); !strings.Contains(r.Evidence, `stopped answering after "status codes"`) {
		t.Errorf("header mirroring: %s", r.Evidence)
	}
	if code != 1 {
		t.Errorf("exit %d", code)
	}
}
