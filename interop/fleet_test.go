//go:build linux

package interop

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/agentwire/agentwire/internal/debpkg"
	"github.com/agentwire/agentwire/jsonrpc"
	"github.com/agentwire/agentwire/mcp"
	"github.com/agentwire/agentwire/mcp/host"
	"github.com/agentwire/agentwire/mcp/streamable"
)

// The fleet tests (issue 18): three `agentwire serve mcp --http
// --fixtures conformance --redis URL` instances sharing a real
// redis-server, behind nginx in round robin (debpkg fetches both from
// Debian's packages when they are not installed). Requests through the
// balancer land on every instance in turn; nginx's access log says which
// instance answered each one, and the tests check that a scenario was
// served by more than one.

const (
	fleetLease = 2 * time.Second // --redis-lease
	fleetTTL   = 3 * time.Second // --task-ttl: ended tasks leave Redis soon
	// fleetMeta is a 2026-07-28 request's _meta for raw POSTs: a client
	// that can answer elicitations and take tasks.
	fleetMeta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"fleet-test","version":"1"},` +
		`"io.modelcontextprotocol/clientCapabilities":{"elicitation":{},"extensions":{"io.modelcontextprotocol/tasks":{}}}}`
)

// fleetInstance is one `agentwire serve mcp` of the fleet.
type fleetInstance struct {
	url    string
	addr   string // host:port, as nginx's access log names it
	cmd    *exec.Cmd
	exited chan struct{} // closed once the process has exited
	err    error         // how it exited, once exited is closed
	mu     sync.Mutex
	log    strings.Builder
	killed atomic.Bool
}

func (in *fleetInstance) stderr() string {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.log.String()
}

// kill ends the instance as a crash would (SIGKILL) and waits for it.
func (in *fleetInstance) kill(t *testing.T) {
	t.Helper()
	in.killed.Store(true)
	in.cmd.Process.Signal(syscall.SIGKILL)
	select {
	case <-in.exited:
	case <-time.After(10 * time.Second):
		t.Fatal("a killed instance did not exit")
	}
}

// rss is the instance's resident memory (VmRSS), in bytes.
func (in *fleetInstance) rss(t *testing.T) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", in.cmd.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				t.Fatalf("VmRSS %q: %v", v, err)
			}
			return kb << 10
		}
	}
	t.Fatal("no VmRSS in /proc/PID/status")
	return 0
}

// startFleetInstance runs `agentwire serve mcp --http 127.0.0.1:0` as a
// member of the fleet on redisURL. At the end of the test it gets SIGTERM
// and must exit 0, unless the test killed it.
func startFleetInstance(t *testing.T, redisURL string) *fleetInstance {
	t.Helper()
	args := []string{"serve", "mcp", "--http", "127.0.0.1:0", "--fixtures", "conformance",
		"--redis", redisURL, "--redis-lease", fleetLease.String(), "--task-ttl", fleetTTL.String()}
	cmd := exec.Command(binary, args...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	in := &fleetInstance{cmd: cmd, exited: make(chan struct{})}
	urls := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			in.mu.Lock()
			in.log.WriteString(sc.Text() + "\n")
			in.mu.Unlock()
			if m := endpointLine.FindStringSubmatch(sc.Text()); m != nil {
				urls <- m[1]
			}
		}
		in.err = cmd.Wait()
		close(in.exited)
	}()
	t.Cleanup(func() {
		if in.killed.Load() {
			<-in.exited
			return
		}
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-in.exited:
			if in.err != nil {
				t.Errorf("agentwire %v after SIGTERM: %v\n%s", args, in.err, in.stderr())
			}
		case <-time.After(20 * time.Second):
			cmd.Process.Kill()
			<-in.exited
			t.Errorf("agentwire %v did not exit after SIGTERM\n%s", args, in.stderr())
		}
	})
	select {
	case in.url = <-urls:
		in.addr = strings.TrimSuffix(strings.TrimPrefix(in.url, "http://"), "/mcp")
		return in
	case <-in.exited:
		t.Fatalf("agentwire %v exited: %v\n%s", args, in.err, in.stderr())
	case <-time.After(30 * time.Second):
		t.Fatalf("agentwire %v printed no endpoint\n%s", args, in.stderr())
	}
	return nil
}

// fleet is a Redis, three instances on it and nginx in front of them.
type fleet struct {
	redis  *debpkg.Redis
	inst   []*fleetInstance
	lb     string // the balancer's endpoint
	access string // nginx's access log
	http   *http.Client
}

func startFleet(t *testing.T) *fleet {
	t.Helper()
	r := debpkg.StartRedis(t)
	f := &fleet{redis: r}
	var upstreams []string
	for range 3 {
		in := startFleetInstance(t, r.URL())
		f.inst = append(f.inst, in)
		upstreams = append(upstreams, in.url)
	}
	f.lb, f.access = startNginx(t, upstreams)
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		for i, in := range f.inst {
			lines := strings.Split(strings.TrimSpace(in.stderr()), "\n")
			t.Logf("instance %d (%s), the end of its stderr:\n%s", i, in.addr, strings.Join(lines[max(0, len(lines)-40):], "\n"))
		}
	})
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 64
	f.http = &http.Client{Transport: tr, Timeout: 30 * time.Second}
	t.Cleanup(tr.CloseIdleConnections)
	return f
}

// logLine is one request in nginx's access log.
type logLine struct {
	status   int
	upstream string // the instance that answered (the last one tried)
	method   string // Mcp-Method, "-" when absent
	name     string // Mcp-Name, "-" when absent
}

var accessLine = regexp.MustCompile(`^(\S+) (\d+) (.+) (\S+) (\S+)$`)

// mark is where the access log ends now: since(mark) reads what comes
// after.
func (f *fleet) mark(t *testing.T) int {
	t.Helper()
	fi, err := os.Stat(f.access)
	if err != nil {
		return 0
	}
	return int(fi.Size())
}

func (f *fleet) since(t *testing.T, mark int) []logLine {
	t.Helper()
	raw, err := os.ReadFile(f.access)
	if err != nil {
		t.Fatal(err)
	}
	var out []logLine
	for line := range strings.Lines(string(raw[mark:])) {
		m := accessLine.FindStringSubmatch(strings.TrimSpace(line))
		if m == nil {
			t.Fatalf("an access log line not understood: %q", line)
		}
		ups := strings.Split(m[3], ", ")
		status, _ := strconv.Atoi(m[2])
		out = append(out, logLine{status: status, upstream: ups[len(ups)-1], method: m[4], name: m[5]})
	}
	return out
}

// servedBy counts, by instance, the logged requests that match.
func servedBy(lines []logLine, match func(logLine) bool) map[string]int {
	by := map[string]int{}
	for _, l := range lines {
		if match(l) {
			by[l.upstream]++
		}
	}
	return by
}

// connect opens an agentwire host session with url (the balancer or one
// instance) that answers elicitations with answer.
func connect(t *testing.T, url string, answer map[string]any) *host.Session {
	t.Helper()
	opts := &host.Options{Eras: mcp.ModernOnly, Capabilities: map[string]any{"elicitation": map[string]any{}}}
	if answer != nil {
		opts.OnInput = func(_ context.Context, req mcp.InputRequest) (any, error) {
			if req.Method != mcp.MethodElicit {
				return nil, fmt.Errorf("asked %s", req.Method)
			}
			return answer, nil
		}
	}
	sess, err := streamable.Connect(t.Context(), url, opts, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sess.Close() })
	if sess.Era() != mcp.Modern {
		t.Fatalf("era %s", sess.Era())
	}
	return sess
}

// postResult is a raw 2026-07-28 answer, as much of it as the tests read.
type postResult struct {
	Result struct {
		ResultType    string                     `json:"resultType"`
		TaskID        string                     `json:"taskId"`
		Status        string                     `json:"status"`
		StatusMessage string                     `json:"statusMessage"`
		InputRequests map[string]json.RawMessage `json:"inputRequests"`
		RequestState  string                     `json:"requestState"`
		Content       []struct {
			Text string `json:"text"`
		} `json:"content"`
		Result *struct {
			Content []struct {
				Text string `json:"text"`
			} `json:"content"`
		} `json:"result"`
	} `json:"result"`
	Error *jsonrpc.Error `json:"error"`
	raw   string
}

// post sends one JSON-RPC request as a POST of its own, with the headers
// a 2026-07-28 client sends (Mcp-Name when name is not empty), and reads
// the answer (the last event of an event stream).
func (f *fleet) post(ctx context.Context, url string, id int64, method, params, name string) (*postResult, error) {
	body := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":%q,"params":{%s,%s}}`, id, method, fleetMeta, params)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", method)
	if name != "" {
		req.Header.Set("Mcp-Name", name)
	}
	resp, err := f.http.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	s := strings.TrimSpace(string(b))
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		last := ""
		for line := range strings.Lines(s) {
			if d, ok := strings.CutPrefix(strings.TrimSpace(line), "data: "); ok {
				last = d
			}
		}
		s = last
	}
	res := &postResult{raw: s}
	if err := json.Unmarshal([]byte(s), res); err != nil {
		return nil, fmt.Errorf("HTTP %d, not a JSON-RPC answer: %q", resp.StatusCode, s)
	}
	return res, nil
}

