package streamable

import (
	"encoding/json"
	"math/big"
	"strconv"
	"strings"
	"testing"
)

func TestParamEqual(t *testing.T) {
	cases := []struct {
		header, arg string
		want        bool
	}{
		{"us", `"us"`, true},
		{"us", `"u\u0073"`, true},
		{"us", `"eu"`, false},
		{"true", `true`, true},
		{"false", `true`, false},
		{"42", `42`, true},
		{"42", `42.0`, true},
		{"4.2e1", `42`, true},
		{"420e-1", `42`, true},
		{"42", `43`, false},
		{"-42", `42`, false},
		{"0", `-0`, true},
		{"0e99", `0.000`, true},
		{"0", `1e-400`, false},
		{"12345678901234567890", `12345678901234567890`, true},
		{"12345678901234567890", `12345678901234567891`, false},
		{"1E+2", `100`, true},
		// Not JSON numbers, though math/big reads some of them as 42.
		{"+42", `42`, false},
		{"0x2a", `42`, false},
		{"42/1", `42`, false},
		{"042", `42`, false},
		{"42.", `42`, false},
		{".5", `0.5`, false},
		{"4_2", `42`, false},
		{"", `0`, false},
		{"42", `{"a":42}`, false},
		{"42", `[42]`, false},
		{"null", `null`, false},
	}
	for _, tc := range cases {
		if got := paramEqual(tc.header, json.RawMessage(tc.arg)); got != tc.want {
			t.Errorf("paramEqual(%q, %s) = %v, want %v", tc.header, tc.arg, got, tc.want)
		}
	}
}

// Defect: an Mcp-Param- header compared as a number was expanded with
// big.Rat, so "1e1000000" built a million-digit integer (tens of ms of CPU
// for a 231-byte request). The comparison now keeps the exponent as an
// integer: these are exact, and none of them allocates.
func TestRegressionParamHeaderHugeExponentCPU(t *testing.T) {
	cases := []struct {
		header, arg string
		want        bool
	}{
		{"1e1000000", `1e1000000`, true},
		{"1e1000000", `1e999999`, false},
		{"1e1000000", `10e999999`, true},
		{"1e1000000", `0.1e1000001`, true},
		{"1e1000000", `100000e999995`, true},
		{"1e1000000", `100001e999995`, false},
		{"1e-1000000", `0.00001e-999995`, true},
		{"1e-1000000", `1e1000000`, false},
		{"-1e1000000", `1e1000000`, false},
		{"0e1000000", `0`, true},
		{"1e999999999999999999", `10e999999999999999998`, true},
		{"1e-999999999999999999", `0.1e-999999999999999998`, true},
		{"1e999999999999999999", `1e999999999999999998`, false},
	}
	for _, tc := range cases {
		if got := paramEqual(tc.header, json.RawMessage(tc.arg)); got != tc.want {
			t.Errorf("paramEqual(%q, %s) = %v, want %v", tc.header, tc.arg, got, tc.want)
		}
		arg := json.RawMessage(tc.arg)
		if n := testing.AllocsPerRun(10, func() { paramEqual(tc.header, arg) }); n != 0 {
			t.Errorf("paramEqual(%q, %s) allocates %v times", tc.header, tc.arg, n)
		}
	}
}

// Exponents of thousands of digits are neither parsed into big integers
// nor expanded: they are shifted as decimal strings, work linear in their
// length. The cases straddle the 18 digits an int64 holds.
func TestParamEqualLongExponents(t *testing.T) {
	nines := strings.Repeat("9", 3000)
	one0 := "1" + strings.Repeat("0", 3000) // nines + 1
	cases := []struct {
		a, b string
		want bool
	}{
		{"1e" + nines, "10e" + nines[:len(nines)-1] + "8", true},
		{"1e" + nines, "0.1e" + one0, true},
		{"1e" + one0, "10e" + nines, true},
		{"1e-" + one0, "0.1e-" + nines, true},
		{"1e-" + nines, "100e-" + one0[:len(one0)-1] + "1", true},
		{"1e" + nines, "1e" + one0, false},
		{"1e" + nines, "-1e" + nines, false},
		{"1e" + nines, "1e-" + nines, false},
		{"1e" + nines, "1e0000" + nines, true},
		// Around 10^18, where one side fits an int64 and the other does not.
		{"1e999999999999999999", "0.1e1000000000000000000", true},
		{"10e999999999999999999", "1e1000000000000000000", true},
		{"1e1000000000000000000", "1e999999999999999999", false},
		{"0.001e1000000000000000002", "1e999999999999999999", true},
		{"1000e999999999999999997", "1e1000000000000000000", true},
		{"1e-999999999999999999", "10e-1000000000000000000", true},
		{"1e-1000000000000000001", "0.01e-999999999999999999", true},
	}
	for _, tc := range cases {
		if got := numberEqual(tc.a, tc.b); got != tc.want {
			t.Errorf("numberEqual(%.40s…, %.40s…) = %v, want %v", tc.a, tc.b, got, tc.want)
		}
		if got := numberEqual(tc.b, tc.a); got != tc.want {
			t.Errorf("numberEqual(%.40s…, %.40s…) = %v, want %v (swapped)", tc.b, tc.a, got, tc.want)
		}
	}
}

