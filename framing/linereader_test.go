package framing_test

import (
	"bytes"
	"errors"
	"io"
	"runtime"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/agentwire/agentwire/framing"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// readAll returns every line, with "<too long>" for an over-long one.
func readAll(t *testing.T, r io.Reader, max int) []string {
	t.Helper()
	lr := framing.NewLineReader(r, max)
	var out []string
	for {
		line, err := lr.ReadLine()
		if errors.Is(err, framing.ErrLineTooLong) {
			out = append(out, "<too long>")
			continue
		}
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatalf("ReadLine: %v", err)
		}
		out = append(out, string(line))
	}
}

func TestLineReader(t *testing.T) {
	cases := []struct {
		name string
		in   string
		max  int
		want []string
	}{
		{"lines", "a\nbb\n", 0, []string{"a", "bb"}},
		{"CRLF", "a\r\nb\r\n", 0, []string{"a", "b"}},
		{"only one CR is stripped", "a\r\r\n", 0, []string{"a\r"}},
		{"final line without newline", "a\nlast", 0, []string{"a", "last"}},
		{"final CR without newline", "a\r", 0, []string{"a"}},
		{"blank lines are returned", "\n\n", 0, []string{"", ""}},
		{"empty input", "", 0, nil},
		{"exactly the limit", "abcd\nx\n", 4, []string{"abcd", "x"}},
		{"the limit plus CR", "abcd\r\nx\n", 4, []string{"abcd", "x"}},
		{"one over the limit then a good line", "abcde\nok\n", 4, []string{"<too long>", "ok"}},
		{"far over the limit", strings.Repeat("z", 1<<20) + "\nok\n", 10, []string{"<too long>", "ok"}},
		{"over the limit at EOF", "ok\n" + strings.Repeat("z", 100), 10, []string{"ok", "<too long>"}},
		// Regression (found by FuzzLineReader): a final unterminated line one
		// byte over the limit was returned instead of rejected.
		{"one over the limit at EOF", "0000", 3, []string{"<too long>"}},
		{"long lines within the limit", strings.Repeat("y", 300000) + "\nok\n", 1 << 20, []string{strings.Repeat("y", 300000), "ok"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for name, r := range map[string]io.Reader{
				"whole":        strings.NewReader(tc.in),
				"one byte":     iotest.OneByteReader(strings.NewReader(tc.in)),
				"data and EOF": iotest.DataErrReader(strings.NewReader(tc.in)),
			} {
				if got := readAll(t, r, tc.max); !equal(got, tc.want) {
					t.Errorf("%s: got %.60q, want %.60q", name, got, tc.want)
				}
			}
		})
	}
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// An over-long line is discarded without being buffered: the buffer never
// grows far past the limit however long the line is.
func TestOverLongLineIsNotBuffered(t *testing.T) {
	big := io.MultiReader(io.LimitReader(neverNewline{}, 64<<20), strings.NewReader("\nok\n"))
	lr := framing.NewLineReader(big, 1<<10)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	if _, err := lr.ReadLine(); !errors.Is(err, framing.ErrLineTooLong) {
		t.Fatalf("err = %v", err)
	}
	runtime.ReadMemStats(&after)
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 1<<20 {
		t.Errorf("skipping a 64 MiB line allocated %d bytes", grew)
	}
	var tl *framing.LineTooLongError
	_, err := framing.NewLineReader(strings.NewReader("xxxxx\n"), 2).ReadLine()
	if !errors.As(err, &tl) || tl.Limit != 2 {
		t.Fatalf("err = %v", err)
	}
	line, err := lr.ReadLine()
	if err != nil || string(line) != "ok" {
		t.Fatalf("after the long line: %q, %v", line, err)
	}
}

type neverNewline struct{}

func (neverNewline) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = 'x'
	}
	return len(p), nil
}

func TestReadErrorsPassThrough(t *testing.T) {
	boom := errors.New("boom")
	lr := framing.NewLineReader(io.MultiReader(strings.NewReader("a\nb"), iotest.ErrReader(boom)), 0)
	if l, err := lr.ReadLine(); string(l) != "a" || err != nil {
		t.Fatalf("%q %v", l, err)
	}
	if l, err := lr.ReadLine(); string(l) != "b" || err != nil {
		t.Fatalf("the partial line before an error: %q %v", l, err)
	}
	if _, err := lr.ReadLine(); !errors.Is(err, boom) {
		t.Fatalf("err = %v", err)
	}
}

func TestHasLine(t *testing.T) {
	lr := framing.NewLineReader(strings.NewReader("a\nb\nc"), 0)
	if lr.HasLine() {
		t.Fatal("HasLine before any read")
	}
	lr.ReadLine()
	if !lr.HasLine() {
		t.Fatal("b is buffered")
	}
	lr.ReadLine()
	if lr.HasLine() {
		t.Fatal("c has no newline yet and EOF is not known")
	}
}

// FuzzLineReader compares the reader with a plain split of the input.
func FuzzLineReader(f *testing.F) {
	f.Add([]byte("a\r\nbb\n\nccc"), 3)
	f.Add([]byte("xxxxxxxx\nab\r"), 2)
	f.Fuzz(func(t *testing.T, in []byte, max int) {
		if max <= 0 || max > 64 {
			max = 1 + (max&63+64)%64
		}
		var want []string
		parts := bytes.Split(in, []byte("\n"))
		if len(parts[len(parts)-1]) == 0 {
			parts = parts[:len(parts)-1]
		}
		for _, p := range parts {
			p = bytes.TrimSuffix(p, []byte("\r"))
			if len(p) > max {
				want = append(want, "<too long>")
			} else {
				want = append(want, string(p))
			}
		}
		got := readAll(t, iotest.HalfReader(bytes.NewReader(in)), max)
		if !equal(got, want) {
			t.Fatalf("max %d input %q: got %q want %q", max, in, got, want)
		}
	})
}