func (f *fleet) mustPost(t *testing.T, url string, id int64, method, params, name string) *postResult {
	t.Helper()
	res, err := f.post(t.Context(), url, id, method, params, name)
	if err != nil {
		t.Fatalf("%s: %v", method, err)
	}
	return res
}

// poll calls cond every interval until it holds, failing t after within.
func poll(t *testing.T, within, interval time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %v: %s", within, what)
		}
		time.Sleep(interval)
	}
}

// waitStatus polls tasks/get of task until it reports one of the given
// statuses, failing t after within.
func waitStatus(t *testing.T, task *host.Task, within time.Duration, statuses ...string) *host.TaskState {
	t.Helper()
	var st *host.TaskState
	var err error
	poll(t, within, 20*time.Millisecond, fmt.Sprintf("task %s %v", task.ID(), statuses), func() bool {
		st, err = task.Get(t.Context())
		if err != nil {
			t.Fatalf("tasks/get %s: %v (%s)", task.ID(), err, time.Now().Format("15:04:05.000"))
		}
		for _, s := range statuses {
			if st.Status == s {
				return true
			}
		}
		return false
	})
	return st
}

func isCode(err error, code int64) bool {
	var je *jsonrpc.Error
	return errors.As(err, &je) && je.Code == code
}

func resultText(r *mcp.ToolResult) string {
	if r == nil || len(r.Content) == 0 {
		return ""
	}
	return r.Content[0].Text
}

