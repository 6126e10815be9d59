package mcp

import (
	"encoding/json"
	"testing"
)

func TestIsInteger(t *testing.T) {
	for n, want := range map[string]bool{
		"0": true, "-7": true, "2.0": true, "2.50e1": true, "1e1000000": true, "100e-2": true, "0.0e-5": true,
		"-0.5": false, "1.5": false, "1e-1": false, "1e-1000000": false, "123e-2": false, "1.25E+1": false,
		"1e99999999999999999999": true, "1e-99999999999999999999": false,
	} {
		if got := isInteger(json.Number(n)); got != want {
			t.Errorf("isInteger(%s) = %v, want %v", n, got, want)
		}
	}
}
