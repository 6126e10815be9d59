//go:build unix

package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// taskOf reads the task of a 2025-11-25 CreateTaskResult ({"task":{...}}),
// of a 2026-07-28 one (flat), or of a tasks/get answer.
func taskOf(t *testing.T, line string) (id, status string) {
	t.Helper()
	var r struct {
		Result struct {
			TaskID string `json:"taskId"`
			Status string `json:"status"`
			Task   *struct {
				TaskID string `json:"taskId"`
				Status string `json:"status"`
			} `json:"task"`
		} `json:"result"`
	}
	if err := json.Unmarshal([]byte(line), &r); err != nil {
		t.Fatalf("not JSON: %s", line)
	}
	if r.Result.Task != nil {
		return r.Result.Task.TaskID, r.Result.Task.Status
	}
	return r.Result.TaskID, r.Result.Status
}

// legacyTaskSession is a 2025-11-25 client speaking raw lines to the
// server on one transport: send returns the answer to one request.
type legacyTaskSession func(t *testing.T, line string) string

// Issue 17 acceptance: a 2025-11-25 client (raw wire) creates, lists,
// polls, gets the result of and cancels tasks on `serve mcp --fixtures
// conformance`, over stdio and over HTTP (where every request is a POST
// of its own: the task outlives the request that created it). Over
// stateless HTTP without a token nothing tells one client from another,
// so tasks/list shows an anonymous client no task (ids are their only
// protection there) and the capability does not offer it.
func TestALegacyClientRunsTasksOnTheFixtureServer(t *testing.T) {
	for _, tr := range []struct {
		name  string
		start func(t *testing.T) legacyTaskSession
	}{
		{"stdio", startStdioLegacy},
		{"http", startHTTPLegacy},
	} {
		t.Run(tr.name, func(t *testing.T) {
			send := tr.start(t)
			init := send(t, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
			if !strings.Contains(init, `"tasks":{`) || !strings.Contains(init, `"requests":{"tools":{"call":{}}}`) {
				t.Fatalf("no tasks capability: %s", init)
			}
			list := send(t, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`)
			if !strings.Contains(list, `"execution":{"taskSupport":"optional"}`) {
				t.Fatalf("tools/list shows no taskSupport: %.300s", list)
			}
			created := send(t, `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"slow_compute","arguments":{"seconds":0.3,"label":"raw"},"task":{"ttl":60000}}}`)
			id, status := taskOf(t, created)
			if id == "" || status != "working" || !strings.Contains(created, `"ttl":60000`) || !strings.Contains(created, `"pollInterval":`) {
				t.Fatalf("not a 2025-11-25 CreateTaskResult: %s", created)
			}
			if _, st := taskOf(t, send(t, `{"jsonrpc":"2.0","id":4,"method":"tasks/get","params":{"taskId":"`+id+`"}}`)); st == "" {
				t.Fatalf("tasks/get gave no status")
			}
			l := send(t, `{"jsonrpc":"2.0","id":5,"method":"tasks/list"}`)
			if tr.name == "stdio" && !strings.Contains(l, id) {
				t.Fatalf("tasks/list does not list %s: %s", id, l)
			}
			if tr.name == "http" && (!strings.Contains(l, `"tasks":[]`) || strings.Contains(init, `"list":{}`)) {
				// Stateless anonymous requests cannot be told apart: none
				// is shown another's tasks, and tasks.list is not declared.
				t.Fatalf("an anonymous HTTP client's tasks/list: %s (initialize: %s)", l, init)
			}
			res := send(t, `{"jsonrpc":"2.0","id":6,"method":"tasks/result","params":{"taskId":"`+id+`"}}`)
			if !strings.Contains(res, `computed \"raw\" after 0.3s`) || !strings.Contains(res, `"io.modelcontextprotocol/related-task":{"taskId":"`+id+`"}`) {
				t.Fatalf("tasks/result: %s", res)
			}
			if _, st := taskOf(t, send(t, `{"jsonrpc":"2.0","id":7,"method":"tasks/get","params":{"taskId":"`+id+`"}}`)); st != "completed" {
				t.Fatalf("after the result: %s", st)
			}
			long, _ := taskOf(t, send(t, `{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"slow_compute","arguments":{"seconds":60,"label":"long"},"task":{}}}`))
			if _, st := taskOf(t, send(t, `{"jsonrpc":"2.0","id":9,"method":"tasks/cancel","params":{"taskId":"`+long+`"}}`)); st != "cancelled" {
				t.Fatalf("tasks/cancel answered status %q", st)
			}
			if again := send(t, `{"jsonrpc":"2.0","id":10,"method":"tasks/cancel","params":{"taskId":"`+long+`"}}`); !strings.Contains(again, `"code":-32602`) {
				t.Fatalf("cancelling an ended task: %s", again)
			}
			if unknown := send(t, `{"jsonrpc":"2.0","id":11,"method":"tasks/get","params":{"taskId":"nope"}}`); !strings.Contains(unknown, `"code":-32602`) {
				t.Fatalf("an unknown task: %s", unknown)
			}
			failed := send(t, `{"jsonrpc":"2.0","id":12,"method":"tools/call","params":{"name":"protocol_error_job","arguments":{},"task":{}}}`)
			fid, _ := taskOf(t, failed)
			if r := send(t, `{"jsonrpc":"2.0","id":13,"method":"tasks/result","params":{"taskId":"`+fid+`"}}`); !strings.Contains(r, `"error":{"code":-32603`) {
				t.Fatalf("a failed task's result: %s", r)
			}
		})
	}
}

