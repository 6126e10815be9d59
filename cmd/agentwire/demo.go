package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/agentwire/agentwire/client"
	"github.com/agentwire/agentwire/mcp"
	"github.com/agentwire/agentwire/mcp/host"
	"github.com/agentwire/agentwire/process"
	"github.com/agentwire/agentwire/rpc"
)

// runDemo is `agentwire demo`: the stdio experiments (what goes wrong
// between a host and a stdio server, and what agentwire does about it), measured live
// against `agentwire serve mcp` variants started as real subprocesses.
// `agentwire demo wire` shows a raw JSON-RPC session instead.
func runDemo(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && isHelp(args[0]) || len(args) > 1 && args[0] == "wire" && isHelp(args[1]) {
		fmt.Fprint(stdout, demoSynopsis+demoHelp)
		return exitOK
	}
	if len(args) > 0 && args[0] == "wire" {
		return runWireDemo(args[1:], stdout, stderr)
	}
	if len(args) > 0 {
		return usageError(stderr, "demo", demoSynopsis, "unknown argument %q", cutLine(args[0], 80))
	}
	self, err := os.Executable()
	if err != nil {
		fmt.Fprintln(stderr, "agentwire demo: cannot find my own executable:", err)
		return 1
	}
	d := &demo{self: self, out: stdout}
	start := time.Now()
	fmt.Fprintln(stdout, "agentwire demo: the stdio experiments, live, against `agentwire serve mcp` subprocesses")
	steps := []func() error{d.chatty, d.crash, d.ladder, d.cancel, d.probe}
	for _, step := range steps {
		if err := step(); err != nil {
			fmt.Fprintln(stderr, "agentwire demo:", err)
			return 1
		}
	}
	fmt.Fprintf(stdout, "\nAll five in %.1f s. Try one yourself: agentwire call --report --tool search --args '{\"query\":\"go\"}' -- agentwire serve mcp\n",
		time.Since(start).Seconds())
	return 0
}

// demoHelp follows the synopsis in `agentwire demo --help`.
const demoHelp = `
  agentwire demo        five stdio experiments, measured live against agentwire serve mcp
                        subprocesses: stdout pollution, a crash and restart, the shutdown
                        ladder, cancellation, the era probe
  agentwire demo wire   a raw JSON-RPC session with the echo server

Exit status: 0 done, 1 a step failed, 2 usage error.
`

type demo struct {
	self string
	out  io.Writer
}

func (d *demo) server(args ...string) process.Command {
	return process.Command{Path: d.self, Args: append([]string{"serve", "mcp"}, args...)}
}

