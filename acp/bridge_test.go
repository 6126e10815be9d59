//go:build unix

package acp_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/agentwire/agentwire/acp"
	"github.com/agentwire/agentwire/internal/testserver"
	"github.com/agentwire/agentwire/internal/wiretest"
	"github.com/agentwire/agentwire/rpc"
)

// live is a connection in real time (the bridged MCP server is a real
// process, which a synctest bubble cannot wait for).
type live struct {
	t     *testing.T
	in    *io.PipeWriter
	lines chan string
	conn  *rpc.Conn
}

func startLive(t *testing.T) *live {
	h, o := acp.ConnOptions(testAgent(), nil, &rpc.Options{Logger: wiretest.Quiet})
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	l := &live{t: t, in: inW, lines: make(chan string, 100)}
	l.conn = rpc.New(inR, outW, h, o)
	go func() {
		sc := bufio.NewScanner(outR)
		for sc.Scan() {
			l.lines <- sc.Text()
		}
		close(l.lines)
	}()
	return l
}

func (l *live) call(line string) string {
	l.t.Helper()
	io.WriteString(l.in, line+"\n")
	select {
	case got := <-l.lines:
		return got
	case <-time.After(20 * time.Second):
		l.t.Fatalf("no answer to %s", line)
		return ""
	}
}

// A7: mcp/connect starts a declared stdio MCP server through agentwire's
// MCP client; mcp/message forwards and returns the inner result (or the
// inner error); mcp/disconnect ends the bridge; a message for a bridge that
// is not connected gets a clear error.
func TestMCPBridge(t *testing.T) {
	exe, _ := os.Executable()
	env, _ := json.Marshal([]map[string]string{{"name": testserver.Env, "value": "mcp"}, {"name": "GORACE", "value": "atexit_sleep_ms=0"}})
	l := startLive(t)
	defer func() {
		l.in.Close()
		l.conn.Wait()
	}()
	l.call(initLine)
	l.call(fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/tmp","mcpServers":[{"name":"seed","command":%q,"args":[],"env":%s}]}}`, exe, env))

	if got := l.call(`{"jsonrpc":"2.0","id":2,"method":"mcp/message","params":{"connectionId":"mcp-1","method":"tools/list"}}`); !strings.Contains(got, `"code":-32602`) || !strings.Contains(got, "not connected") {
		t.Fatalf("message before connect: %s", got)
	}
	got := l.call(`{"jsonrpc":"2.0","id":3,"method":"mcp/connect","params":{"serverId":"seed"}}`)
	if got != `{"jsonrpc":"2.0","id":3,"result":{"connectionId":"mcp-1"}}` {
		t.Fatalf("connect: %s", got)
	}
	got = l.call(`{"jsonrpc":"2.0","id":4,"method":"mcp/message","params":{"connectionId":"mcp-1","method":"tools/call","params":{"name":"echo","arguments":{"text":"through the bridge"}}}}`)
	if !strings.Contains(got, `"text":"through the bridge"`) {
		t.Fatalf("tools/call: %s", got)
	}
	got = l.call(`{"jsonrpc":"2.0","id":5,"method":"mcp/message","params":{"connectionId":"mcp-1","method":"tools/call","params":{"name":"nope"}}}`)
	if !strings.Contains(got, `"id":5,"error":{"code":-32602`) || !strings.Contains(got, "unknown tool") {
		t.Fatalf("inner error: %s", got)
	}
	if got := l.call(`{"jsonrpc":"2.0","id":6,"method":"mcp/connect","params":{"serverId":"undeclared"}}`); !strings.Contains(got, `"code":-32602`) {
		t.Fatalf("undeclared server: %s", got)
	}
	if got := l.call(`{"jsonrpc":"2.0","id":7,"method":"mcp/disconnect","params":{"connectionId":"mcp-1"}}`); got != `{"jsonrpc":"2.0","id":7,"result":{}}` {
		t.Fatalf("disconnect: %s", got)
	}
	if got := l.call(`{"jsonrpc":"2.0","id":8,"method":"mcp/message","params":{"connectionId":"mcp-1","method":"tools/list"}}`); !strings.Contains(got, "not connected") {
		t.Fatalf("message after disconnect: %s", got)
	}
	// A bridge left open is ended with the connection.
	if got := l.call(`{"jsonrpc":"2.0","id":9,"method":"mcp/connect","params":{"serverId":"seed"}}`); !strings.Contains(got, `"connectionId":"mcp-2"`) {
		t.Fatalf("second connect: %s", got)
	}
}

func pidsAlive(t *testing.T, dir string) []int {
	t.Helper()
	b, _ := os.ReadFile(dir + "/starts")
	var alive []int
	for _, f := range strings.Fields(string(b)) {
		pid := 0
		fmt.Sscan(f, &pid)
		st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err == nil && strings.Fields(string(st))[2] != "Z" {
			alive = append(alive, pid)
		}
	}
	return alive
}

// Regression (found in review): an mcp/connect still starting its server
// when input ends, or when its session is closed in the same write, left
// the server running with nobody to stop it.
func TestRegressionBridgeStartingAtTheEndIsStopped(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("needs /proc")
	}
	exe, _ := os.Executable()
	for _, ending := range []string{"eof", "close"} {
		t.Run(ending, func(t *testing.T) {
			dir := t.TempDir()
			env, _ := json.Marshal([]map[string]string{{"name": testserver.Env, "value": "mcp"},
				{"name": "GORACE", "value": "atexit_sleep_ms=0"}, {"name": testserver.StateEnv, "value": dir}})
			l := startLive(t)
			l.call(initLine)
			l.call(fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/tmp","mcpServers":[{"name":"seed","command":%q,"args":[],"env":%s}]}}`, exe, env))
			connect := `{"jsonrpc":"2.0","id":2,"method":"mcp/connect","params":{"serverId":"seed"}}` + "\n"
			if ending == "close" {
				io.WriteString(l.in, connect+`{"jsonrpc":"2.0","id":3,"method":"session/close","params":{"sessionId":"sess-1"}}`+"\n")
				time.Sleep(2 * time.Second)
			} else {
				io.WriteString(l.in, connect)
			}
			l.in.Close()
			l.conn.Wait()
			deadline := time.Now().Add(10 * time.Second)
			for len(pidsAlive(t, dir)) > 0 && time.Now().Before(deadline) {
				time.Sleep(50 * time.Millisecond)
			}
			if alive := pidsAlive(t, dir); len(alive) > 0 {
				for _, pid := range alive {
					p, _ := os.FindProcess(pid)
					p.Kill()
				}
				t.Fatalf("bridged servers left running: %v", alive)
			}
			for range l.lines {
			}
		})
	}
}
