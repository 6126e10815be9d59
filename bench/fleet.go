package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// The fleet benchmark (-fleet): agentwire as a fleet, three `agentwire
// serve mcp --http --redis` processes sharing one redis-server, against
// one process with the in-memory task store. It measures a task created
// on one instance and read at once through another, and a resource
// update raised on one instance reaching the listen streams held on the
// others.

// fleetSize is the number of instances in the fleet.
const fleetSize = 3

// taskMeta declares the tasks extension, so that slow_compute (a tool
// that may run as a task) becomes one.
const taskMeta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"bench","version":"1"},"io.modelcontextprotocol/clientCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}}`

type fleetConfig struct {
	out       string
	rounds    int
	dur, warm time.Duration
	idle      time.Duration // how long the idle processes' CPU is measured
	publishes int           // per round
}

// A fleet setup is one side of the comparison.
type fleetSetup struct {
	name   string
	what   string
	n      int  // instances
	shared bool // --redis
}

var fleetSetups = []fleetSetup{
	{name: "fleet", what: "3 instances, --redis (one redis-server); created on one, tasks/get on the next", n: fleetSize, shared: true},
	{name: "single", what: "1 instance, in-memory store (no --redis); created and read on it", n: 1},
}

type fkey struct {
	setup string
	c     int
}

// taskResult is one measurement of create+get pairs at one concurrency.
type taskResult struct {
	pairs          int
	elapsed        time.Duration
	create, get    latencies
	cpu, redisCPU  float64 // seconds over the measurement: the agentwire processes together, and redis-server
	stillWorking   int     // tasks/get answers that still said working
	commands       []commandStat
	commandsPaired int // pairs the command stats cover
}

type latencies struct{ p50, p99 time.Duration }

func (r taskResult) pairsPerSec() float64 { return float64(r.pairs) / r.elapsed.Seconds() }

// cpuPerReq is the agentwire processes' CPU per HTTP request (a pair is two).
func (r taskResult) cpuPerReq() float64 { return r.cpu / float64(2*r.pairs) }

// allCPUPerReq adds redis-server's.
func (r taskResult) allCPUPerReq() float64 { return (r.cpu + r.redisCPU) / float64(2*r.pairs) }

// idleCPU is CPU seconds per second of an idle setup: its agentwire
// processes together, and redis-server.
type idleCPU struct{ aw, redis float64 }

// fanoutResult is one round's publishes.
type fanoutResult struct {
	publishes int
	remote    []time.Duration // each other instance's stream, per publish
	slowest   []time.Duration // the last of the other instances' streams, per publish
	local     []time.Duration // the stream on the instance that raised it
	trigger   []time.Duration // the tools/call round trip that raised it
	lost      int             // deliveries that never came (within 2 s)
}

type fleetRun struct {
	cfg         fleetConfig
	concurrency []int
	bin         string // the agentwire binary
	redisVer    string
	samples     map[fkey][]taskResult
	fanout      []fanoutResult
	idle        map[string][]idleCPU
	elapsed     time.Duration
}

