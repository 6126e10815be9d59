package host_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"testing/synctest"
	"time"

	"github.com/agentwire/agentwire/client"
	"github.com/agentwire/agentwire/mcp"
	"github.com/agentwire/agentwire/mcp/host"
)

// legacyPeer plays a legacy server on the wire: it answers server/discover
// with -32601 after probeDelay, answers initialize at once, and reads on
// until end of input. It records the methods it was sent.
func legacyPeer(in io.Reader, out io.WriteCloser, probeDelay time.Duration, seen *[]string) {
	defer out.Close()
	sc := bufio.NewScanner(in)
	for sc.Scan() {
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		if json.Unmarshal(sc.Bytes(), &m) != nil {
			continue
		}
		*seen = append(*seen, m.Method)
		switch m.Method {
		case mcp.MethodDiscover:
			time.Sleep(probeDelay)
			fmt.Fprintf(out, `{"jsonrpc":"2.0","id":%s,"error":{"code":-32601,"message":"method not found"}}`+"\n", m.ID)
		case mcp.MethodInitialize:
			fmt.Fprintf(out, `{"jsonrpc":"2.0","id":%s,"result":{"protocolVersion":"2025-06-18","capabilities":{},"serverInfo":{"name":"legacy","version":"1"}}}`+"\n", m.ID)
		}
	}
}

func legacySession(t *testing.T, probeDelay time.Duration, opts *host.Options) (*host.Session, *[]string) {
	t.Helper()
	c2sR, c2sW := io.Pipe()
	s2cR, s2cW := io.Pipe()
	seen := new([]string)
	go legacyPeer(c2sR, s2cW, probeDelay, seen)
	if opts == nil {
		opts = &host.Options{}
	}
	opts.Transport = &client.Options{Logger: slog.New(slog.DiscardHandler)}
	sess, err := host.NewClient(context.Background(), s2cR, c2sW, opts)
	if err != nil {
		t.Fatal(err)
	}
	return sess, seen
}

// Session.ProbeDuration is the time the server/discover probe took: a
// legacy server that refuses it after 250 ms costs 250 ms of probing, and
// the initialize after it is not counted.
func TestProbeDurationIsTheProbesTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sess, _ := legacySession(t, 250*time.Millisecond, nil)
		defer sess.Close()
		if sess.Probe() != host.ProbeError || sess.Era() != mcp.Legacy {
			t.Fatalf("probe %s era %s", sess.Probe(), sess.Era())
		}
		if got := sess.ProbeDuration(); got != 250*time.Millisecond {
			t.Fatalf("ProbeDuration = %v, want 250ms", got)
		}
		if got := sess.ConnectDuration(); got < sess.ProbeDuration() {
			t.Fatalf("ConnectDuration %v < ProbeDuration %v", got, sess.ProbeDuration())
		}
	})
}

// When the era cache answers there is no probe, and no probe time.
func TestProbeDurationIsZeroWithoutAProbe(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cache := host.NewMemoryEraCache(nil)
		cache.Put("legacy-peer", host.EraEntry{Era: mcp.Legacy})
		sess, seen := legacySession(t, time.Second, &host.Options{Cache: cache, CacheKey: "legacy-peer"})
		if sess.Probe() != host.ProbeCached || sess.ProbeDuration() != 0 {
			t.Fatalf("probe %s duration %v, want cached and 0", sess.Probe(), sess.ProbeDuration())
		}
		sess.Close()
		synctest.Wait()
		for _, m := range *seen {
			if m == mcp.MethodDiscover {
				t.Fatal("a probe was sent although the cache answered")
			}
		}
	})
}

// A failed connect keeps its probe time in the ConnectError: a server
// that never answers the probe in ModernOnly costs the whole probe
// timeout.
func TestConnectErrorKeepsTheProbeDuration(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c2sR, c2sW := io.Pipe()
		s2cR, s2cW := io.Pipe()
		go func() { // reads everything, answers nothing
			_, _ = io.Copy(io.Discard, c2sR)
			s2cW.Close()
		}()
		_, err := host.NewClient(context.Background(), s2cR, c2sW, &host.Options{
			Eras:         mcp.ModernOnly,
			ProbeTimeout: time.Second,
			Transport:    &client.Options{Logger: slog.New(slog.DiscardHandler)},
		})
		var ce *host.ConnectError
		if !errors.As(err, &ce) {
			t.Fatalf("err = %v, want a *host.ConnectError", err)
		}
		if ce.Probe != host.ProbeTimeout || ce.ProbeDuration != time.Second {
			t.Fatalf("probe %s duration %v, want timeout and 1s", ce.Probe, ce.ProbeDuration)
		}
	})
}
