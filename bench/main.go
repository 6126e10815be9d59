// Command bench measures agentwire against the other Go implementations of
// JSON-RPC, MCP and ACP, in one run, and writes results/report.md and
// results/ratios.png, then agentwire as a fleet (results/fleet.md, below).
//
//	cd bench && go run .            # about 3 minutes on 2 cores
//	cd bench && go run . -quick     # one short round, a smoke test
//
// Every server is driven by the same allocation-free raw pipe client (the
// client's cost is the same for all), in-process over OS pipes and across a
// real subprocess (this binary re-executed with -serve NAME). Rounds are
// interleaved and shuffled, and each figure is the median over rounds of
// the ratio to the hand-written loop measured in the same round: the
// machine is shared and noisy, absolute figures move 20-30 % between runs,
// ratios much less. The ACP client rows turn this around (acpclients.go):
// agentwire's ACP client and acp-go-sdk's drive the same agent,
// agentwire's, with 16 sessions prompting at once, in the same rounds.
//
// The -http mode measures the HTTP path instead and writes results/http.md:
//
//	cd bench && go run . -http          # about 10 minutes on 2 cores
//	cd bench && go run . -http -quick   # one short round, a smoke test
//
// Every HTTP server runs in a process of its own on loopback TCP (this
// binary re-executed with -serve-http NAME, or node for the TypeScript
// SDK's server in ts-server.mjs): a hand-written net/http handler
// (plain, the reference), agentwire in both eras, go-sdk and mcp-go
// stateful and stateless in both eras where they serve them, and the
// TypeScript SDK v2. C = 1, 16 and 64 keep-alive clients send sequential
// tools/call POSTs and check every answer; req/s, p50 and p99 latency and
// the server's CPU per request (/proc/PID/stat) are reported as ratios to
// plain in the same round. Then each server holds 1000 idle event streams
// (agentwire's subscriptions/listen, the peers' session GET streams and
// listen streams) and its resident memory per stream is read, and one
// agentwire process holds 10,000. Last, the host side: agentwire's MCP
// client against go-sdk's and mcp-go's, each calling agentwire's server
// over stdio and HTTP in both eras, calls/s and client CPU per call.
//
// The -fleet mode measures agentwire as a fleet and writes
// results/fleet.md (the default run does it too, after report.md, unless
// -no-fleet):
//
//	cd bench && go run . -fleet         # about 40 s on 2 cores
//	cd bench && go run . -fleet -quick  # one short round, a smoke test
//
// Three `agentwire serve mcp --http --redis` processes (the CLI built
// from ../cmd/agentwire) share one redis-server (from PATH, or Debian's
// package fetched with apt-get download). C = 1 and 16 keep-alive clients
// create a task on one instance and tasks/get it on the next, round
// robin: creations/s, tasks/get p50 and p99, and the servers' CPU per
// request from /proc, against one instance with the in-memory store.
// Then a listen stream on each instance and a resource update raised on
// one: the time until every other instance's stream delivers it.
//
// This is a separate module so that the peers (creachadair/jrpc2,
// sourcegraph/jsonrpc2, the official go-sdk, mark3labs/mcp-go,
// coder/acp-go-sdk) never enter agentwire's own dependency graph.
package main

import (
	"flag"
	"fmt"
	"io"
	"log"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"
)

