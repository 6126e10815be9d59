package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentwire/agentwire/acp"
	"github.com/agentwire/agentwire/acp/acpclient"

	acpsdk "github.com/coder/acp-go-sdk"
)

// The ACP client rows: agentwire's client (acp/acpclient) and acp-go-sdk's
// ClientSideConnection each drive the same agent, agentwire's
// (serveAgentwireACP: every prompt answered with 10 message chunks), in
// this process over OS pipes and in a subprocess (this binary with -serve
// agentwire-acp). 16 sessions prompt in a loop, one prompt per session at a
// time. A prompt counts only when its stop reason arrived and its handler
// saw all 10 chunks, each with the text the agent sent; a prompt that
// returns with fewer fails the row, whatever its speed. CPU is the bench
// process's getrusage over the timed prompts and allocations its
// runtime.MemStats: in-process they include the agent (the same one for
// both clients), in a subprocess they are the client's alone.

// acpClientAgent is the agent every client drives: the agentwire-acp row's
// (named so that the subprocess serves it, whatever -only keeps).
var acpClientAgent = server{name: "agentwire-acp", peer: "agentwire acp", work: wACP, serve: serveAgentwireACP}

// acpClient is one client implementation under test.
type acpClient struct {
	name string
	peer string
	// connect initializes a connection over r (the agent's output) and w
	// (its input), counting every session/update into u.
	connect func(ctx context.Context, r io.Reader, w io.WriteCloser, u *updateCounts) (acpClientConn, error)
}

// acpClientConn is a connected client.
type acpClientConn interface {
	// newSession opens a session and returns its id and a function that
	// sends one prompt and returns once its stop reason arrived.
	newSession(ctx context.Context) (string, func(ctx context.Context) error, error)
	close()
}

var acpClients = []acpClient{
	{name: "agentwire-acpclient", peer: "agentwire acp/acpclient (New over the pipes, Session.Prompt, an UpdateHandler)", connect: connectAgentwireACP},
	{name: "acp-go-sdk-client", peer: "coder/acp-go-sdk v0.13.0 ClientSideConnection (Client.SessionUpdate)", connect: connectACPSDK},
}

// updateCounts counts the chunks each session's handler saw.
type updateCounts struct {
	mu       sync.RWMutex
	sessions map[string]*sessionCount
	orphans  atomic.Int64 // updates for a session not opened here
}

type sessionCount struct {
	chunks atomic.Int64 // agent_message_chunk updates with the agent's text
	other  atomic.Int64 // any other update, or a chunk with other text
}

func (u *updateCounts) register(id string) *sessionCount {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.sessions == nil {
		u.sessions = map[string]*sessionCount{}
	}
	c := &sessionCount{}
	u.sessions[id] = c
	return c
}

// add is what both clients' handlers call for each update; text is the
// chunk's text, "" for an update that is not a text message chunk.
func (u *updateCounts) add(id, text string) {
	u.mu.RLock()
	c := u.sessions[id]
	u.mu.RUnlock()
	switch {
	case c == nil:
		u.orphans.Add(1)
	case text == acpChunkText:
		c.chunks.Add(1)
	default:
		c.other.Add(1)
	}
}

// acpChunkText is what serveAgentwireACP sends in every chunk.
const acpChunkText = "chunk"

type acpClientKey struct{ client, place string }

type acpClientSample struct {
	prompts int
	elapsed time.Duration
	cpu     float64 // seconds, the bench process
	agent   float64 // seconds, the agent's process (subprocess only)
	allocs  float64 // per prompt
	bytes   float64 // per prompt
}

func (s acpClientSample) promptsPerSec() float64  { return float64(s.prompts) / s.elapsed.Seconds() }
func (s acpClientSample) cpuPerPrompt() float64   { return s.cpu / float64(s.prompts) }
func (s acpClientSample) agentPerPrompt() float64 { return s.agent / float64(s.prompts) }

type acpClientRun struct {
	samples map[acpClientKey]map[int]acpClientSample // by round
	failed  map[acpClientKey]string
}