// runFleetBench runs the fleet benchmark and writes results/fleet.md.
func runFleetBench(cfg fleetConfig) error {
	start := time.Now()
	if _, err := redisBin(); err != nil {
		return fmt.Errorf("redis-server: %w", err)
	}
	dir, err := os.MkdirTemp("", "bench-fleet-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	bin, err := buildAgentwire(dir)
	if err != nil {
		return err
	}
	r := &fleetRun{cfg: cfg, concurrency: []int{1, 16}, bin: bin, samples: map[fkey][]taskResult{}, idle: map[string][]idleCPU{}}
	for round := range cfg.rounds {
		setups := slices.Clone(fleetSetups)
		rand.Shuffle(len(setups), func(i, j int) { setups[i], setups[j] = setups[j], setups[i] })
		for _, s := range setups {
			if err := r.measureSetup(round, s); err != nil {
				return fmt.Errorf("round %d, %s: %w", round+1, s.name, err)
			}
		}
	}
	r.elapsed = time.Since(start)
	if err := os.MkdirAll(cfg.out, 0o755); err != nil {
		return err
	}
	path := filepath.Join(cfg.out, "fleet.md")
	if err := os.WriteFile(path, []byte(r.report()), 0o644); err != nil {
		return err
	}
	fmt.Printf("wrote %s in %v\n", path, r.elapsed.Round(time.Second))
	return nil
}

// buildAgentwire builds the CLI (cmd/agentwire, a module of its own in
// the repository's workspace, with redisstate) into dir. It is built, not
// imported, so that go-redis never enters the bench's build list.
func buildAgentwire(dir string) (string, error) {
	bin := filepath.Join(dir, "agentwire")
	goTool := "go"
	if p, err := exec.LookPath("go"); err == nil {
		goTool = p
	}
	cmd := exec.Command(goTool, "build", "-o", bin, ".")
	cmd.Dir = filepath.Join("..", "cmd", "agentwire")
	fmt.Fprintln(os.Stderr, "fleet: go build ../cmd/agentwire")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ../cmd/agentwire: %v\n%s", err, out)
	}
	return bin, nil
}

// fleet is what one setup runs: its instances, and its redis-server.
type fleet struct {
	redis *redisProc
	procs []*awProc
}

func (r *fleetRun) startFleet(s fleetSetup) (*fleet, error) {
	f := &fleet{}
	if s.shared {
		rp, err := startRedisServer()
		if err != nil {
			return nil, err
		}
		f.redis = rp
		r.redisVer = rp.version()
	}
	for range s.n {
		args := []string{"serve", "mcp", "--http", "127.0.0.1:0", "--fixtures", "conformance"}
		if f.redis != nil {
			args = append(args, "--redis", f.redis.url())
		}
		p, err := startAgentwire(r.bin, args...)
		if err != nil {
			f.stop()
			return nil, err
		}
		f.procs = append(f.procs, p)
	}
	return f, nil
}

func (f *fleet) stop() {
	for _, p := range f.procs {
		p.stop()
	}
	if f.redis != nil {
		f.redis.stop()
	}
}

func (f *fleet) urls() []string {
	u := make([]string, len(f.procs))
	for i, p := range f.procs {
		u[i] = p.url
	}
	return u
}

// cpu is the agentwire processes' CPU seconds together, and redis-server's.
func (f *fleet) cpu() (aw, redis float64, err error) {
	for _, p := range f.procs {
		s, err := cpuSeconds(p.pid)
		if err != nil {
			return 0, 0, err
		}
		aw += s
	}
	if f.redis != nil {
		if redis, err = cpuSeconds(f.redis.pid); err != nil {
			return 0, 0, err
		}
	}
	return aw, redis, nil
}

func (f *fleet) stderr() string {
	var b strings.Builder
	for i, p := range f.procs {
		if s := p.stderr.String(); s != "" {
			fmt.Fprintf(&b, "[instance %d] %s ", i, s)
		}
	}
	return b.String()
}

func (r *fleetRun) measureSetup(round int, s fleetSetup) error {
	f, err := r.startFleet(s)
	if err != nil {
		return err
	}
	defer f.stop()
	// What the processes spend doing nothing asked of them: the lease
	// renewals, the sweeper and the key ring of a fleet, and Go's own.
	time.Sleep(200 * time.Millisecond)
	aw0, rd0, err := f.cpu()
	if err != nil {
		return err
	}
	t0 := time.Now()
	time.Sleep(r.cfg.idle)
	aw1, rd1, err := f.cpu()
	if err != nil {
		return err
	}
	secs := time.Since(t0).Seconds()
	r.idle[s.name] = append(r.idle[s.name], idleCPU{aw: (aw1 - aw0) / secs, redis: (rd1 - rd0) / secs})
	cs := slices.Clone(r.concurrency)
	rand.Shuffle(len(cs), func(i, j int) { cs[i], cs[j] = cs[j], cs[i] })
	for _, c := range cs {
		fmt.Fprintf(os.Stderr, "fleet round %d/%d %-6s tasks C=%d\n", round+1, r.cfg.rounds, s.name, c)
		res, err := r.driveTasks(f, c)
		if err != nil {
			return fmt.Errorf("C=%d: %w; stderr: %s", c, err, f.stderr())
		}
		k := fkey{s.name, c}
		r.samples[k] = append(r.samples[k], res)
	}
	if s.shared {
		fmt.Fprintf(os.Stderr, "fleet round %d/%d %-6s fan-out, %d publishes\n", round+1, r.cfg.rounds, s.name, r.cfg.publishes)
		res, err := fanout(f.urls(), r.cfg.publishes)
		if err != nil {
			return fmt.Errorf("fan-out: %w; stderr: %s", err, f.stderr())
		}
		r.fanout = append(r.fanout, res)
	}
	return nil
}

