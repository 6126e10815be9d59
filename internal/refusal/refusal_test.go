package refusal

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"
)

func TestRefusedLogsFirstOfBurstThenOncePerWindow(t *testing.T) {
	var buf bytes.Buffer
	now := time.Unix(1000, 0)
	l := &Log{
		Logger: slog.New(slog.NewTextHandler(&buf, nil)),
		Window: time.Second,
		Now:    func() time.Time { return now },
	}
	if !l.Refused("limit hit", "limit", 3) {
		t.Fatal("first refusal of a burst was not logged")
	}
	for range 5 {
		now = now.Add(100 * time.Millisecond)
		if l.Refused("limit hit", "limit", 3) {
			t.Fatal("a refusal inside the window was logged")
		}
	}
	now = now.Add(time.Second)
	if !l.Refused("limit hit", "limit", 3) {
		t.Fatal("a refusal after the window was not logged")
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("want 2 lines, got %d: %q", len(lines), buf.String())
	}
	if strings.Contains(lines[0], "suppressed") || !strings.Contains(lines[1], "suppressed=5") {
		t.Fatalf("suppressed counts wrong: %q", lines)
	}
}

func TestZeroLogUsesDefaults(t *testing.T) {
	var l Log
	l.Logger = slog.New(slog.NewTextHandler(&bytes.Buffer{}, nil))
	if !l.Refused("x") || l.Refused("x") {
		t.Fatal("zero Log does not behave as one line per default window")
	}
}