// measureACPClients runs every client in both places once, shuffled: one
// round of the pipe benchmark.
func (r *run) measureACPClients(round int) {
	if len(acpClients) == 0 {
		return
	}
	a := &r.acpc
	if a.samples == nil {
		a.samples, a.failed = map[acpClientKey]map[int]acpClientSample{}, map[acpClientKey]string{}
	}
	var keys []acpClientKey
	for _, c := range acpClients {
		for _, place := range places {
			keys = append(keys, acpClientKey{c.name, place})
		}
	}
	rand.Shuffle(len(keys), func(i, j int) { keys[i], keys[j] = keys[j], keys[i] })
	for _, k := range keys {
		if _, bad := a.failed[k]; bad {
			continue
		}
		fmt.Fprintf(os.Stderr, "round %d/%d %-10s %s\n", round+1, r.rounds, k.place, k.client)
		c, _ := acpClientNamed(k.client)
		s, err := measureACPClient(c, k.place, acpClientAgent, r.dur)
		if err != nil {
			fmt.Fprintf(os.Stderr, "  failed: %v\n", err)
			a.failed[k] = err.Error()
			continue
		}
		if a.samples[k] == nil {
			a.samples[k] = map[int]acpClientSample{}
		}
		a.samples[k][round] = s
	}
}

func acpClientNamed(name string) (acpClient, bool) {
	for _, c := range acpClients {
		if c.name == name {
			return c, true
		}
	}
	return acpClient{}, false
}

