package mcp

import (
	"encoding/json"
	"errors"
	"slices"
)

// One vocabulary for MCP's two protocol eras. Era is a fact: what a
// request, a connection or a session speaks (or EraUnknown before that is
// decided). Eras is a setting: which eras a server serves or a client will
// speak. Two types, so that a setting is never mistaken for a decision:
// a server set to BothEras still serves each request in one Era.

// Era is one of MCP's two protocol eras: what a request, a connection or a
// session speaks.
type Era uint8

const (
	EraUnknown Era = iota // not decided (yet)
	Legacy                // the initialize handshake: 2025-11-25 and earlier
	Modern                // per-request _meta, server/discover: 2026-07-28
)

// String is "legacy", "modern" or "unknown".
func (e Era) String() string {
	switch e {
	case Legacy:
		return "legacy"
	case Modern:
		return "modern"
	}
	return "unknown"
}

// MarshalText is String, so that an EraCache (or a JSON report) can store
// an Era as text.
func (e Era) MarshalText() ([]byte, error) { return []byte(e.String()), nil }

// UnmarshalText reads what MarshalText writes ("unknown" or empty is
// EraUnknown).
func (e *Era) UnmarshalText(b []byte) error {
	for _, x := range []Era{Legacy, Modern, EraUnknown} {
		if string(b) == x.String() {
			*e = x
			return nil
		}
	}
	if len(b) == 0 {
		*e = EraUnknown
		return nil
	}
	return errors.New("mcp: unknown era " + quoteJSON(string(b)))
}

// EraOf is the era of a protocol version: Modern for ModernVersions,
// Legacy for LegacyVersions, EraUnknown for anything else.
func EraOf(version string) Era {
	switch {
	case slices.Contains(ModernVersions, version):
		return Modern
	case slices.Contains(LegacyVersions, version):
		return Legacy
	}
	return EraUnknown
}

// Eras is which eras a server serves or a client will speak.
type Eras uint8

const (
	// BothEras is the default. A server serves modern requests
	// (per-request _meta) and the legacy initialize handshake on the same
	// connection, deciding per request. A client probes with
	// server/discover first and falls back to initialize only on evidence
	// that the server is not modern (guarantee E2).
	BothEras Eras = iota
	// ModernOnly: a server rejects initialize with -32022 naming the
	// modern versions; a client speaks 2026-07-28 only, without fallback.
	ModernOnly
	// LegacyOnly: a server knows nothing of per-request metadata
	// (server/discover is an unknown method); a client goes straight to
	// initialize, without a probe.
	LegacyOnly
)

// String is "both", "modern" or "legacy".
func (e Eras) String() string {
	switch e {
	case ModernOnly:
		return Modern.String()
	case LegacyOnly:
		return Legacy.String()
	}
	return "both"
}

// ParseEras reads an Eras as the command line writes it: "modern",
// "legacy", or "both" (also "dual", a server's word, and "auto", a
// client's) for BothEras.
func ParseEras(s string) (Eras, error) {
	switch s {
	case "both", "dual", "auto":
		return BothEras, nil
	case ModernOnly.String():
		return ModernOnly, nil
	case LegacyOnly.String():
		return LegacyOnly, nil
	}
	return BothEras, errors.New("mcp: unknown eras " + quoteJSON(s) + " (both, modern or legacy)")
}

func quoteJSON(s string) string { b, _ := json.Marshal(s); return string(b) }