func main() {
	serve := flag.String("serve", "", "internal: serve the named server on stdin/stdout")
	out := flag.String("out", "results", "directory for report.md and ratios.png")
	rounds := flag.Int("rounds", 5, "interleaved rounds")
	dur := flag.Duration("dur", 150*time.Millisecond, "target duration of each measurement")
	quick := flag.Bool("quick", false, "one short round: a smoke test of the harness")
	only := flag.String("only", "", "comma-separated servers to run (raw is always included); default all")
	noExtremes := flag.Bool("no-extremes", false, "skip the large-message and flood workloads")
	httpMode := flag.Bool("http", false, "run the HTTP and host-side benchmarks instead, writing results/http.md")
	serveHTTPName := flag.String("serve-http", "", "internal: serve the named HTTP server on -addr, printing its URL")
	addr := flag.String("addr", "127.0.0.1:0", "internal: the address of -serve-http")
	maxStreams := flag.Int("max-streams", 0, "internal: room for this many idle streams in -serve-http")
	streams := flag.Int("streams", 1000, "-http: idle event streams opened per server")
	bigStreams := flag.Int("big-streams", 10000, "-http: agentwire listen streams opened in one process (0 skips)")
	noHost := flag.Bool("no-host", false, "-http: skip the host-side (client) benchmark")
	fleetMode := flag.Bool("fleet", false, "run only the fleet benchmark (3 agentwire instances on one redis-server), writing results/fleet.md")
	noFleet := flag.Bool("no-fleet", false, "leave the fleet benchmark out of the default run")
	flag.Parse()
	// acp-go-sdk's in-process agent logs through the standard logger; the
	// subprocess servers' stderr is kept and shown only when one fails.
	log.SetOutput(io.Discard)
	if *serve != "" {
		if err := serveStdio(*serve); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		return
	}
	if *serveHTTPName != "" {
		if err := serveHTTP(*serveHTTPName, *addr, *maxStreams); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		return
	}
	if *httpMode {
		// Three rounds of 2 s per measurement unless told otherwise.
		r, d := *rounds, *dur
		if !isFlagSet("rounds") {
			r = 3
		}
		if !isFlagSet("dur") {
			d = 2 * time.Second
		}
		if err := runHTTPBench(httpConfig{out: *out, rounds: r, dur: d, quick: *quick, streams: *streams, bigStreams: *bigStreams, only: *only, noHost: *noHost}); err != nil {
			fail(err)
		}
		return
	}
	if *fleetMode {
		if err := runFleetBench(fleetConfigFor(*out, *quick, *rounds, *dur)); err != nil {
			fail(err)
		}
		return
	}
	// The fleet's own rounds and durations, before -quick changes them.
	fcfg := fleetConfigFor(*out, *quick, *rounds, *dur)
	withFleet := !*noFleet && (*only == "" || slices.Contains(strings.Split(*only, ","), "fleet"))
	if *quick {
		*rounds, *dur = 1, 30*time.Millisecond
	}
	if *only != "" {
		keep := strings.Split(*only+",raw", ",")
		servers = slices.DeleteFunc(servers, func(s server) bool { return !slices.Contains(keep, s.name) })
		acpClients = slices.DeleteFunc(acpClients, func(c acpClient) bool { return !slices.Contains(keep, c.name) })
	}
	start := time.Now()
	r := &run{rounds: *rounds, dur: *dur, samples: map[key][]sample{}}
	if err := r.throughput(); err != nil {
		fail(err)
	}
	if !*noExtremes {
		if err := r.extremes(); err != nil {
			fail(err)
		}
	}
	r.elapsed = time.Since(start)
	if err := os.MkdirAll(*out, 0o755); err != nil {
		fail(err)
	}
	if err := os.WriteFile(filepath.Join(*out, "report.md"), []byte(r.report()), 0o644); err != nil {
		fail(err)
	}
	if err := writeChart(filepath.Join(*out, "ratios.png"), r); err != nil {
		fail(err)
	}
	fmt.Printf("wrote %s and %s in %v\n", filepath.Join(*out, "report.md"), filepath.Join(*out, "ratios.png"), r.elapsed.Round(time.Second))
	if withFleet {
		if _, err := redisBin(); err != nil {
			fmt.Fprintf(os.Stderr, "bench: the fleet benchmark is skipped: no redis-server: %v\n", err)
			return
		}
		if err := runFleetBench(fcfg); err != nil {
			fail(err)
		}
	}
}

// fleetConfigFor is the fleet benchmark's configuration: 3 rounds of 2 s
// per measurement and 500 publishes per round unless -rounds or -dur say
// otherwise (only when -fleet is given: the default run's -rounds and
// -dur are the pipe benchmark's), one short round with -quick.
func fleetConfigFor(out string, quick bool, rounds int, dur time.Duration) fleetConfig {
	c := fleetConfig{out: out, rounds: 3, dur: 2 * time.Second, idle: time.Second, publishes: 500}
	if quick {
		c.rounds, c.dur, c.idle, c.publishes = 1, 300*time.Millisecond, 200*time.Millisecond, 100
	}
	if isFlagSet("fleet") && isFlagSet("rounds") {
		c.rounds = rounds
	}
	if isFlagSet("fleet") && isFlagSet("dur") {
		c.dur = dur
	}
	c.warm = c.dur / 4
	return c
}

func isFlagSet(name string) bool {
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "bench:", err)
	os.Exit(1)
}