// measureACPClient connects c to agent (in place), opens acpSessions
// sessions, warms up for dur/4 and measures for dur.
func measureACPClient(c acpClient, place string, agent server, dur time.Duration) (res acpClientSample, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	r, w, pid, stop, err := startACPAgent(place, agent)
	if err != nil {
		return res, err
	}
	var counts updateCounts
	cc, err := c.connect(ctx, r, w, &counts)
	if err != nil {
		w.Close()
		stop()
		return res, fmt.Errorf("connect: %w", err)
	}
	defer func() {
		cc.close()
		w.Close()
		if serr := stop(); serr != nil && err == nil {
			err = serr
		}
	}()
	sessions := make([]acpBenchSession, acpSessions)
	for i := range sessions {
		id, prompt, err := cc.newSession(ctx)
		if err != nil {
			return res, fmt.Errorf("session/new: %w", err)
		}
		sessions[i] = acpBenchSession{id: id, prompt: prompt, count: counts.register(id)}
	}
	if _, err := promptLoop(ctx, sessions, dur/4); err != nil {
		return res, err
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	agent0 := agentCPU(pid)
	cpu0 := selfCPU()
	start := time.Now()
	n, err := promptLoop(ctx, sessions, dur)
	res.elapsed = time.Since(start)
	res.cpu = selfCPU() - cpu0
	res.agent = agentCPU(pid) - agent0
	runtime.ReadMemStats(&after)
	if err != nil {
		return res, err
	}
	if o := counts.orphans.Load(); o > 0 {
		return res, fmt.Errorf("%d updates named a session this client did not open", o)
	}
	res.prompts = n
	res.allocs = float64(after.Mallocs-before.Mallocs) / float64(n)
	res.bytes = float64(after.TotalAlloc-before.TotalAlloc) / float64(n)
	return res, nil
}

type acpBenchSession struct {
	id     string
	prompt func(ctx context.Context) error
	count  *sessionCount
}

// promptLoop prompts on every session at once, each in a loop until d has
// passed, and returns how many prompts completed: answered, with all
// acpUpdates chunks handled by the time the answer was returned.
func promptLoop(ctx context.Context, sessions []acpBenchSession, d time.Duration) (int, error) {
	deadline := time.Now().Add(d)
	var total atomic.Int64
	errs := make(chan error, len(sessions))
	for _, s := range sessions {
		go func() {
			errs <- func() error {
				for time.Now().Before(deadline) {
					c0, o0 := s.count.chunks.Load(), s.count.other.Load()
					if err := s.prompt(ctx); err != nil {
						return fmt.Errorf("session %s: prompt: %w", s.id, err)
					}
					c, o := s.count.chunks.Load()-c0, s.count.other.Load()-o0
					if c != acpUpdates || o != 0 {
						return fmt.Errorf("session %s: the prompt returned after %d of its %d chunks were handled (%d other updates)", s.id, c, acpUpdates, o)
					}
					total.Add(1)
				}
				return nil
			}()
		}()
	}
	var first error
	for range sessions {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	if first != nil {
		return 0, first
	}
	if total.Load() == 0 {
		return 0, errors.New("no prompt completed")
	}
	return int(total.Load()), nil
}

// agentCPU is the CPU time of the agent's process, 0 in-process.
func agentCPU(pid int) float64 {
	if pid == 0 {
		return 0
	}
	s, _ := cpuSeconds(pid)
	return s
}

// startACPAgent starts agent in place and returns its output, its input,
// its process id (0 in-process) and a function that waits for it to end
// once its input is closed.
func startACPAgent(place string, agent server) (io.Reader, io.WriteCloser, int, func() error, error) {
	if place == "in-process" {
		c2sR, c2sW, err := os.Pipe()
		if err != nil {
			return nil, nil, 0, nil, err
		}
		s2cR, s2cW, err := os.Pipe()
		if err != nil {
			c2sR.Close()
			c2sW.Close()
			return nil, nil, 0, nil, err
		}
		done := make(chan error, 1)
		go func() {
			err := agent.serve(c2sR, s2cW)
			s2cW.Close()
			c2sR.Close()
			done <- err
		}()
		stop := func() error {
			defer s2cR.Close()
			go io.Copy(io.Discard, s2cR) // the agent may still be answering
			select {
			case err := <-done:
				return err
			case <-time.After(5 * time.Second):
				return fmt.Errorf("%s did not end at EOF", agent.name)
			}
		}
		return s2cR, c2sW, 0, stop, nil
	}
	self, err := os.Executable()
	if err != nil {
		return nil, nil, 0, nil, err
	}
	cmd := exec.Command(self, "-serve", agent.name)
	stderr := &tailBuffer{max: 8 << 10}
	cmd.Stderr = stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, nil, 0, nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, nil, 0, nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, nil, 0, nil, err
	}
	stop := func() error { return awaitExit(cmd, out, agent.name, stderr) }
	return out, in, cmd.Process.Pid, stop, nil
}

// ----- agentwire's client -----

type awACPConn struct {
	c   *acpclient.Conn
	cwd string
}

func connectAgentwireACP(ctx context.Context, r io.Reader, w io.WriteCloser, u *updateCounts) (acpClientConn, error) {
	c, err := acpclient.New(ctx, r, w, &acpclient.Options{
		Logger: slog.New(slog.DiscardHandler),
		Updates: acpclient.UpdateFunc(func(_ context.Context, up *acpclient.Update) error {
			text := ""
			if up.Kind == acp.UpdateAgentMessageChunk {
				text = up.Text()
			}
			u.add(up.SessionID, text)
			return nil
		}),
	})
	if err != nil {
		return nil, err
	}
	return awACPConn{c: c, cwd: os.TempDir()}, nil
}

func (a awACPConn) newSession(ctx context.Context) (string, func(context.Context) error, error) {
	s, err := a.c.NewSession(ctx, acpclient.SessionConfig{Cwd: a.cwd})
	if err != nil {
		return "", nil, err
	}
	return s.ID(), func(ctx context.Context) error {
		stop, err := s.Prompt(ctx, acp.TextBlock("hello"))
		if err != nil {
			return err
		}
		if stop != acp.EndTurn {
			return fmt.Errorf("stop reason %q", stop)
		}
		return nil
	}, nil
}

func (a awACPConn) close() { a.c.Close() }

// ----- acp-go-sdk's client -----

// sdkClient is the acp-go-sdk client: every method the interface requires,
// only SessionUpdate doing anything (the agent asks for nothing else).
type sdkClient struct{ u *updateCounts }

var errNotServed = errors.New("not served by the benchmark client")

func (c *sdkClient) SessionUpdate(_ context.Context, n acpsdk.SessionNotification) error {
	text := ""
	if m := n.Update.AgentMessageChunk; m != nil && m.Content.Text != nil {
		text = m.Content.Text.Text
	}
	c.u.add(string(n.SessionId), text)
	return nil
}
func (c *sdkClient) RequestPermission(context.Context, acpsdk.RequestPermissionRequest) (acpsdk.RequestPermissionResponse, error) {
	return acpsdk.RequestPermissionResponse{Outcome: acpsdk.RequestPermissionOutcome{Cancelled: &acpsdk.RequestPermissionOutcomeCancelled{}}}, nil
}
func (c *sdkClient) ReadTextFile(context.Context, acpsdk.ReadTextFileRequest) (acpsdk.ReadTextFileResponse, error) {
	return acpsdk.ReadTextFileResponse{}, errNotServed
}
func (c *sdkClient) WriteTextFile(context.Context, acpsdk.WriteTextFileRequest) (acpsdk.WriteTextFileResponse, error) {
	return acpsdk.WriteTextFileResponse{}, errNotServed
}
func (c *sdkClient) CreateTerminal(context.Context, acpsdk.CreateTerminalRequest) (acpsdk.CreateTerminalResponse, error) {
	return acpsdk.CreateTerminalResponse{}, errNotServed
}
func (c *sdkClient) KillTerminal(context.Context, acpsdk.KillTerminalRequest) (acpsdk.KillTerminalResponse, error) {
	return acpsdk.KillTerminalResponse{}, errNotServed
}
func (c *sdkClient) TerminalOutput(context.Context, acpsdk.TerminalOutputRequest) (acpsdk.TerminalOutputResponse, error) {
	return acpsdk.TerminalOutputResponse{}, errNotServed
}
func (c *sdkClient) ReleaseTerminal(context.Context, acpsdk.ReleaseTerminalRequest) (acpsdk.ReleaseTerminalResponse, error) {
	return acpsdk.ReleaseTerminalResponse{}, errNotServed
}
func (c *sdkClient) WaitForTerminalExit(context.Context, acpsdk.WaitForTerminalExitRequest) (acpsdk.WaitForTerminalExitResponse, error) {
	return acpsdk.WaitForTerminalExitResponse{}, errNotServed
}

type sdkACPConn struct {
	cs  *acpsdk.ClientSideConnection
	w   io.Closer
	cwd string
}

func connectACPSDK(ctx context.Context, r io.Reader, w io.WriteCloser, u *updateCounts) (acpClientConn, error) {
	cs := acpsdk.NewClientSideConnection(&sdkClient{u: u}, w, r)
	cs.SetLogger(slog.New(slog.DiscardHandler))
	if _, err := cs.Initialize(ctx, acpsdk.InitializeRequest{ProtocolVersion: acpsdk.ProtocolVersionNumber}); err != nil {
		return nil, err
	}
	return sdkACPConn{cs: cs, w: w, cwd: os.TempDir()}, nil
}

func (s sdkACPConn) newSession(ctx context.Context) (string, func(context.Context) error, error) {
	res, err := s.cs.NewSession(ctx, acpsdk.NewSessionRequest{Cwd: s.cwd, McpServers: []acpsdk.McpServer{}})
	if err != nil {
		return "", nil, err
	}
	id := res.SessionId
	return string(id), func(ctx context.Context) error {
		res, err := s.cs.Prompt(ctx, acpsdk.PromptRequest{SessionId: id, Prompt: []acpsdk.ContentBlock{acpsdk.TextBlock("hello")}})
		if err != nil {
			return err
		}
		if res.StopReason != acpsdk.StopReasonEndTurn {
			return fmt.Errorf("stop reason %q", res.StopReason)
		}
		return nil
	}, nil
}

// close ends the agent's input and waits for the connection to see the
// agent's output end.
func (s sdkACPConn) close() {
	s.w.Close()
	select {
	case <-s.cs.Done():
	case <-time.After(5 * time.Second):
	}
}

// ----- the report -----

// ratio is the median over rounds of f(client)/f(acp-go-sdk-client) in the
// same place and round.
func (a *acpClientRun) ratio(k acpClientKey, f func(acpClientSample) float64) (med, lo, hi float64, ok bool) {
	return roundRatio(a.samples[k], a.samples[acpClientKey{"acp-go-sdk-client", k.place}], f)
}

func (a *acpClientRun) median(k acpClientKey, f func(acpClientSample) float64) float64 {
	return roundMedian(a.samples[k], f)
}

// report is the ACP client section of report.md.
func (a *acpClientRun) report() string {
	if a.samples == nil {
		return ""
	}
	var b strings.Builder
	b.WriteString("## ACP clients: the same agent, 16 sessions prompting at once\n\n")
	fmt.Fprintf(&b, "agentwire's client (`acp/acpclient`) and acp-go-sdk's `ClientSideConnection` each drive the same agent, agentwire's (the `agentwire-acp` row: every prompt answered with 10 `agent_message_chunk` updates), over OS pipes in this process or in a subprocess. 16 sessions prompt in a loop, one prompt per session at a time. A prompt counts only when its stop reason arrived and the client's update handler had seen all 10 chunks, each with the agent's text (agentwire's handler reads it with `Update.Text`, acp-go-sdk's gets it decoded); a prompt returned with one missing fails the row. CPU and allocations are the bench process's (getrusage, `runtime.MemStats`) over the timed prompts: in-process they include the agent, the same for both clients; in a subprocess they are the client's alone, and the agent's CPU is read from `/proc` (in ticks of %.0f ms). Ratios are to acp-go-sdk's client in the same round (throughput: higher is faster; CPU: lower is cheaper). The agent's work is the same under both clients, so it dilutes the throughput ratio: on %d cores, prompts/s is at most %d s / (client CPU + agent CPU) per prompt.\n\n", 1e3/clkTck(), runtime.NumCPU(), runtime.NumCPU())
	b.WriteString("| client | what | place | prompts/s | ×acp-go-sdk-client | CPU µs/prompt | CPU ×acp-go-sdk-client | agent CPU µs/prompt | allocs/prompt | bytes/prompt |\n|---|---|---|---|---|---|---|---|---|---|\n")
	for _, place := range []string{"in-process", "subprocess"} {
		for _, c := range acpClients {
			k := acpClientKey{c.name, place}
			if msg, bad := a.failed[k]; bad {
				fmt.Fprintf(&b, "| %s | %s | %s | failed: %s | | | | | | |\n", c.name, c.peer, place, strings.ReplaceAll(msg, "|", "/"))
				continue
			}
			if len(a.samples[k]) == 0 {
				continue
			}
			tput, tlo, thi, _ := a.ratio(k, acpClientSample.promptsPerSec)
			cpu, clo, chi, _ := a.ratio(k, acpClientSample.cpuPerPrompt)
			agent := "in the CPU"
			if place == "subprocess" {
				agent = fmt.Sprintf("%.1f", a.median(k, acpClientSample.agentPerPrompt)*1e6)
			}
			fmt.Fprintf(&b, "| %s | %s | %s | %.0f | %.2f [%.2f–%.2f] | %.1f | %.2f [%.2f–%.2f] | %s | %.1f | %.0f |\n", c.name, c.peer, place,
				a.median(k, acpClientSample.promptsPerSec), tput, tlo, thi,
				a.median(k, acpClientSample.cpuPerPrompt)*1e6, cpu, clo, chi, agent,
				a.median(k, func(s acpClientSample) float64 { return s.allocs }), a.median(k, func(s acpClientSample) float64 { return s.bytes }))
		}
	}
	b.WriteString("\n")
	return b.String()
}

// goalRows adds the client goal, in each place, to the goals table.
func (a *acpClientRun) goalRows(row func(goal, measured string, met bool)) {
	for _, place := range []string{"in-process", "subprocess"} {
		k := acpClientKey{"agentwire-acpclient", place}
		if msg, bad := a.failed[k]; bad {
			row("ACP client ≥ 2× acp-go-sdk's client, 16 sessions, "+place, "failed: "+strings.ReplaceAll(msg, "|", "/"), false)
			continue
		}
		if v, _, _, ok := a.ratio(k, acpClientSample.promptsPerSec); ok {
			row("ACP client ≥ 2× acp-go-sdk's client, 16 sessions, "+place, fmt.Sprintf("%.1f×", v), v >= 2)
		}
	}
}
