package jsonrpc

import (
	"strings"
	"testing"
)

// FuzzStringRuns holds the word-at-a-time run skippers to the byte-at-a-time
// loops they replace, from every starting offset.
func FuzzStringRuns(f *testing.F) {
	for _, s := range []string{"", "abcdefgh", `abcdefg"`, "abc\\defghijklmnop", "\x1fabcdefgh", "abcdefgh\x7f\x80", "é", "abcdefg<abcdefg>&", strings.Repeat("x", 40) + `"`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		for i := 0; i <= len(b); i++ {
			want := i
			for want < len(b) && plainString[b[want]] {
				want++
			}
			if got := plainRun(b, i); got != want {
				t.Fatalf("plainRun(%q, %d) = %d, want %d", b, i, got, want)
			}
			want = i
			for want < len(b) && !quoteOrEscape[b[want]] {
				want++
			}
			if got := quoteOrEscapeRun(b, i); got != want {
				t.Fatalf("quoteOrEscapeRun(%q, %d) = %d, want %d", b, i, got, want)
			}
			want = i
			for want < len(b) && safeASCII[b[want]] {
				want++
			}
			if got := safeRun(string(b), i); got != want {
				t.Fatalf("safeRun(%q, %d) = %d, want %d", b, i, got, want)
			}
		}
	})
}

// A request whose arguments are one long string, as a tool that is sent a
// file is.
func BenchmarkDecodeLongString(b *testing.B) {
	line := []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"` + strings.Repeat("lorem ipsum ", 1<<16) + `"}}}`)
	b.SetBytes(int64(len(line)))
	for b.Loop() {
		if _, err := Decode(line, nil); err != nil {
			b.Fatal(err)
		}
	}
}
