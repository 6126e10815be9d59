package main

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// httpRun is the HTTP and host-side benchmark (-http): the servers side by
// side over loopback TCP, their idle event streams, and the MCP clients
// against one server.
type httpRun struct {
	rounds      int
	dur, warm   time.Duration
	concurrency []int
	streams     int // idle streams per server
	bigStreams  int // agentwire listen streams in one process; 0 skips
	targets     []httpTarget

	samples map[hkey]map[int]loadResult // by round
	failed  map[string]string           // target -> why it was left out
	skipped []string                    // notes for the report

	idle []streamResult
	big  *streamResult

	host hostRun

	elapsed time.Duration
}

type hkey struct {
	target string
	c      int
}

type httpConfig struct {
	out        string
	rounds     int
	dur        time.Duration
	quick      bool
	streams    int
	bigStreams int
	only       string
	noHost     bool
}

func runHTTPBench(cfg httpConfig) error {
	r := &httpRun{
		rounds: cfg.rounds, dur: cfg.dur, warm: cfg.dur / 4,
		concurrency: []int{1, 16, 64},
		streams:     cfg.streams, bigStreams: cfg.bigStreams,
		samples: map[hkey]map[int]loadResult{}, failed: map[string]string{},
	}
	if cfg.quick {
		r.rounds, r.dur, r.warm = 1, 150*time.Millisecond, 50*time.Millisecond
		r.streams, r.bigStreams = min(r.streams, 100), 0
	}
	r.targets = selectTargets(cfg.only)
	if !haveNode() {
		r.targets = slices.DeleteFunc(r.targets, func(t httpTarget) bool { return t.server == "ts" })
		r.skipped = append(r.skipped, "The TypeScript SDK server was skipped: node or npm is not installed.")
	} else if err := ensureNodeModules(); err != nil {
		r.targets = slices.DeleteFunc(r.targets, func(t httpTarget) bool { return t.server == "ts" })
		r.skipped = append(r.skipped, "The TypeScript SDK server was skipped: "+err.Error())
	}
	start := time.Now()
	if err := r.throughput(); err != nil {
		return err
	}
	if r.streams > 0 {
		r.idleStreams()
	}
	if r.bigStreams > 0 {
		res := measureStreams(streamTargetNamed("agentwire-listen"), r.bigStreams)
		r.big = &res
	}
	if !cfg.noHost {
		r.host = hostRun{rounds: r.rounds, dur: r.dur}
		if cfg.quick {
			r.host.dur = 150 * time.Millisecond
		}
		r.host.run()
	}
	r.elapsed = time.Since(start)
	if err := os.MkdirAll(cfg.out, 0o755); err != nil {
		return err
	}
	path := filepath.Join(cfg.out, "http.md")
	if err := os.WriteFile(path, []byte(r.report()), 0o644); err != nil {
		return err
	}
	fmt.Printf("wrote %s in %v\n", path, r.elapsed.Round(time.Second))
	return nil
}

// selectTargets keeps the named targets (the plain ones always); all by default.
func selectTargets(only string) []httpTarget {
	if only == "" {
		return slices.Clone(httpTargets)
	}
	var keep []httpTarget
	for _, t := range httpTargets {
		if t.isReference() || slices.Contains(splitList(only), t.name) || slices.Contains(splitList(only), t.server) {
			keep = append(keep, t)
		}
	}
	return keep
}

// throughput measures every target at every concurrency, round after
// round, targets and concurrencies shuffled in each round. Each target
// gets a fresh server process per round, so that sessions left by one
// round do not weigh on the next.
func (r *httpRun) throughput() error {
	for round := range r.rounds {
		order := slices.Clone(r.targets)
		rand.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
		for _, t := range order {
			if _, bad := r.failed[t.name]; bad {
				continue
			}
			if err := r.measureTarget(round, t); err != nil {
				if t.isReference() {
					return fmt.Errorf("%s: %w", t.name, err) // the reference must work
				}
				fmt.Fprintf(os.Stderr, "  %s failed: %v\n", t.name, err)
				r.failed[t.name] = err.Error()
			}
		}
	}
	return nil
}

func (r *httpRun) measureTarget(round int, t httpTarget) error {
	s, _ := httpServerNamed(t.server)
	p, err := startHTTPServer(s, 0)
	if err != nil {
		return err
	}
	defer p.stop()
	cs := slices.Clone(r.concurrency)
	rand.Shuffle(len(cs), func(i, j int) { cs[i], cs[j] = cs[j], cs[i] })
	for _, c := range cs {
		fmt.Fprintf(os.Stderr, "http round %d/%d %-22s C=%d\n", round+1, r.rounds, t.name, c)
		res, err := drive(p, t, c, r.warm, r.dur)
		if err != nil {
			return fmt.Errorf("C=%d: %w; server stderr: %s", c, err, p.stderr.String())
		}
		k := hkey{t.name, c}
		if r.samples[k] == nil {
			r.samples[k] = map[int]loadResult{}
		}
		r.samples[k][round] = res
	}
	return nil
}

// ratio is the median over rounds of f(target)/f(its plain reference),
// both measured in the same round, with the lowest and highest.
func (r *httpRun) ratio(t httpTarget, c int, f func(loadResult) float64) (med, lo, hi float64, ok bool) {
	return roundRatio(r.samples[hkey{t.name, c}], r.samples[hkey{t.reference(), c}], f)
}

// median is the median over rounds of f.
func (r *httpRun) median(target string, c int, f func(loadResult) float64) float64 {
	return roundMedian(r.samples[hkey{target, c}], f)
}

func splitList(s string) []string { return strings.Split(s, ",") }
