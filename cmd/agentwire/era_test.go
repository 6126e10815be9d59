package main

import (
	"testing"

	"github.com/agentwire/agentwire/mcp"
)

// The --era flags accept exactly the words their help lists: serve's
// "dual", call's "auto", and modern and legacy; ParseEras's other words
// for both eras are not flag values.
func TestEraFlagValues(t *testing.T) {
	for _, tc := range []struct {
		value, both string
		want        mcp.Eras
		ok          bool
	}{
		{"dual", "dual", mcp.BothEras, true},
		{"modern", "dual", mcp.ModernOnly, true},
		{"legacy", "dual", mcp.LegacyOnly, true},
		{"auto", "dual", 0, false},
		{"both", "dual", 0, false},
		{"auto", "auto", mcp.BothEras, true},
		{"modern", "auto", mcp.ModernOnly, true},
		{"legacy", "auto", mcp.LegacyOnly, true},
		{"dual", "auto", 0, false},
		{"both", "auto", 0, false},
		{"", "auto", 0, false},
		{"Modern", "auto", 0, false},
	} {
		got, ok := parseEraFlag(tc.value, tc.both)
		if ok != tc.ok || (ok && got != tc.want) {
			t.Errorf("parseEraFlag(%q, %q) = %v, %v; want %v, %v", tc.value, tc.both, got, ok, tc.want, tc.ok)
		}
	}
}
