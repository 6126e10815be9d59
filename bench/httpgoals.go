package main

import (
	"fmt"
	"strings"
)

// goals checks the HTTP run against what agentwire aims at (the redesign
// of its HTTP path) and what it promises (docs/guarantees.md P7), so a
// report says by itself which hold. Server figures are at C = 16; a goal
// whose figures are missing (a peer left out, -only) is not listed.
func (r *httpRun) goals() string {
	var b strings.Builder
	b.WriteString("## Goals (C = 16 unless noted)\n\n| goal | measured | met |\n|---|---|---|\n")
	row := func(goal, measured string, met bool) {
		mark := "yes"
		if !met {
			mark = "**no**"
		}
		fmt.Fprintf(&b, "| %s | %s | %s |\n", goal, measured, mark)
	}
	ratio := func(name string, f func(loadResult) float64) (float64, bool) {
		for _, t := range r.targets {
			if t.name == name {
				v, _, _, ok := r.ratio(t, 16, f)
				return v, ok
			}
		}
		return 0, false
	}
	eras := []struct{ era, agentwire, mcpgo, gosdk string }{
		{"2025-11-25", "agentwire-2025", "mcp-go-stateful-2025", "go-sdk-stateful-2025"},
		{"2026-07-28", "agentwire-2026", "mcp-go-2026", "go-sdk-stateless-2026"},
	}
	for _, e := range eras {
		rps, ok := ratio(e.agentwire, loadResult.rps)
		if !ok {
			continue
		}
		cpu, _ := ratio(e.agentwire, loadResult.cpuPerReq)
		row("req/s ≥ 0.9× plain, "+e.era, fmt.Sprintf("%.2f×", rps), rps >= 0.9)
		row("server CPU per request ≤ 1.25× plain, "+e.era, fmt.Sprintf("%.2f×", cpu), cpu <= 1.25)
		row("P7: req/s ≥ 0.75× plain and CPU ≤ 1.5×, "+e.era, fmt.Sprintf("%.2f×, %.2f×", rps, cpu), rps >= 0.75 && cpu <= 1.5)
		if m, ok := ratio(e.mcpgo, loadResult.rps); ok && m > 0 {
			row(fmt.Sprintf("req/s ≥ 1.4× %s", e.mcpgo), fmt.Sprintf("%.2f×", rps/m), rps/m >= 1.4)
		}
		if g, ok := ratio(e.gosdk, loadResult.rps); ok && g > 0 {
			row(fmt.Sprintf("req/s ≥ 5× %s", e.gosdk), fmt.Sprintf("%.1f×", rps/g), rps/g >= 5)
		}
	}
	for _, s := range r.idle {
		if s.target.name == "agentwire-listen" && s.opened > 0 {
			kib := s.perStream() / 1024
			row("an idle listen stream ≤ 32 KiB", fmt.Sprintf("%.1f KiB", kib), kib <= 32)
			row("P7: an idle listen stream ≤ 36 KiB", fmt.Sprintf("%.1f KiB", kib), kib <= 36)
		}
	}
	if r.big != nil {
		row(fmt.Sprintf("%d listen streams open in one process", r.big.asked), fmt.Sprintf("%d opened", r.big.opened), r.big.opened == r.big.asked)
	}
	if h := &r.host; h.samples != nil {
		for _, tr := range hostTransports {
			for _, modern := range []bool{false, true} {
				for _, peer := range []struct {
					name string
					want float64
				}{{"go-sdk", 3}, {"mcp-go", 1.5}} {
					v, _, _, ok := h.ratio(hostKey{peer.name, tr, modern}, hostResult.callsPerSec)
					if !ok || v <= 0 {
						continue
					}
					row(fmt.Sprintf("client calls/s ≥ %g× %s's, %s, %s", peer.want, peer.name, tr, eraName(modern)),
						fmt.Sprintf("%.2f×", 1/v), 1/v >= peer.want)
				}
			}
		}
	}
	b.WriteString("\n")
	return b.String()
}
