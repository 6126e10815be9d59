package mcp_test

import (
	"encoding/json"
	"testing"

	"github.com/agentwire/agentwire/mcp"
	"github.com/agentwire/agentwire/mcp/host"
)

func TestEraStrings(t *testing.T) {
	for e, want := range map[mcp.Era]string{mcp.EraUnknown: "unknown", mcp.Legacy: "legacy", mcp.Modern: "modern"} {
		if e.String() != want {
			t.Errorf("%d.String() = %q, want %q", e, e.String(), want)
		}
		b, err := e.MarshalText()
		var back mcp.Era
		if err != nil || string(b) != want || back.UnmarshalText(b) != nil || back != e {
			t.Errorf("%v: MarshalText %q %v, read back as %v", e, b, err, back)
		}
	}
	var e mcp.Era = mcp.Modern
	if e.UnmarshalText([]byte("dual")) == nil || e.UnmarshalText(nil) != nil || e != mcp.EraUnknown {
		t.Errorf("UnmarshalText: a bad era accepted, or empty not unknown (%v)", e)
	}
	for s, want := range map[mcp.Eras]string{mcp.BothEras: "both", mcp.ModernOnly: "modern", mcp.LegacyOnly: "legacy"} {
		if s.String() != want {
			t.Errorf("%d.String() = %q, want %q", s, s.String(), want)
		}
	}
}

func TestEraOf(t *testing.T) {
	for _, v := range mcp.ModernVersions {
		if mcp.EraOf(v) != mcp.Modern {
			t.Errorf("EraOf(%q) = %v", v, mcp.EraOf(v))
		}
	}
	for _, v := range mcp.LegacyVersions {
		if mcp.EraOf(v) != mcp.Legacy {
			t.Errorf("EraOf(%q) = %v", v, mcp.EraOf(v))
		}
	}
	for _, v := range []string{"", "2099-01-01", "modern"} {
		if mcp.EraOf(v) != mcp.EraUnknown {
			t.Errorf("EraOf(%q) = %v", v, mcp.EraOf(v))
		}
	}
}

func TestParseEras(t *testing.T) {
	for s, want := range map[string]mcp.Eras{"both": mcp.BothEras, "dual": mcp.BothEras, "auto": mcp.BothEras, "modern": mcp.ModernOnly, "legacy": mcp.LegacyOnly} {
		if got, err := mcp.ParseEras(s); err != nil || got != want {
			t.Errorf("ParseEras(%q) = %v, %v; want %v", s, got, err, want)
		}
	}
	for _, s := range []string{"", "none", "Modern", "unknown"} {
		if _, err := mcp.ParseEras(s); err == nil {
			t.Errorf("ParseEras(%q) accepted", s)
		}
	}
	for _, e := range []mcp.Eras{mcp.BothEras, mcp.ModernOnly, mcp.LegacyOnly} {
		if got, err := mcp.ParseEras(e.String()); err != nil || got != e {
			t.Errorf("ParseEras(%v.String()) = %v, %v", e, got, err)
		}
	}
}

// An EraEntry is stored as text as it was when its Era was a string, so
// a cache written before still reads.
func TestEraEntryJSON(t *testing.T) {
	b, err := json.Marshal(host.EraEntry{Era: mcp.Modern, Version: "2026-07-28"})
	if err != nil || string(b) != `{"Era":"modern","Version":"2026-07-28"}` {
		t.Fatalf("%s %v", b, err)
	}
	var e host.EraEntry
	if err := json.Unmarshal([]byte(`{"Era":"legacy"}`), &e); err != nil || e.Era != mcp.Legacy {
		t.Fatalf("%+v %v", e, err)
	}
}