// atLeastTwo fails t unless the requests counted came from two instances
// or more.
func atLeastTwo(t *testing.T, what string, by map[string]int) {
	t.Helper()
	if len(by) < 2 {
		t.Errorf("%s: served by %d instance(s) %v, want at least 2", what, len(by), by)
	}
}

// Issue 18: three instances on one Redis, behind nginx in round robin,
// serve as one server. A task created through the balancer is polled,
// answered and cancelled through the others; a resource update raised
// on one instance reaches listen streams on all three; a multi-round-trip
// retry sealed by one instance completes on another.
func TestFleetServesAsOneBehindTheLoadBalancer(t *testing.T) {
	f := startFleet(t)
	ctx := t.Context()

	t.Run("a task created through the balancer is polled, answered and cancelled through the other instances", func(t *testing.T) {
		sess := connect(t, f.lb, nil)
		mark := f.mark(t)

		task, err := sess.StartTool(ctx, "confirm_delete", map[string]any{"filename": "notes.txt"})
		if err != nil || task.ID() == "" {
			t.Fatalf("confirm_delete: %v (a task? %q)", err, task.ID())
		}
		st := waitStatus(t, task, 10*time.Second, "input_required")
		var key string
		for k, req := range st.InputRequests {
			if req.Method != mcp.MethodElicit {
				t.Fatalf("input request %s: %+v", k, req)
			}
			key = k
		}
		if len(st.InputRequests) != 1 {
			t.Fatalf("input requests %+v", st.InputRequests)
		}
		if err := task.Update(ctx, map[string]any{key: map[string]any{"action": "accept", "content": map[string]any{"confirm": true}}}); err != nil {
			t.Fatal(err)
		}
		st = waitStatus(t, task, 10*time.Second, "completed", "failed", "cancelled")
		if st.Status != "completed" || resultText(st.Result) != "deleted notes.txt" {
			t.Fatalf("the answered task ended %s: %+v %v", st.Status, st.Result, st.Error)
		}

		long, err := sess.StartTool(ctx, "slow_compute", map[string]any{"seconds": 60, "label": "long"})
		if err != nil || long.ID() == "" {
			t.Fatalf("slow_compute: %v (a task? %q)", err, long.ID())
		}
		waitStatus(t, long, 10*time.Second, "working")
		if err := long.Cancel(ctx); err != nil {
			t.Fatal(err)
		}
		st = waitStatus(t, long, 10*time.Second, "cancelled", "completed", "failed")
		if st.Status != "cancelled" {
			t.Fatalf("the cancelled task ended %s: %+v", st.Status, st)
		}
		// It stays cancelled: the handler, stopped on its instance, does
		// not record an outcome over it.
		if st, err := long.Get(ctx); err != nil || st.Status != "cancelled" {
			t.Fatalf("the cancelled task then reads %+v %v", st, err)
		}

		lines := f.since(t, mark)
		for _, l := range lines {
			if l.status != http.StatusOK {
				t.Errorf("the balancer answered %+v", l)
			}
			if (l.method == "tools/call" || strings.HasPrefix(l.method, "tasks/")) && l.name == "-" {
				t.Errorf("a %s without Mcp-Name: %+v", l.method, l)
			}
		}
		for _, c := range []struct {
			task    *host.Task
			tool    string
			methods []string
		}{
			{task, "confirm_delete", []string{"tasks/get", "tasks/update"}},
			{long, "slow_compute", []string{"tasks/get", "tasks/cancel"}},
		} {
			id := c.task.ID()
			created := servedBy(lines, func(l logLine) bool { return l.method == "tools/call" && l.name == c.tool })
			if len(created) != 1 {
				t.Fatalf("the call that created %s: %v", id, created)
			}
			named := servedBy(lines, func(l logLine) bool { return strings.HasPrefix(l.method, "tasks/") && l.name == id })
			atLeastTwo(t, "the tasks/* requests naming "+id, named)
			for _, m := range c.methods {
				if len(servedBy(lines, func(l logLine) bool { return l.method == m && l.name == id })) == 0 {
					t.Errorf("no %s with Mcp-Name %s in the access log", m, id)
				}
			}
		}
	})

	t.Run("a resource update raised on one instance reaches the listen streams of all three", func(t *testing.T) {
		uris := []string{"test://static-text", "test://watched-resource", "test://static-binary"}
		type stream struct {
			sess *host.Session
			got  chan string
		}
		var streams []stream
		for _, in := range f.inst {
			s := stream{sess: connect(t, in.url, nil), got: make(chan string, 64)}
			sub, err := s.sess.Listen(ctx, host.ListenFilter{ResourceSubscriptions: uris}, func(method string, p json.RawMessage) {
				var u struct {
					URI string `json:"uri"`
				}
				if method == "notifications/resources/updated" && json.Unmarshal(p, &u) == nil {
					s.got <- u.URI
				}
			})
			if err != nil {
				t.Fatal(err)
			}
			defer sub.Close()
			if h := sub.Honored(); len(h.ResourceSubscriptions) != len(uris) {
				t.Fatalf("honored %+v", h)
			}
			streams = append(streams, s)
		}
		// Raised on each instance in turn (called on it directly, not
		// through the balancer), with a resource of its own.
		for i, origin := range streams {
			res, err := origin.sess.CallTool(ctx, "test_trigger_resource_update", map[string]any{"uri": uris[i]})
			if err != nil || resultText(res) != "announced "+uris[i] {
				t.Fatalf("trigger on instance %d: %+v %v", i, res, err)
			}
			for j, s := range streams {
				select {
				case uri := <-s.got:
					if uri != uris[i] {
						t.Errorf("instance %d's stream heard of %s, want %s", j, uri, uris[i])
					}
				case <-time.After(10 * time.Second):
					t.Fatalf("the update raised on instance %d never reached the stream on instance %d\n%s", i, j, f.inst[j].stderr())
				}
			}
		}
		for j, s := range streams {
			select {
			case uri := <-s.got:
				t.Errorf("instance %d's stream heard of %s once more", j, uri)
			default:
			}
		}
	})

	t.Run("a multi-round-trip retry completes on another instance than the one that sealed its requestState", func(t *testing.T) {
		a, b, c := f.inst[0].url, f.inst[1].url, f.inst[2].url
		// Round 1 on A, the retry on B.
		r1 := f.mustPost(t, a, 1, "tools/call", `"name":"test_input_required_result_request_state","arguments":{}`, "test_input_required_result_request_state")
		if r1.Result.ResultType != "input_required" || r1.Result.RequestState == "" || r1.Result.InputRequests["confirm"] == nil {
			t.Fatalf("round 1 on A: %s", r1.raw)
		}
		r2 := f.mustPost(t, b, 2, "tools/call", `"name":"test_input_required_result_request_state","arguments":{},`+
			`"inputResponses":{"confirm":{"action":"accept","content":{"ok":true}}},"requestState":`+strconv.Quote(r1.Result.RequestState), "test_input_required_result_request_state")
		if r2.Error != nil || len(r2.Result.Content) != 1 || r2.Result.Content[0].Text != "state-ok: confirmed=true" {
			t.Fatalf("the retry on B: %s", r2.raw)
		}

		// A tool that gathers its input first and then becomes a task:
		// asked on A, retried on B (which makes the task), polled on C.
		r1 = f.mustPost(t, a, 3, "tools/call", `"name":"test_tool_with_task","arguments":{}`, "test_tool_with_task")
		if r1.Result.ResultType != "input_required" || r1.Result.InputRequests["user_name"] == nil {
			t.Fatalf("round 1 on A: %s", r1.raw)
		}
		state := ""
		if r1.Result.RequestState != "" {
			state = `,"requestState":` + strconv.Quote(r1.Result.RequestState)
		}
		r2 = f.mustPost(t, b, 4, "tools/call", `"name":"test_tool_with_task","arguments":{},`+
			`"inputResponses":{"user_name":{"action":"accept","content":{"name":"Ada"}}}`+state, "test_tool_with_task")
		id := r2.Result.TaskID
		if r2.Result.ResultType != "task" || id == "" {
			t.Fatalf("the retry on B: %s", r2.raw)
		}
		var done *postResult
		poll(t, 10*time.Second, 20*time.Millisecond, "the task made on B completes, read on C", func() bool {
			done = f.mustPost(t, c, 5, "tasks/get", `"taskId":`+strconv.Quote(id), id)
			if done.Error != nil {
				t.Fatalf("tasks/get on C: %s", done.raw)
			}
			return done.Result.Status != "working" && done.Result.Status != "input_required"
		})
		if done.Result.Status != "completed" || done.Result.Result == nil || len(done.Result.Result.Content) != 1 ||
			done.Result.Result.Content[0].Text != "Hello, Ada, from a task." {
			t.Fatalf("tasks/get on C: %s", done.raw)
		}

		// Through the balancer, agentwire's client answering: every call
		// completes, and round 1 and its retry land on different instances
		// (in round robin they do unless another request slips between
		// them: the call is made again, up to ten times, until they have).
		sess := connect(t, f.lb, map[string]any{"action": "accept", "content": map[string]any{"name": "Grace"}})
		crossed := false
		var last map[string]int
		for try := 0; try < 10 && !crossed; try++ {
			mark := f.mark(t)
			res, err := sess.CallTool(ctx, "test_input_required_result_elicitation", nil)
			if err != nil || resultText(res) != "Hello, Grace!" {
				t.Fatalf("through the balancer: %+v %v", res, err)
			}
			last = servedBy(f.since(t, mark), func(l logLine) bool {
				return l.method == "tools/call" && l.name == "test_input_required_result_elicitation"
			})
			crossed = len(last) >= 2
		}
		if !crossed {
			atLeastTwo(t, "round 1 and its retry, in ten calls", last)
		}
	})
}