// ----- task create + get -----

// taskClient is one simulated client: sequential pairs, each a
// tools/call of slow_compute {"seconds":0} that becomes a task on one
// instance, then tasks/get of that task on the next instance round.
type taskClient struct {
	loads []*httpLoad // one per instance, on a shared transport
	next  int
	who   string
	id    int64
}

type taskAnswer struct {
	Result struct {
		ResultType string `json:"resultType"`
		TaskID     string `json:"taskId"`
		Status     string `json:"status"`
	} `json:"result"`
}

// pair creates a task and reads it back through the next instance.
func (tc *taskClient) pair(create, get *[]time.Duration, working *int) error {
	a := tc.loads[tc.next]
	tc.next = (tc.next + 1) % len(tc.loads)
	b := tc.loads[tc.next]

	tc.id++
	id := strconv.FormatInt(tc.id, 10)
	body := &a.body
	body.Reset()
	body.WriteString(`{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{` + taskMeta +
		`,"name":"slow_compute","arguments":{"seconds":0,"label":"` + tc.who + "-" + id + `"}}}`)
	t0 := time.Now()
	res, err := a.post("tools/call", "slow_compute", body.Bytes())
	if err != nil {
		return err
	}
	msg, err := a.answer(res, id)
	if err != nil {
		return fmt.Errorf("tools/call: %w", err)
	}
	*create = append(*create, time.Since(t0))
	var ta taskAnswer
	if err := json.Unmarshal(msg, &ta); err != nil || ta.Result.ResultType != "task" || ta.Result.TaskID == "" {
		return fmt.Errorf("tools/call slow_compute did not make a task: %s", summarize(msg))
	}
	task := ta.Result.TaskID

	tc.id++
	id = strconv.FormatInt(tc.id, 10)
	body = &b.body
	body.Reset()
	body.WriteString(`{"jsonrpc":"2.0","id":` + id + `,"method":"tasks/get","params":{` + taskMeta + `,"taskId":"` + task + `"}}`)
	t1 := time.Now()
	res, err = b.post("tasks/get", task, body.Bytes())
	if err != nil {
		return err
	}
	msg, err = b.answer(res, id)
	if err != nil {
		return fmt.Errorf("tasks/get of a task created through another instance: %w", err)
	}
	*get = append(*get, time.Since(t1))
	var tg taskAnswer
	if err := json.Unmarshal(msg, &tg); err != nil || tg.Result.TaskID != task {
		return fmt.Errorf("tasks/get %s: %s", task, summarize(msg))
	}
	switch tg.Result.Status {
	case "working":
		*working++
	case "completed":
	default:
		return fmt.Errorf("tasks/get %s: status %q: %s", task, tg.Result.Status, summarize(msg))
	}
	return nil
}

