package main

import (
	"strings"
	"testing"
	"time"
)

// The fleet benchmark's harness works end to end: three agentwire
// instances on one redis-server answer task pairs through each other,
// and an update raised on one reaches the listen streams of all.
func TestFleetHarness(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the CLI and runs redis-server")
	}
	if _, err := redisBin(); err != nil {
		t.Skip("no redis-server: ", err)
	}
	bin, err := buildAgentwire(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	r := &fleetRun{cfg: fleetConfig{rounds: 1, dur: 200 * time.Millisecond, warm: 50 * time.Millisecond, idle: 100 * time.Millisecond, publishes: 20},
		concurrency: []int{1, 4}, bin: bin, samples: map[fkey][]taskResult{}, idle: map[string][]idleCPU{}}
	for _, s := range fleetSetups {
		if err := r.measureSetup(0, s); err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
	}
	for _, s := range fleetSetups {
		for _, c := range r.concurrency {
			res := r.samples[fkey{s.name, c}]
			if len(res) != 1 || res[0].pairs == 0 || res[0].cpu <= 0 {
				t.Errorf("%s C=%d: %+v", s.name, c, res)
			}
		}
	}
	f := r.pooledFanout()
	if f.lost != 0 || len(f.remote) != 2*f.publishes || len(f.local) != f.publishes {
		t.Errorf("fan-out: %d publishes, %d remote and %d local deliveries, %d lost", f.publishes, len(f.remote), len(f.local), f.lost)
	}
	if cmds, pairs := r.lastCommands(4); pairs == 0 || len(cmds) == 0 {
		t.Error("no Redis command statistics")
	}
	if rep := r.report(); !strings.Contains(rep, "## Goals") || !strings.Contains(rep, "| fleet | 4 |") {
		t.Errorf("report:\n%s", rep)
	}
}