// Issue 18: an instance killed mid-task (SIGKILL: no shutdown, its lease
// just stops being renewed) leaves its task failed, "the server instance
// running the task was lost", within the lease and a third of it, as
// read through the instances that remain.
func TestFleetAnInstanceKilledMidTaskLeavesItsTaskFailedWithinTheLease(t *testing.T) {
	f := startFleet(t)
	ctx := t.Context()
	doomed := f.inst[2]
	direct := connect(t, doomed.url, nil)
	task, err := direct.StartTool(ctx, "slow_compute", map[string]any{"seconds": 60, "label": "doomed"})
	if err != nil || task.ID() == "" {
		t.Fatalf("slow_compute: %v (a task? %q)", err, task.ID())
	}
	sess := connect(t, f.lb, nil)
	seen := sess.ResumeTask(task.ID())
	waitStatus(t, seen, 10*time.Second, "working")

	mark := f.mark(t)
	doomed.kill(t)
	killed := time.Now()
	st := waitStatus(t, seen, 10*time.Second, "failed", "completed", "cancelled")
	took := time.Since(killed)
	if st.Status != "failed" || st.StatusMessage != "the server instance running the task was lost" {
		t.Fatalf("after the kill: %+v", st)
	}
	if st.Error == nil || st.Error.Code != jsonrpc.CodeInternalError || !strings.Contains(st.Error.Message, "the server instance running the task was lost") {
		t.Errorf("the failed task's error: %+v", st.Error)
	}
	// The bound: the lease, a third of it for the sweep, and some room
	// for polling on a busy machine.
	if bound := fleetLease + fleetLease/3 + 1500*time.Millisecond; took > bound {
		t.Errorf("failed %v after the kill, past %v", took.Round(time.Millisecond), bound)
	}
	t.Logf("the task of the killed instance failed %v after the kill (lease %v)", took.Round(time.Millisecond), fleetLease)
	by := servedBy(f.since(t, mark), func(l logLine) bool { return l.method == "tasks/get" && l.name == task.ID() })
	atLeastTwo(t, "the polls after the kill", by)
	if by[doomed.addr] > 0 {
		t.Errorf("the killed instance answered %d polls", by[doomed.addr])
	}
	// The survivors go on: a new task completes through the balancer.
	next, err := sess.StartTool(ctx, "slow_compute", map[string]any{"seconds": 0.1, "label": "after"})
	if err != nil {
		t.Fatal(err)
	}
	if st := waitStatus(t, next, 10*time.Second, "completed", "failed", "cancelled"); resultText(st.Result) != `computed "after" after 0.1s` {
		t.Fatalf("a task after the kill: %+v", st)
	}
}