// driveTasks runs c clients against the fleet for warm, then for dur
// with the processes' CPU time measured around it (and Redis's command
// statistics reset before and read after).
func (r *fleetRun) driveTasks(f *fleet, c int) (taskResult, error) {
	urls := f.urls()
	tr := newTransport(c * len(urls))
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr}
	clients := make([]*taskClient, c)
	for i := range clients {
		tc := &taskClient{who: "c" + strconv.Itoa(i), next: i % len(urls)}
		for _, u := range urls {
			tc.loads = append(tc.loads, newHTTPLoad(hc, u, true, tc.who))
		}
		clients[i] = tc
	}
	if _, err := runTaskClients(clients, r.cfg.warm); err != nil {
		return taskResult{}, err
	}
	if f.redis != nil {
		if _, err := f.redis.do("CONFIG", "RESETSTAT"); err != nil {
			return taskResult{}, err
		}
	}
	aw0, rd0, err := f.cpu()
	if err != nil {
		return taskResult{}, err
	}
	out, err := runTaskClients(clients, r.cfg.dur)
	if err != nil {
		return taskResult{}, err
	}
	aw1, rd1, err := f.cpu()
	if err != nil {
		return taskResult{}, err
	}
	out.cpu, out.redisCPU = aw1-aw0, rd1-rd0
	if f.redis != nil {
		if out.commands, err = f.redis.commandStats(); err != nil {
			return taskResult{}, err
		}
		out.commandsPaired = out.pairs
	}
	return out, nil
}

func runTaskClients(clients []*taskClient, d time.Duration) (taskResult, error) {
	type result struct {
		create, get []time.Duration
		working     int
		err         error
	}
	outs := make(chan result, len(clients))
	start := time.Now()
	deadline := start.Add(d)
	for _, tc := range clients {
		go func() {
			o := result{create: make([]time.Duration, 0, 1024), get: make([]time.Duration, 0, 1024)}
			for time.Now().Before(deadline) {
				if err := tc.pair(&o.create, &o.get, &o.working); err != nil {
					o.err = err
					break
				}
			}
			outs <- o
		}()
	}
	var create, get []time.Duration
	res := taskResult{}
	var firstErr error
	for range clients {
		o := <-outs
		if o.err != nil && firstErr == nil {
			firstErr = o.err
		}
		create = append(create, o.create...)
		get = append(get, o.get...)
		res.stillWorking += o.working
	}
	res.elapsed = time.Since(start)
	if firstErr != nil {
		return res, firstErr
	}
	res.pairs = len(get)
	if res.pairs == 0 {
		return res, errors.New("no task created and read")
	}
	res.create, res.get = percentiles(create), percentiles(get)
	return res, nil
}

func percentiles(d []time.Duration) latencies {
	if len(d) == 0 {
		return latencies{}
	}
	slices.Sort(d)
	return latencies{p50: d[len(d)/2], p99: d[len(d)*99/100]}
}

// ----- publish -> listen across instances -----

// fanout holds a subscriptions/listen stream of test://static-text on
// every instance and raises the resource's update (the
// test_trigger_resource_update tool) n times, round robin across the
// instances, one at a time: each time, until every stream has delivered
// notifications/resources/updated.
func fanout(urls []string, n int) (fanoutResult, error) {
	res := fanoutResult{publishes: n}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	streams := make([]chan time.Time, len(urls))
	acks := make(chan error, len(urls))
	for i, u := range urls {
		streams[i] = make(chan time.Time, 1024)
		go listenStream(ctx, u, "L"+strconv.Itoa(i), streams[i], acks)
	}
	for range urls {
		select {
		case err := <-acks:
			if err != nil {
				return res, err
			}
		case <-time.After(10 * time.Second):
			return res, errors.New("a listen stream was not acknowledged within 10 s")
		}
	}
	tr := newTransport(len(urls))
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr}
	triggers := make([]*httpLoad, len(urls))
	for i, u := range urls {
		triggers[i] = newHTTPLoad(hc, u, true, "t")
	}
	for k := range n {
		from := k % len(urls)
		l := triggers[from]
		l.id++
		id := strconv.FormatInt(l.id, 10)
		body := `{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{` + modernMeta + `,"name":"test_trigger_resource_update","arguments":{"uri":"test://static-text"}}}`
		t0 := time.Now()
		resp, err := l.post("tools/call", "test_trigger_resource_update", []byte(body))
		if err != nil {
			return res, err
		}
		if _, err := l.answer(resp, id); err != nil {
			return res, fmt.Errorf("test_trigger_resource_update: %w", err)
		}
		res.trigger = append(res.trigger, time.Since(t0))
		var slowest time.Duration
		lost := false
		for i, ch := range streams {
			select {
			case t := <-ch:
				d := t.Sub(t0)
				if i == from {
					res.local = append(res.local, d)
				} else {
					res.remote = append(res.remote, d)
					slowest = max(slowest, d)
				}
			case <-time.After(2 * time.Second):
				res.lost++
				lost = true
			}
		}
		if lost {
			// A late delivery must not count for the next publish.
			time.Sleep(200 * time.Millisecond)
			for _, ch := range streams {
				for len(ch) > 0 {
					<-ch
				}
			}
		} else {
			res.slowest = append(res.slowest, slowest)
		}
	}
	return res, nil
}

