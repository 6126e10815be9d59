package main

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentwire/agentwire/internal/testserver"
)

// The hostile-client suite: crafted input against the real binary.

// postMCP sends one 2026-07-28 request to an endpoint and returns the
// status and the JSON-RPC message of the answer (the last data line of an
// event stream).
func postMCP(t *testing.T, url, body string, headers map[string]string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", "2026-07-28")
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	s := strings.TrimSpace(string(b))
	if strings.Contains(s, "data: ") {
		lines := strings.Split(s, "\n")
		for j := len(lines) - 1; j >= 0; j-- {
			if d, ok := strings.CutPrefix(lines[j], "data: "); ok {
				return resp.StatusCode, d
			}
		}
	}
	return resp.StatusCode, s
}

// processCPU is the user+system CPU time a process has used so far.
func processCPU(t *testing.T, pid int) time.Duration {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		t.Skipf("no /proc here: %v", err)
	}
	// Fields after the command name (which may hold spaces) in parentheses.
	fields := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
	utime, _ := strconv.ParseInt(fields[11], 10, 64)
	stime, _ := strconv.ParseInt(fields[12], 10, 64)
	const ticksPerSecond = 100 // USER_HZ on Linux
	return time.Duration(utime+stime) * time.Second / ticksPerSecond
}

// A number with a huge exponent in an Mcp-Param- header, compared with the
// argument it mirrors, cost ~76 ms of CPU per 231-byte request. The
// bound (docs/security.md): no request of at most 4 KiB costs more than 5 ms.
func TestHostileExponentHeaderCPU(t *testing.T) {
	url, cmd, _ := startServeHTTPCmd(t, "0")
	pid := cmd.Process.Pid
	const n = 100
	cases := []struct{ arg, header string }{
		{"1e1000000", "1e1000000"},
		{"1e1000000", "1e999999"},
		{"1E+999999999999999999999999", "10E+999999999999999999999998"},
		{"0." + strings.Repeat("0", 3000) + "1", "1e-3001"},
	}
	before := processCPU(t, pid)
	for i := range n {
		c := cases[i%len(cases)]
		body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{` + hostileMeta + `,"name":"test_custom_headers","arguments":{"count":` + c.arg + `}}}`
		if len(body) > 4096 {
			t.Fatalf("case %d is %d bytes", i, len(body))
		}
		status, got := postMCP(t, url, body, map[string]string{"Mcp-Method": "tools/call", "Mcp-Name": "test_custom_headers", "Mcp-Param-Count": c.header})
		if status != http.StatusOK && status != http.StatusBadRequest {
			t.Fatalf("%+v: status %d %s", c, status, got)
		}
	}
	cpu := processCPU(t, pid) - before
	if per := cpu / n; per > 5*time.Millisecond {
		t.Errorf("%v of server CPU per exponent request (bound 5 ms)", per)
	}
	t.Logf("%d exponent requests cost the server %v of CPU", n, cpu)
}

// A key repeated inside params — the tool's name, an argument — used to be
// read last-one-wins, so a proxy that read the first and the server that
// read the last disagreed about what was called. Both over stdio and over
// HTTP (where Mcp-Name names the first), it is refused and nothing runs.
func TestHostileDuplicateParamsKeys(t *testing.T) {
	bodies := []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{` + hostileMeta + `,"name":"echo","name":"crash","arguments":{}}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{` + hostileMeta + `,"name":"echo","arguments":{"text":"a","text":"b"}}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{` + hostileMeta + `,"name":"echo","arguments":{"text":"a"},"arguments":{"text":"b"}}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/protocolVersion":"2025-11-25","io.modelcontextprotocol/clientCapabilities":{}},"name":"echo","arguments":{"text":"a"}}}`,
	}
	refused := func(t *testing.T, got string) {
		t.Helper()
		if !strings.Contains(got, `"error"`) || !(strings.Contains(got, "-32602") || strings.Contains(got, "-32600")) {
			t.Errorf("a repeated key was accepted: %s", got)
		}
	}
	t.Run("stdio", func(t *testing.T) {
		cmd := exec.Command(binary, "serve", "mcp")
		in, _ := cmd.StdinPipe()
		out, _ := cmd.StdoutPipe()
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		defer func() { in.Close(); cmd.Wait() }()
		c := &lineConn{t: t, w: in, rd: bufio.NewReader(out)}
		for _, b := range bodies {
			c.send(b)
			got := c.readUntil(`"id":1`, 5*time.Second)
			refused(t, got[len(got)-1])
		}
		c.send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{` + hostileMeta + `,"name":"echo","arguments":{"text":"still here"}}}`)
		c.readUntil("still here", 5*time.Second)
	})
	t.Run("http", func(t *testing.T) {
		url, _ := startServeHTTP(t, "0", "--demo-tools")
		for _, b := range bodies {
			_, got := postMCP(t, url, b, map[string]string{"Mcp-Method": "tools/call", "Mcp-Name": "echo"})
			refused(t, got)
		}
		_, got := postMCP(t, url, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{`+hostileMeta+`,"name":"echo","arguments":{"text":"still here"}}}`,
			map[string]string{"Mcp-Method": "tools/call", "Mcp-Name": "echo"})
		if !strings.Contains(got, "still here") {
			t.Errorf("after the repeated keys: %s", got)
		}
	})
}

// When the stdio server behind the bridge died, its stderr tail (which may
// hold what it logged at start-up: an API key) reached every HTTP client
// with a request in flight. Now it reaches the bridge's own log only.
func TestHostileBridgeKeepsServerStderr(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	url, stop := startBridgeHTTP(t, testserver.Command("mcp-secret"), self)
	for _, hdr := range []map[string]string{
		{"Mcp-Method": "tools/call", "Mcp-Name": "crash"},
	} {
		_, got := postMCP(t, url, `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{`+hostileMeta+`,"name":"crash","arguments":{}}}`, hdr)
		if strings.Contains(got, testserver.SecretInStderr) || strings.Contains(got, "stderr") {
			t.Fatalf("the client got the server's stderr: %s", got)
		}
		if !strings.Contains(got, `"error"`) || !strings.Contains(got, "lost") {
			t.Errorf("the client was not told the server was lost: %s", got)
		}
	}
	// The server is restarted and serves the next client.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for ctx.Err() == nil {
		_, got := postMCP(t, url, `{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{`+hostileMeta+`,"name":"echo","arguments":{"text":"after the crash"}}}`,
			map[string]string{"Mcp-Method": "tools/call", "Mcp-Name": "echo"})
		if strings.Contains(got, "after the crash") {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if log := stop(); !strings.Contains(log, testserver.SecretInStderr) {
		t.Errorf("the bridge's own log lacks the server's stderr:\n%s", log)
	}
}