type key struct {
	server, place, mode string // place: in-process|subprocess; mode: sequential|pipelined
}

type sample struct {
	nsPerOp float64
	p50     float64 // sequential only
	allocs  float64 // in-process sequential only
	bytes   float64
}

type run struct {
	rounds  int
	dur     time.Duration
	samples map[key][]sample
	big     map[string]bigResult
	over    map[string]string
	flood   map[string]floodResult
	acpc    acpClientRun // the ACP client rows (acpclients.go)
	elapsed time.Duration
}

var places = []string{"in-process", "subprocess"}

func start(place string, s server) (*conn, error) {
	if place == "in-process" {
		return startInProcess(s)
	}
	return startSubprocess(s)
}

// throughput runs the sequential and pipelined workloads, interleaved and
// shuffled, round after round.
func (r *run) throughput() error {
	lat := make([]time.Duration, 0, 1<<16)
	for round := range r.rounds {
		order := slices.Clone(servers)
		rand.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
		ps := slices.Clone(places)
		rand.Shuffle(len(ps), func(i, j int) { ps[i], ps[j] = ps[j], ps[i] })
		for _, place := range ps {
			for _, s := range order {
				fmt.Fprintf(os.Stderr, "round %d/%d %-10s %s\n", round+1, r.rounds, place, s.name)
				if err := r.measure(place, s, &lat); err != nil {
					return fmt.Errorf("%s %s: %w", place, s.name, err)
				}
			}
		}
		r.measureACPClients(round)
	}
	return nil
}

func (r *run) measure(place string, s server, lat *[]time.Duration) (err error) {
	c, err := start(place, s)
	if err != nil {
		return err
	}
	defer func() {
		if serr := c.stop(); serr != nil && err == nil {
			err = serr
		}
	}()
	// Warm up, and estimate the cost of one round trip.
	warm, err := c.sequential(200, *lat)
	if err != nil {
		return err
	}
	var total time.Duration
	for _, d := range warm {
		total += d
	}
	per := total / time.Duration(len(warm))
	n := clamp(int(r.dur/max(per, time.Microsecond)), 100, 50000)

	var before, after runtime.MemStats
	if place == "in-process" {
		runtime.GC()
		runtime.ReadMemStats(&before)
	}
	seq, err := c.sequential(n, *lat)
	if err != nil {
		return err
	}
	sm := sample{}
	if place == "in-process" {
		runtime.ReadMemStats(&after)
		sm.allocs = float64(after.Mallocs-before.Mallocs) / float64(n)
		sm.bytes = float64(after.TotalAlloc-before.TotalAlloc) / float64(n)
	}
	total = 0
	for _, d := range seq {
		total += d
	}
	sm.nsPerOp = float64(total) / float64(n)
	slices.Sort(seq)
	sm.p50 = float64(seq[len(seq)/2])
	*lat = seq
	r.samples[key{s.name, place, "sequential"}] = append(r.samples[key{s.name, place, "sequential"}], sm)

	window := 64
	if s.work == wACP {
		window = acpSessions // one prompt per session at a time
	}
	np := clamp(int(3*r.dur/max(per, time.Microsecond)), 200, 200000)
	d, err := c.pipelined(np, window)
	if err != nil {
		return err
	}
	r.samples[key{s.name, place, "pipelined"}] = append(r.samples[key{s.name, place, "pipelined"}], sample{nsPerOp: float64(d) / float64(np)})
	return nil
}

func clamp(n, lo, hi int) int { return min(max(n, lo), hi) }

// ratio returns, per round, the server's throughput relative to the raw
// loop's in the same round (raw ns / server ns), and their median.
func (r *run) ratio(server, place, mode string, field func(sample) float64) (median, lo, hi float64, ok bool) {
	ss, rs := r.samples[key{server, place, mode}], r.samples[key{"raw", place, mode}]
	if len(ss) == 0 || len(ss) != len(rs) {
		return 0, 0, 0, false
	}
	vals := make([]float64, len(ss))
	for i := range ss {
		vals[i] = field(rs[i]) / field(ss[i])
	}
	slices.Sort(vals)
	return vals[len(vals)/2], vals[0], vals[len(vals)-1], true
}

func medianOf(ss []sample, field func(sample) float64) float64 {
	vals := make([]float64, len(ss))
	for i, s := range ss {
		vals[i] = field(s)
	}
	slices.Sort(vals)
	return vals[len(vals)/2]
}
