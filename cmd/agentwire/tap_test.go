//go:build unix

package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// tap passes bytes through unchanged: a long random session (JSON-RPC
// lines, garbage, CRLF, invalid UTF-8, a long line, no final newline)
// through `tap -- cat` comes back byte for byte, and every line is logged
// once per direction.
func TestTapIsByteExact(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 9))
	var in bytes.Buffer
	lines := 0
	for i := range 5000 {
		switch rng.IntN(6) {
		case 0:
			in.WriteString("not json at all\n")
		case 1:
			in.WriteString(`{"jsonrpc":"2.0","id":"x` + string(rune('a'+i%26)) + `","method":"m"}` + "\r\n")
		case 2:
			b := make([]byte, rng.IntN(200))
			for j := range b {
				b[j] = byte(rng.IntN(256))
				if b[j] == '\n' {
					b[j] = 0xff
				}
			}
			in.Write(append(b, '\n'))
		case 3:
			in.WriteString(strings.Repeat("y", 70000) + "\n")
		default:
			in.WriteString(`{"jsonrpc":"2.0","id":` + string(rune('0'+i%10)) + `,"method":"echo","params":[1]}` + "\n")
		}
		lines++
	}
	in.WriteString("final line without newline")
	lines++

	logPath := filepath.Join(t.TempDir(), "tap.jsonl")
	cmd := exec.Command(binary, "tap", "--log", logPath, "--", "cat")
	cmd.Stdin = bytes.NewReader(in.Bytes())
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(out, in.Bytes()) {
		t.Fatalf("output differs from input (%d vs %d bytes)", len(out), len(in.Bytes()))
	}
	f, err := os.Open(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	count := map[string]int{}
	valid := 0
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		var e struct {
			Dir   string `json:"dir"`
			Valid bool   `json:"valid"`
			Kind  string `json:"kind"`
		}
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatalf("log line is not JSON: %s", sc.Bytes())
		}
		count[e.Dir]++
		if e.Dir == "in" && e.Valid {
			valid++
		}
	}
	if count["in"] != lines || count["out"] != lines {
		t.Errorf("logged %d in / %d out lines, want %d each", count["in"], count["out"], lines)
	}
	if valid == 0 {
		t.Error("no line was recognised as a valid message")
	}
}

// The server's exit status and stderr come through the tap.
func TestTapPropagatesExitAndStderr(t *testing.T) {
	logPath := filepath.Join(t.TempDir(), "tap.jsonl")
	cmd := exec.Command(binary, "tap", "--log", logPath, "--", "sh", "-c", "echo oops >&2; exit 7")
	var errb bytes.Buffer
	cmd.Stderr = &errb
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 7 {
		t.Fatalf("exit: %v", err)
	}
	if errb.String() != "oops\n" {
		t.Errorf("stderr %q", errb.String())
	}
	log, _ := os.ReadFile(logPath)
	if !strings.Contains(string(log), `"dir":"stderr"`) || !strings.Contains(string(log), `"text":"oops"`) ||
		!strings.Contains(string(log), `"event":"exit","status":7`) {
		t.Errorf("log:\n%s", log)
	}
}

// Regressions (found in review): tap waited for a child the server left
// behind holding its stdout, and could panic logging after it had closed
// its log; every line is logged, none dropped.
func TestRegressionTapReturnsWhenTheServerExits(t *testing.T) {
	cmd := exec.Command(binary, "tap", "--log", os.DevNull, "--", "sh", "-c", "sleep 30 & echo hi; exit 4")
	stdin, _ := cmd.StdinPipe() // stays open
	defer stdin.Close()
	start := time.Now()
	out, err := cmd.Output()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 4 || string(out) != "hi\n" {
		t.Fatalf("exit %v, output %q", err, out)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("tap returned %v after the server exited", d)
	}
}

// BenchmarkTapRoundTrip measures what tap adds per round trip in front of
// `serve echo` (go test -run XXX -bench Tap ./cmd/agentwire): compare the
// direct and tapped ns/op of the same run.
func BenchmarkTapRoundTrip(b *testing.B) {
	for _, name := range []string{"direct", "tapped"} {
		b.Run(name, func(b *testing.B) {
			args := []string{"serve", "echo"}
			if name == "tapped" {
				args = append([]string{"tap", "--log", os.DevNull, "--", binary}, args...)
			}
			cmd := exec.Command(binary, args...)
			in, _ := cmd.StdinPipe()
			out, _ := cmd.StdoutPipe()
			if err := cmd.Start(); err != nil {
				b.Fatal(err)
			}
			r := bufio.NewReader(out)
			line := []byte(`{"jsonrpc":"2.0","id":1,"method":"echo","params":[1]}` + "\n")
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				in.Write(line)
				if _, err := r.ReadSlice('\n'); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			in.Close()
			cmd.Wait()
		})
	}
}
