package streamable

import (
	"bytes"
	"encoding/json"
	"strconv"
)

// Comparing an Mcp-Param- header with the argument it mirrors. The
// 2026-07-28 transport compares strings as they are, booleans as
// true/false and numbers numerically ("42" agrees with 42.0).
//
// Numbers are compared exactly and in time linear in their length: each
// side is read as a JSON number (RFC 8259 §6) and reduced to a sign, its
// significant digits and a decimal exponent; two numbers are equal when
// the three are. Nothing is expanded: 1e1000000 is the digit "1" and the
// exponent 1000001, not a million zeros (math/big.Rat would build that
// integer, tens of milliseconds per header). The header must be a JSON
// number too: "0x2a", "+42" or "42/1" are not 42, as a proxy routing on
// the header would not read them that way either.

// paramEqual compares a decoded header value with a JSON argument.
func paramEqual(header string, arg json.RawMessage) bool {
	if len(arg) == 0 {
		return false
	}
	switch arg[0] {
	case '"':
		var s string
		return json.Unmarshal(arg, &s) == nil && s == header
	case 't', 'f':
		return header == string(arg)
	}
	return numberEqual(header, arg)
}

// numberEqual reports whether a and b are JSON numbers of the same value.
func numberEqual[A, B ~string | ~[]byte](a A, b B) bool {
	var bufA, bufB [64]byte
	x, ok1 := parseDecimal(a, bufA[:0])
	y, ok2 := parseDecimal(b, bufB[:0])
	return ok1 && ok2 && x.equal(&y)
}

// decimal is a JSON number as sign × 0.digits × 10^exp, digits holding no
// leading or trailing zero (none at all for zero, whose sign is ignored).
// An exponent too long for an int64 is kept as its decimal digits, bigExp
// with bigNeg; exp is then unused.
type decimal struct {
	neg    bool
	digits []byte
	exp    int64
	bigExp []byte
	bigNeg bool
}

// maxShortExp bounds the exponents read into an int64: 18 digits, plus the
// shift by the number's own length (less than 2^48 bytes on any machine),
// cannot overflow.
const maxShortExp = 18

// parseDecimal reads s, which must be exactly a JSON number, appending its
// significant digits to buf. It does work linear in len(s).
func parseDecimal[S ~string | ~[]byte](s S, buf []byte) (decimal, bool) {
	var d decimal
	n := len(s)
	if n == 0 || int64(n) >= 1<<48 {
		return d, false
	}
	i := 0
	if s[0] == '-' {
		d.neg = true
		i++
	}
	// Integer part: 0 or [1-9][0-9]*.
	intStart := i
	switch {
	case i < n && s[i] == '0':
		i++
	case i < n && s[i] >= '1' && s[i] <= '9':
		for i < n && isDigit(s[i]) {
			i++
		}
	default:
		return d, false
	}
	intEnd := i
	fracStart, fracEnd := i, i
	if i < n && s[i] == '.' {
		i++
		fracStart = i
		for i < n && isDigit(s[i]) {
			i++
		}
		if i == fracStart {
			return d, false
		}
		fracEnd = i
	}
	expNeg := false
	expStart, expEnd := i, i
	if i < n && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < n && (s[i] == '+' || s[i] == '-') {
			expNeg = s[i] == '-'
			i++
		}
		expStart = i
		for i < n && isDigit(s[i]) {
			i++
		}
		if i == expStart {
			return d, false
		}
		expEnd = i
	}
	if i != n {
		return d, false
	}

	// The significand is int.frac; point is where the decimal point
	// sits once the leading zeros are gone: value = 0.digits × 10^point.
	for j := intStart; j < intEnd; j++ {
		buf = append(buf, s[j])
	}
	for j := fracStart; j < fracEnd; j++ {
		buf = append(buf, s[j])
	}
	point := int64(intEnd - intStart)
	lead := 0
	for lead < len(buf) && buf[lead] == '0' {
		lead++
	}
	if lead == len(buf) {
		return decimal{}, true // zero, whatever its sign and exponent
	}
	point -= int64(lead)
	end := len(buf)
	for buf[end-1] == '0' {
		end--
	}
	d.digits = buf[lead:end]

	for expStart < expEnd && s[expStart] == '0' {
		expStart++
	}
	if expEnd-expStart <= maxShortExp {
		var x int64
		for j := expStart; j < expEnd; j++ {
			x = x*10 + int64(s[j]-'0')
		}
		if expNeg {
			x = -x
		}
		d.exp = x + point
		return d, true
	}
	// |x| >= 10^18 > |point|: the sum has x's sign, and its magnitude is
	// |x| + point (x > 0) or |x| - point (x < 0).
	mag := make([]byte, 0, expEnd-expStart+1)
	for j := expStart; j < expEnd; j++ {
		mag = append(mag, s[j])
	}
	if expNeg {
		point = -point
	}
	d.bigNeg = expNeg
	d.bigExp = addSmall(mag, point)
	return d, true
}

// addSmall returns the decimal digits of mag + v, where mag holds the
// digits of an integer larger than |v| (no leading zeros). It reuses mag.
func addSmall(mag []byte, v int64) []byte {
	sub := v < 0
	if sub {
		v = -v // |v| < 2^48: no overflow
	}
	carry := int64(0)
	for j := len(mag) - 1; j >= 0 && (v > 0 || carry != 0); j-- {
		digit := int64(mag[j]-'0') + carry
		carry = 0
		if sub {
			digit -= v % 10
			if digit < 0 {
				digit += 10
				carry = -1
			}
		} else {
			digit += v % 10
			if digit > 9 {
				digit -= 10
				carry = 1
			}
		}
		mag[j] = byte('0' + digit)
		v /= 10
	}
	if carry > 0 {
		mag = append([]byte{'1'}, mag...)
	}
	for len(mag) > 1 && mag[0] == '0' {
		mag = mag[1:]
	}
	return mag
}

func (x *decimal) equal(y *decimal) bool {
	if len(x.digits) == 0 || len(y.digits) == 0 {
		return len(x.digits) == len(y.digits) // zero equals only zero
	}
	if x.neg != y.neg || !bytes.Equal(x.digits, y.digits) {
		return false
	}
	if x.bigExp == nil && y.bigExp == nil {
		return x.exp == y.exp
	}
	// At least one exponent is long: compare them as decimal strings.
	var bx, by [24]byte
	xn, xd := x.expDigits(bx[:0])
	yn, yd := y.expDigits(by[:0])
	return xn == yn && bytes.Equal(xd, yd)
}

// expDigits returns the exponent as a sign and decimal digits.
func (x *decimal) expDigits(buf []byte) (neg bool, digits []byte) {
	if x.bigExp != nil {
		return x.bigNeg, x.bigExp
	}
	e := x.exp
	if e < 0 {
		return true, strconv.AppendUint(buf, uint64(-e), 10)
	}
	return false, strconv.AppendUint(buf, uint64(e), 10)
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }
