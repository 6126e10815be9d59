package jsonrpc

import (
	"bytes"
	"encoding/binary"
	"math/bits"
)

// Skipping the plain bytes of a string eight at a time. Keys and short
// values gain nothing from it, but a tool's arguments may be megabytes of
// text, which every pass over a message (validation, the params walk, the
// argument check and decode) would otherwise cross a byte at a time. Each
// word is tested for the bytes that end a run with the classic "has a zero
// byte" arithmetic; only the lowest flagged byte is used, and it is always
// a real one (a borrow only carries towards later bytes).

const (
	swarOnes  = 0x0101010101010101
	swarHighs = 0x8080808080808080
)

// zeroBytes flags (in their high bits) the bytes of x that are zero; the
// lowest flag is exact.
func zeroBytes(x uint64) uint64 { return (x - swarOnes) & ^x & swarHighs }

// quoteOrEscapeRun returns the index of the first '"' or '\\' at or after
// i, or len(b). Past its first 64 bytes a string is long: the rest is
// searched with bytes.IndexByte, which is vectorized, for the quote, and
// then for a backslash before it.
func quoteOrEscapeRun(b []byte, i int) int {
	if end := i + 64; end < len(b) {
		for ; i < end; i += 8 {
			x := binary.LittleEndian.Uint64(b[i:])
			if m := zeroBytes(x^('"'*swarOnes)) | zeroBytes(x^('\\'*swarOnes)); m != 0 {
				return i + bits.TrailingZeros64(m)/8
			}
		}
		q := bytes.IndexByte(b[i:], '"')
		if q < 0 {
			q = len(b) - i
		}
		if e := bytes.IndexByte(b[i:i+q], '\\'); e >= 0 {
			return i + e
		}
		return i + q
	}
	for ; i+8 <= len(b); i += 8 {
		x := binary.LittleEndian.Uint64(b[i:])
		if m := zeroBytes(x^('"'*swarOnes)) | zeroBytes(x^('\\'*swarOnes)); m != 0 {
			return i + bits.TrailingZeros64(m)/8
		}
	}
	for i < len(b) && !quoteOrEscape[b[i]] {
		i++
	}
	return i
}

// plainRun returns the index of the first byte at or after i that a
// string may not hold as it is (see plainString), or len(b).
func plainRun(b []byte, i int) int {
	for ; i+8 <= len(b); i += 8 {
		x := binary.LittleEndian.Uint64(b[i:])
		// Below 0x20: subtracting 0x20 borrows in that byte (only bytes
		// without the high bit are considered). At or above 0x80: the
		// high bit itself.
		m := zeroBytes(x^('"'*swarOnes)) | zeroBytes(x^('\\'*swarOnes)) |
			((x - 0x20*swarOnes) & ^x & swarHighs) | (x & swarHighs)
		if m != 0 {
			return i + bits.TrailingZeros64(m)/8
		}
	}
	for i < len(b) && plainString[b[i]] {
		i++
	}
	return i
}

// safeRun returns the index of the first byte at or after i that
// AppendString must look at (a control byte, '"', '\\', '<', '>', '&' or
// a byte past ASCII), or len(s).
func safeRun(s string, i int) int {
	for ; i+8 <= len(s); i += 8 {
		x := load64(s, i)
		m := zeroBytes(x^('"'*swarOnes)) | zeroBytes(x^('\\'*swarOnes)) |
			zeroBytes(x^('<'*swarOnes)) | zeroBytes(x^('>'*swarOnes)) | zeroBytes(x^('&'*swarOnes)) |
			((x - 0x20*swarOnes) & ^x & swarHighs) | (x & swarHighs)
		if m != 0 {
			return i + bits.TrailingZeros64(m)/8
		}
	}
	for i < len(s) && safeASCII[s[i]] {
		i++
	}
	return i
}

// load64 reads eight bytes of s at i, little-endian (one load).
func load64(s string, i int) uint64 {
	_ = s[i+7]
	return uint64(s[i]) | uint64(s[i+1])<<8 | uint64(s[i+2])<<16 | uint64(s[i+3])<<24 |
		uint64(s[i+4])<<32 | uint64(s[i+5])<<40 | uint64(s[i+6])<<48 | uint64(s[i+7])<<56
}

// safeASCII marks the bytes AppendString copies as they are. It is never
// written.
var safeASCII = func() (t [256]bool) {
	for c := 0x20; c < 0x80; c++ {
		t[c] = c != '"' && c != '\\' && c != '<' && c != '>' && c != '&'
	}
	return t
}()