// Issue 18: Redis restarted under a running fleet. While it is down a
// call that requires a task is refused at once with a JSON-RPC error
// that says so, and everything that needs no shared state is served as
// before, by every instance; once it is back (empty), new tasks are
// created and complete through the fleet and listen fan-out works again.
func TestFleetRidesOutARedisRestart(t *testing.T) {
	f := startFleet(t)
	ctx := t.Context()
	var direct []*host.Session
	for _, in := range f.inst {
		direct = append(direct, connect(t, in.url, nil))
	}
	sess := connect(t, f.lb, nil)
	before, err := sess.StartTool(ctx, "slow_compute", map[string]any{"seconds": 0, "label": "before"})
	if err != nil || before.ID() == "" {
		t.Fatalf("before the outage: %v", err)
	}

	f.redis.Kill()
	// Each answer comes well within the bound of a Redis command (2 s),
	// never a hang.
	const prompt = 6 * time.Second
	var slowest time.Duration
	var slowestWhat string
	timed := func(t *testing.T, what string, call func(ctx context.Context) error) {
		t.Helper()
		cctx, cancel := context.WithTimeout(ctx, 2*prompt)
		defer cancel()
		start := time.Now()
		err := call(cctx)
		took := time.Since(start)
		if took > prompt {
			t.Errorf("%s took %v", what, took.Round(time.Millisecond))
		}
		if took > slowest {
			slowest, slowestWhat = took, what
		}
		if err != nil {
			t.Errorf("%s: %v", what, err)
		}
	}
	for i, s := range append(direct, sess) {
		where := fmt.Sprintf("instance %d", i)
		if i == len(direct) {
			where = "the balancer"
		}
		timed(t, where+": tools/list", func(ctx context.Context) error {
			tools, err := s.ListTools(ctx)
			if err == nil && len(tools) < 10 {
				err = fmt.Errorf("%d tools", len(tools))
			}
			return err
		})
		timed(t, where+": a plain tool", func(ctx context.Context) error {
			res, err := s.CallTool(ctx, "echo", map[string]any{"text": "still here"})
			if err == nil && resultText(res) != "still here" {
				err = fmt.Errorf("answered %+v", res)
			}
			return err
		})
		timed(t, where+": a tool that may run as a task runs in its request", func(ctx context.Context) error {
			task, err := s.StartTool(ctx, "slow_compute", map[string]any{"seconds": 0, "label": "inline"})
			if err != nil {
				return err
			}
			if task.ID() != "" {
				return fmt.Errorf("a task %s was made with Redis down", task.ID())
			}
			res, err := task.Wait(ctx, nil)
			if err == nil && resultText(res) != `computed "inline" after 0s` {
				err = fmt.Errorf("answered %+v", res)
			}
			return err
		})
		timed(t, where+": a tool that requires a task is refused", func(ctx context.Context) error {
			task, err := s.StartTool(ctx, "failing_job", nil)
			var je *jsonrpc.Error
			if !errors.As(err, &je) {
				return fmt.Errorf("not a JSON-RPC error: %v (task %v)", err, task)
			}
			if je.Code != jsonrpc.CodeServerBusy || !strings.Contains(je.Message, "cannot start a task now (the task store refused it)") {
				return fmt.Errorf("refused with %d %q", je.Code, je.Message)
			}
			return nil
		})
		timed(t, where+": tasks/get says the store is unavailable", func(ctx context.Context) error {
			_, err := s.ResumeTask(before.ID()).Get(ctx)
			var je *jsonrpc.Error
			if !errors.As(err, &je) || je.Code != jsonrpc.CodeInternalError || !strings.Contains(je.Message, "the task store is unavailable") {
				return fmt.Errorf("tasks/get with Redis down: %v", err)
			}
			return nil
		})
	}
	t.Logf("Redis down: the slowest answer took %v (%s)", slowest.Round(time.Millisecond), slowestWhat)
	if t.Failed() {
		t.FailNow()
	}

	f.redis.Start() // the same port, empty
	back := time.Now()
	// Each instance serves the store again within a bound: go-redis's
	// pool, after failed dials, fails fast with the last dial error and
	// probes once a second until a dial succeeds. A tasks/get of an
	// unknown id tells: -32602 once the store answers, -32603 before.
	for i, s := range direct {
		poll(t, 10*time.Second, 20*time.Millisecond, fmt.Sprintf("instance %d reads the store again", i), func() bool {
			_, err := s.ResumeTask("no-such-task").Get(ctx)
			var je *jsonrpc.Error
			if !errors.As(err, &je) {
				t.Fatalf("instance %d: tasks/get of an unknown task: %v", i, err)
			}
			return je.Code == jsonrpc.CodeInvalidParams
		})
		if took := time.Since(back); took > 5*time.Second {
			t.Errorf("instance %d read the store again %v after Redis was back", i, took.Round(time.Millisecond))
		}
	}
	t.Logf("Redis back: every instance reads the store again after %v", time.Since(back).Round(time.Millisecond))
	mark := f.mark(t)
	task, err := sess.StartTool(ctx, "slow_compute", map[string]any{"seconds": 0.2, "label": "after"})
	if err != nil || task.ID() == "" {
		t.Fatalf("a task after the restart: %v (%q)", err, task.ID())
	}
	st := waitStatus(t, task, 10*time.Second, "completed", "failed", "cancelled")
	if resultText(st.Result) != `computed "after" after 0.2s` {
		t.Fatalf("the task after the restart: %+v", st)
	}
	lines := f.since(t, mark)
	atLeastTwo(t, "the task after the restart", servedBy(lines, func(l logLine) bool {
		return l.name == task.ID() || (l.method == "tools/call" && l.name == "slow_compute")
	}))
	// The task from before is gone with Redis's memory: unknown.
	if _, err := sess.ResumeTask(before.ID()).Get(ctx); !isCode(err, jsonrpc.CodeInvalidParams) {
		t.Errorf("a task from before the restart, now: %v", err)
	}

	// Listen fan-out again: streams opened after the restart, on every
	// instance, hear of an update raised on another. The Pub/Sub links
	// come back on their own; until they have, an update is lost (at
	// most once), so it is raised again until every stream has one.
	got := make([]chan struct{}, len(direct))
	for i, s := range direct {
		got[i] = make(chan struct{}, 64)
		sub, err := s.Listen(ctx, host.ListenFilter{ResourceSubscriptions: []string{"test://watched-resource"}}, func(method string, _ json.RawMessage) {
			if method == "notifications/resources/updated" {
				got[i] <- struct{}{}
			}
		})
		if err != nil {
			t.Fatal(err)
		}
		defer sub.Close()
	}
	heard := make([]bool, len(direct))
	raised := 0
	poll(t, 15*time.Second, time.Millisecond, "every stream hears of an update after the restart", func() bool {
		if _, err := direct[raised%len(direct)].CallTool(ctx, "test_trigger_resource_update", map[string]any{"uri": "test://watched-resource"}); err != nil {
			t.Fatal(err)
		}
		raised++
		timeout := time.After(300 * time.Millisecond)
		for {
			all := true
			for i := range got {
				select {
				case <-got[i]:
					heard[i] = true
				default:
				}
				all = all && heard[i]
			}
			if all {
				return true
			}
			select {
			case <-timeout:
				return false
			case <-time.After(10 * time.Millisecond):
			}
		}
	})
	t.Logf("fan-out after the restart: %d update(s) raised until all three streams heard", raised)
}