func (d *demo) table(title string, header string, rows [][]string) {
	fmt.Fprintf(d.out, "\n%s\n", title)
	tw := tabwriter.NewWriter(d.out, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  "+header)
	for _, r := range rows {
		fmt.Fprintln(tw, "  "+strings.Join(r, "\t"))
	}
	tw.Flush()
}

func quiet() *client.Options { return &client.Options{Logger: discard} }

func ms(d time.Duration) string { return fmt.Sprintf("%.3f s", d.Seconds()) }

// 1. Something else writes to stdout.
func (d *demo) chatty() error {
	var mu sync.Mutex
	var seen []string
	opts := quiet()
	opts.OnViolation = func(v rpc.Violation) {
		mu.Lock()
		seen = append(seen, string(v.Line))
		mu.Unlock()
	}
	sess, err := host.StartServer(context.Background(), d.server("--no-stdout-guard"), &host.Options{Transport: opts})
	if err != nil {
		return err
	}
	res, err := sess.CallTool(context.Background(), "chatty", nil)
	sess.Close()
	if err != nil {
		return fmt.Errorf("chatty: %w", err)
	}
	rows := [][]string{{"the tool's result arrived", fmt.Sprintf("correct: %q", res.Content[0].Text)}}
	for _, line := range seen {
		rows = append(rows, []string{line, "not a message: recorded as a protocol violation, and the client carried on"})
	}
	rows = append(rows, []string{"with the stdout guard (the default)", "the same print goes to stderr; stdout stays clean"})
	d.table("1. The chatty tool prints to stdout (serve mcp --no-stdout-guard)", "What the client saw\tResult", rows)
	return nil
}

// 2. The server dies.
func (d *demo) crash() error {
	opts := quiet()
	opts.Restart = &client.RestartPolicy{MaxRestarts: 2, Backoff: 10 * time.Millisecond}
	opts.Process = &process.Options{Grace: 300 * time.Millisecond, Stderr: io.Discard}
	sess, err := host.StartServer(context.Background(), d.server(), &host.Options{Transport: opts})
	if err != nil {
		return err
	}
	defer sess.Close()
	start := time.Now()
	_, crashErr := sess.CallTool(context.Background(), "crash", nil)
	failedAfter := time.Since(start)
	if !errors.Is(crashErr, client.ErrConnectionLost) {
		return fmt.Errorf("crash: expected a lost connection, got %v", crashErr)
	}
	res, err := sess.CallTool(context.Background(), "search", map[string]string{"query": "stdio"}, host.Retryable())
	if err != nil {
		return fmt.Errorf("search after the crash: %w", err)
	}
	var exit string
	var lost *client.ConnectionLostError
	if errors.As(crashErr, &lost) && lost.Exit != nil {
		exit = lost.Exit.Status
	}
	d.table("2. The server dies in the middle of a call (tool crash)", "Step\tWhat happened", [][]string{
		{"pending call", fmt.Sprintf("failed after %s: connection lost, server %s", ms(failedAfter), exit)},
		{"restart", "the client started the server again (restart policy)"},
		{"search, safe to retry", fmt.Sprintf("succeeded: %q", res.Content[0].Text)},
		{"process started", fmt.Sprintf("%d times", sess.Client().Stats().Restarts+1)},
	})
	return nil
}

// 3. The server will not stop.
func (d *demo) ladder() error {
	kinds := []struct {
		name string
		args []string
	}{
		{"exits on end of input", nil},
		{"ignores end of input", []string{"--ignore-eof"}},
		{"ignores end of input and SIGTERM", []string{"--ignore-eof", "--ignore-sigterm"}},
	}
	rows := make([][]string, len(kinds))
	var wg sync.WaitGroup
	var firstErr error
	var mu sync.Mutex
	for i, k := range kinds {
		wg.Go(func() {
			opts := quiet()
			opts.Process = &process.Options{Grace: 300 * time.Millisecond}
			sess, err := host.StartServer(context.Background(), d.server(k.args...), &host.Options{Transport: opts})
			if err != nil {
				mu.Lock()
				firstErr = err
				mu.Unlock()
				return
			}
			r := sess.Close()
			rows[i] = []string{k.name, string(r.Outcome), ms(r.Duration)}
		})
	}
	wg.Wait()
	if firstErr != nil {
		return firstErr
	}
	d.table("3. The shutdown ladder: close stdin, wait, SIGTERM the group, wait, SIGKILL (grace 0.3 s)",
		"Server\tHow it ended\tTime", rows)
	return nil
}

// Cancellation on stdio.
func (d *demo) cancel() error {
	var stderr lockedBuffer
	opts := quiet()
	opts.Process = &process.Options{Stderr: &stderr}
	sess, err := host.StartServer(context.Background(), d.server(), &host.Options{Transport: opts})
	if err != nil {
		return err
	}
	var mu sync.Mutex
	steps := 0
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	_, callErr := sess.CallTool(ctx, "slow_report", map[string]int{"steps": 40, "delay_ms": 50},
		host.WithProgress(func(p, _ float64, _ string) {
			mu.Lock()
			steps = int(p)
			mu.Unlock()
		}))
	time.Sleep(200 * time.Millisecond) // time for a response that must not come
	st := sess.Client().Stats()
	sess.Close()
	note := strings.TrimSpace(stderr.String())
	if i := strings.LastIndex(note, "slow_report:"); i >= 0 {
		note = strings.TrimSpace(note[i:])
	}
	mu.Lock()
	reached := steps
	mu.Unlock()
	answer := "none (as the spec requires)"
	if st.LateResponses > 0 {
		answer = fmt.Sprintf("%d late response(s), ignored", st.LateResponses)
	}
	d.table("4. Cancelling a 40-step slow_report after 0.3 s (notifications/cancelled)", "What\tResult", [][]string{
		{"the caller", fmt.Sprintf("returned at once: %v", callErr)},
		{"steps reached", fmt.Sprintf("%d of 40 (progress notifications)", reached)},
		{"server's note on stderr", note},
		{"response", answer},
	})
	return nil
}

// Which era is on the other end?
func (d *demo) probe() error {
	kinds := []struct {
		name string
		args []string
	}{
		{"modern (dual-era) server", nil},
		{"legacy server, rejects the probe", []string{"--era", mcp.LegacyOnly.String()}},
		{"silent legacy server", []string{"--era", mcp.LegacyOnly.String(), "--legacy-silent"}},
	}
	var rows [][]string
	for _, k := range kinds {
		sess, err := host.StartServer(context.Background(), d.server(k.args...), &host.Options{
			ProbeTimeout: 500 * time.Millisecond, ProcessStartupAllowance: -1, Transport: quiet()})
		if err != nil {
			return err
		}
		rows = append(rows, []string{k.name, string(sess.Probe()), sess.Era().String() + " " + sess.ProtocolVersion(), ms(sess.ConnectDuration())})
		sess.Close()
	}
	d.table("5. The probe: server/discover first, fall back to initialize on anything but modern evidence (probe timeout 0.5 s)",
		"Server\tProbe\tEra chosen\tConnect", rows)
	return nil
}

type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