func startStdioLegacy(t *testing.T) legacyTaskSession {
	cmd := exec.Command(binary, "serve", "mcp", "--fixtures", "conformance")
	in, _ := cmd.StdinPipe()
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { in.Close(); cmd.Wait() })
	lines := make(chan string, 16)
	go func() {
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	sentInitialized := false
	return func(t *testing.T, line string) string {
		t.Helper()
		fmt.Fprintln(in, line)
		var req struct {
			ID json.RawMessage `json:"id"`
		}
		json.Unmarshal([]byte(line), &req)
		deadline := time.After(20 * time.Second)
		for {
			select {
			case l, ok := <-lines:
				if !ok {
					t.Fatal("the server ended")
				}
				var m struct {
					ID json.RawMessage `json:"id"`
				}
				json.Unmarshal([]byte(l), &m)
				if string(m.ID) == string(req.ID) {
					if !sentInitialized {
						fmt.Fprintln(in, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
						sentInitialized = true
					}
					return l
				}
			case <-deadline:
				t.Fatalf("no answer to %s", line)
			}
		}
	}
}

func startHTTPLegacy(t *testing.T) legacyTaskSession {
	url, _ := startServeHTTP(t, "127.0.0.1:0", "--fixtures", "conformance")
	return func(t *testing.T, line string) string {
		t.Helper()
		_, body := postMCP(t, url, line, map[string]string{"MCP-Protocol-Version": "2025-11-25"})
		return body
	}
}

// Issue 17 acceptance: a 2026-07-28 task survives its creating request:
// created over one POST, polled, answered and cancelled over others,
// with Mcp-Name naming the task on each.
func TestAModernTaskOutlivesItsCreatingRequest(t *testing.T) {
	url, _ := startServeHTTP(t, "127.0.0.1:0", "--fixtures", "conformance")
	const meta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"raw","version":"1"},"io.modelcontextprotocol/clientCapabilities":{"elicitation":{},"extensions":{"io.modelcontextprotocol/tasks":{}}}}`
	call := func(id int, method, params string, name string) string {
		h := map[string]string{"Mcp-Method": method}
		if name != "" {
			h["Mcp-Name"] = name
		}
		_, body := postMCP(t, url, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"%s","params":{%s,%s}}`, id, method, meta, params), h)
		return body
	}
	created := call(1, "tools/call", `"name":"confirm_delete","arguments":{"filename":"a.txt"}`, "confirm_delete")
	id, _ := taskOf(t, created)
	if id == "" || !strings.Contains(created, `"resultType":"task"`) {
		t.Fatalf("not a task: %s", created)
	}
	var key string
	deadline := time.Now().Add(10 * time.Second)
	for key == "" && time.Now().Before(deadline) {
		var r struct {
			Result struct {
				Status        string                     `json:"status"`
				InputRequests map[string]json.RawMessage `json:"inputRequests"`
			} `json:"result"`
		}
		json.Unmarshal([]byte(call(2, "tasks/get", `"taskId":"`+id+`"`, id)), &r)
		for k := range r.Result.InputRequests {
			key = k
		}
		if key == "" {
			time.Sleep(20 * time.Millisecond)
		}
	}
	if key == "" {
		t.Fatal("the task never asked for input")
	}
	if ack := call(3, "tasks/update", `"taskId":"`+id+`","inputResponses":{"`+key+`":{"action":"accept","content":{"confirm":true}}}`, id); !strings.Contains(ack, `"resultType":"complete"`) || strings.Contains(ack, `"status"`) {
		t.Fatalf("update ack: %s", ack)
	}
	var final string
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if final = call(4, "tasks/get", `"taskId":"`+id+`"`, id); strings.Contains(final, `"status":"completed"`) {
			break
		}
	}
	if !strings.Contains(final, `deleted a.txt`) {
		t.Fatalf("the answered task: %s", final)
	}
	long, _ := taskOf(t, call(5, "tools/call", `"name":"slow_compute","arguments":{"seconds":60,"label":"x"}`, "slow_compute"))
	if ack := call(6, "tasks/cancel", `"taskId":"`+long+`"`, long); !strings.Contains(ack, `"resultType":"complete"`) {
		t.Fatalf("cancel ack: %s", ack)
	}
	if st := call(7, "tasks/get", `"taskId":"`+long+`"`, long); !strings.Contains(st, `"status":"cancelled"`) {
		t.Fatalf("after cancel: %s", st)
	}
	if bad := call(8, "tasks/get", `"taskId":"`+long+`"`, "another-task"); !strings.Contains(bad, `"code":-32020`) {
		t.Fatalf("a mismatched Mcp-Name: %s", bad)
	}
	_ = io.Discard
}