func BenchmarkParamEqual(b *testing.B) {
	longExp := "1e" + strings.Repeat("9", 4000)
	for _, bc := range []struct{ name, header, arg string }{
		{"small", "42", "42"},
		{"exponent", "1e1000000", "1e1000000"},
		{"exponent-mismatch", "1e1000000", "10e999999"},
		{"long-exponent", longExp, longExp},
		{"long-mantissa", "1" + strings.Repeat("0", 4000), "1e4000"},
	} {
		arg := json.RawMessage(bc.arg)
		b.Run(bc.name, func(b *testing.B) {
			for b.Loop() {
				paramEqual(bc.header, arg)
			}
		})
	}
}

// isJSONNumber is the oracle's grammar: one number token, nothing else.
func isJSONNumber(s string) bool {
	if s == "" || (s[0] != '-' && !isDigit(s[0])) {
		return false
	}
	return json.Valid([]byte(s)) && !strings.ContainsAny(s, " \t\r\n")
}

// FuzzNumberEqual holds numberEqual to math/big on inputs small enough for
// big.Rat to expand.
func FuzzNumberEqual(f *testing.F) {
	for _, p := range [][2]string{
		{"42", "42.0"}, {"4.2e1", "420e-1"}, {"0", "-0.0e5"}, {"1e3", "1000"}, {"1e3", "100"},
		{"0x2a", "42"}, {"+1", "1"}, {"1.", "1"}, {"-0.001200", "-12e-4"}, {"00", "0"}, {"1E+2", "1e2"},
	} {
		f.Add(p[0], p[1])
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		got := numberEqual(a, b)
		if !isJSONNumber(a) || !isJSONNumber(b) {
			if got {
				t.Fatalf("numberEqual(%q, %q) = true for a non-number", a, b)
			}
			return
		}
		for _, s := range []string{a, b} {
			if i := strings.IndexAny(s, "eE"); i >= 0 {
				if e, err := strconv.Atoi(strings.TrimLeft(s[i+1:], "+-")); err != nil || e > 5000 {
					return // too big for the oracle
				}
			}
		}
		x, ok1 := new(big.Rat).SetString(a)
		y, ok2 := new(big.Rat).SetString(b)
		if !ok1 || !ok2 {
			t.Fatalf("big.Rat rejects a JSON number: %q %q", a, b)
		}
		if want := x.Cmp(y) == 0; got != want {
			t.Fatalf("numberEqual(%q, %q) = %v, math/big says %v", a, b, got, want)
		}
	})
}

// FuzzNumberEqualLongExponent moves the decimal point of mant by shift
// places and the exponent the other way, with exponents of any length
// (the arithmetic checked by math/big on the exponent alone): the values
// stay equal, and one more in the exponent makes them differ.
func FuzzNumberEqualLongExponent(f *testing.F) {
	f.Add(uint64(1), "1000000", int8(3), false)
	f.Add(uint64(25), strings.Repeat("9", 40), int8(-7), true)
	f.Add(uint64(7), "999999999999999999", int8(2), false)
	f.Add(uint64(100), "1000000000000000000", int8(-2), true)
	f.Fuzz(func(t *testing.T, mant uint64, exp string, shift int8, negExp bool) {
		if exp == "" || len(exp) > 5000 || strings.Trim(exp, "0123456789") != "" {
			return
		}
		x, _ := new(big.Int).SetString(exp, 10)
		if negExp {
			x.Neg(x)
		}
		ms := strconv.FormatUint(mant, 10)
		a := ms + "e" + x.String()
		// mant × 10^x = (mant × 10^shift) × 10^(x-shift), with the
		// point moved within the digits (adding zeros where needed).
		digits, point := ms, len(ms)+int(shift)
		switch {
		case point <= 0:
			digits, point = strings.Repeat("0", 1-point)+digits, 1
		case point > len(digits):
			digits += strings.Repeat("0", point-len(digits))
		}
		moved := digits[:point]
		if point < len(digits) {
			moved += "." + digits[point:]
		}
		moved = strings.TrimLeft(moved, "0")
		if moved == "" || moved[0] == '.' {
			moved = "0" + moved
		}
		y := new(big.Int).Sub(x, big.NewInt(int64(shift)))
		b := moved + "e" + y.String()
		if !numberEqual(a, b) {
			t.Fatalf("numberEqual(%q, %q) = false", a, b)
		}
		if mant != 0 {
			c := moved + "e" + new(big.Int).Add(y, big.NewInt(1)).String()
			if numberEqual(a, c) {
				t.Fatalf("numberEqual(%q, %q) = true", a, c)
			}
		}
	})
}