// listenStream holds one listen stream open until ctx ends, sending the
// time each notifications/resources/updated arrives; the
// acknowledgment (or the failure to get one) goes to acks.
func listenStream(ctx context.Context, url, id string, updates chan<- time.Time, acks chan<- error) {
	body := `{"jsonrpc":"2.0","id":"` + id + `","method":"subscriptions/listen","params":{` + modernMeta + `,"notifications":{"resourceSubscriptions":["test://static-text"]}}}`
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		acks <- err
		return
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", modernVersion)
	req.Header.Set("Mcp-Method", "subscriptions/listen")
	resp, err := (&http.Client{Transport: &http.Transport{DisableCompression: true}}).Do(req)
	if err != nil {
		acks <- err
		return
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		acks <- fmt.Errorf("subscriptions/listen: HTTP %s, %s", resp.Status, resp.Header.Get("Content-Type"))
		return
	}
	sc := bufio.NewScanner(resp.Body)
	acked := false
	for sc.Scan() {
		d, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		switch {
		case strings.Contains(d, `"notifications/resources/updated"`):
			updates <- time.Now()
		case !acked && strings.Contains(d, `"notifications/subscriptions/acknowledged"`):
			acked = true
			acks <- nil
		}
	}
	if !acked {
		acks <- errors.New("the listen stream ended before its acknowledgment")
	}
}

// ----- an agentwire process -----

// awProc is one `agentwire serve mcp --http` process.
type awProc struct {
	url    string
	pid    int
	cmd    *exec.Cmd
	exited chan error
	stderr *tailBuffer
}

// startAgentwire runs the CLI and waits for the URL it announces on
// stderr ("serving MCP over Streamable HTTP at http://...").
func startAgentwire(bin string, args ...string) (*awProc, error) {
	p := &awProc{cmd: exec.Command(bin, args...), stderr: &tailBuffer{max: 8 << 10}, exited: make(chan error, 1)}
	dieWithParent(p.cmd)
	errPipe, err := p.cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := p.cmd.Start(); err != nil {
		return nil, err
	}
	p.pid = p.cmd.Process.Pid
	got := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(errPipe)
		for sc.Scan() {
			line := sc.Text()
			if _, u, ok := strings.Cut(line, "serving MCP over Streamable HTTP at "); ok {
				select {
				case got <- strings.TrimSpace(u):
				default:
				}
				continue
			}
			p.stderr.Write([]byte(line + "\n"))
		}
		p.exited <- p.cmd.Wait()
	}()
	select {
	case p.url = <-got:
		return p, nil
	case err := <-p.exited:
		p.exited <- err
		return nil, fmt.Errorf("agentwire %s exited: %v: %s", strings.Join(args, " "), err, p.stderr.String())
	case <-time.After(20 * time.Second):
		p.stop()
		return nil, fmt.Errorf("agentwire %s: no address within 20 s: %s", strings.Join(args, " "), p.stderr.String())
	}
}

// stop ends the process as an operator would (SIGTERM), then kills it
// if it lingers.
func (p *awProc) stop() {
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(10 * time.Second):
		p.cmd.Process.Kill()
		<-p.exited
	}
}