// Issue 18: 10,000 short tasks through the balancer (16 at a time, each
// created and left to end) leave no growth behind: every instance's
// resident memory stays within a generous bound of what it was after a
// warm-up, and Redis forgets the ended tasks once their TTL has passed.
func TestFleetRunsTenThousandTasksWithoutGrowing(t *testing.T) {
	if testing.Short() {
		t.Skip("10,000 tasks: not in -short")
	}
	f := startFleet(t)
	ctx := t.Context()
	var maxDB atomic.Int64
	run := func(t *testing.T, from, n int) (last []string) {
		t.Helper()
		var next atomic.Int64
		next.Store(int64(from))
		var mu sync.Mutex
		var failures []string
		lastIDs := make([]string, 0, 64)
		var wg sync.WaitGroup
		for range 16 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					i := next.Add(1) - 1
					if i >= int64(from+n) {
						return
					}
					label := fmt.Sprintf("t%d", i)
					res, err := f.post(ctx, f.lb, i, "tools/call", `"name":"slow_compute","arguments":{"seconds":0,"label":"`+label+`"}`, "slow_compute")
					mu.Lock()
					switch {
					case err != nil:
						failures = append(failures, err.Error())
					case res.Error != nil || res.Result.ResultType != "task" || res.Result.TaskID == "":
						failures = append(failures, res.raw)
					case i >= int64(from+n-64):
						lastIDs = append(lastIDs, res.Result.TaskID)
					}
					mu.Unlock()
				}
			}()
		}
		// Redis's size while they run.
		stop := make(chan struct{})
		sampled := make(chan struct{})
		go func() {
			defer close(sampled)
			tick := time.NewTicker(250 * time.Millisecond)
			defer tick.Stop()
			for {
				select {
				case <-stop:
					return
				case <-tick.C:
					if n, err := f.redis.Int("DBSIZE"); err == nil && n > maxDB.Load() {
						maxDB.Store(n)
					}
				}
			}
		}()
		wg.Wait()
		close(stop)
		<-sampled
		if len(failures) > 0 {
			t.Fatalf("%d of %d calls failed; the first: %s", len(failures), n, failures[0])
		}
		return lastIDs
	}
	// ended waits until no task is live and the recent ones read
	// completed, with their result, through the balancer.
	ended := func(t *testing.T, ids []string) {
		t.Helper()
		poll(t, 20*time.Second, 50*time.Millisecond, "every task has ended", func() bool {
			n, err := f.redis.Int("ZCARD", "agentwire:live")
			return err == nil && n == 0
		})
		for _, id := range ids {
			res, err := f.post(ctx, f.lb, 1, "tasks/get", `"taskId":`+strconv.Quote(id), id)
			if err != nil {
				t.Fatal(err)
			}
			if res.Result.Status != "completed" || res.Result.Result == nil || len(res.Result.Result.Content) != 1 ||
				!strings.HasPrefix(res.Result.Result.Content[0].Text, `computed "t`) {
				t.Fatalf("a recent task: %s", res.raw)
			}
		}
	}
	// settled is an instance's resident memory once it has stopped
	// moving (two readings half a second apart within 1 MiB), or after
	// 5 s.
	settled := func(t *testing.T, in *fleetInstance) int64 {
		t.Helper()
		prev := in.rss(t)
		deadline := time.Now().Add(5 * time.Second)
		for {
			time.Sleep(500 * time.Millisecond)
			cur := in.rss(t)
			if d := cur - prev; (d < 1<<20 && d > -(1<<20)) || time.Now().After(deadline) {
				return cur
			}
			prev = cur
		}
	}

	const warm, total = 1000, 10000
	start := time.Now()
	ended(t, run(t, 0, warm))
	base := make([]int64, len(f.inst))
	for i, in := range f.inst {
		base[i] = settled(t, in)
	}
	t.Logf("warm-up: %d tasks in %v; resident memory %v MiB", warm, time.Since(start).Round(time.Millisecond), mibs(base))

	start = time.Now()
	ids := run(t, warm, total-warm)
	took := time.Since(start)
	ended(t, ids)
	t.Logf("%d tasks in %v (%.0f/s); Redis held at most %d keys", total-warm, took.Round(time.Millisecond), float64(total-warm)/took.Seconds(), maxDB.Load())

	// Redis forgets them: the records expire with their TTL, the sweepers
	// clear the indexes.
	var keys, endedSet int64
	forget := time.Now()
	poll(t, fleetTTL+15*time.Second, 100*time.Millisecond, "Redis forgets the ended tasks", func() bool {
		var err, err2 error
		keys, err = f.redis.Int("DBSIZE")
		endedSet, err2 = f.redis.Int("ZCARD", "agentwire:ended")
		return err == nil && err2 == nil && keys <= 8 && endedSet == 0
	})
	t.Logf("Redis forgot them %v after the last ended", time.Since(forget).Round(time.Millisecond))

	after := make([]int64, len(f.inst))
	for i, in := range f.inst {
		after[i] = settled(t, in)
	}
	t.Logf("after %d tasks: resident memory %v MiB (after the warm-up %v); Redis %d keys", total, mibs(after), mibs(base), keys)
	// Generous (the growth measured is about 1 MiB), yet a leak of a
	// goroutine (2 KiB of stack at least) or a task record per task would
	// pass it over 9,000 tasks.
	const room = 10 << 20
	for i := range f.inst {
		if after[i] > base[i]+room {
			t.Errorf("instance %d grew from %d MiB to %d MiB over %d tasks", i, base[i]>>20, after[i]>>20, total-warm)
		}
	}
}

func mibs(b []int64) []string {
	var out []string
	for _, v := range b {
		out = append(out, fmt.Sprintf("%.1f", float64(v)/(1<<20)))
	}
	return out
}
