package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

type bigResult struct {
	ms     float64 // median round trip of an 8 MiB message
	rssMiB float64 // the server process's peak resident memory
	err    string
}

type floodResult struct {
	accepted   int64   // requests written before the server stopped reading
	heapMiB    float64 // live heap growth while the client did not read
	goroutines int     // goroutine growth while the client did not read
	err        string
}

// extremes runs the size and backpressure workloads on the servers that
// take plain JSON-RPC echo and MCP tools/call.
func (r *run) extremes() error {
	r.big, r.over, r.flood = map[string]bigResult{}, map[string]string{}, map[string]floodResult{}
	for _, s := range servers {
		if s.work == wACP {
			continue
		}
		fmt.Fprintf(os.Stderr, "extremes %s\n", s.name)
		r.big[s.name] = bigMessage(s)
		r.over[s.name] = overLimit(s)
		r.flood[s.name] = flood(s)
	}
	return nil
}

const mib = 1 << 20

// bigMessage times an 8 MiB request and response across a subprocess.
func bigMessage(s server) bigResult {
	c, err := startSubprocess(s)
	if err != nil {
		return bigResult{err: err.Error()}
	}
	defer c.stop()
	payload := strings.Repeat("x", 8*mib)
	var times []float64
	for range 3 {
		req := c.request(payload)
		t := time.Now()
		if _, err := c.w.Write(req); err != nil {
			return bigResult{err: err.Error()}
		}
		res, err := c.readResponseTimeout(30 * time.Second)
		if err != nil {
			return bigResult{err: err.Error()}
		}
		if len(res) < 8*mib {
			return bigResult{err: "answered " + summarize(res)}
		}
		times = append(times, float64(time.Since(t))/float64(time.Millisecond))
	}
	slices.Sort(times)
	return bigResult{ms: times[1], rssMiB: peakRSS(c.pid)}
}

// overLimit sends a 20 MiB request across a subprocess and reports what
// became of it and of the connection.
func overLimit(s server) string {
	c, err := startSubprocess(s)
	if err != nil {
		return "error: " + err.Error()
	}
	defer c.stop()
	payload := strings.Repeat("y", 20*mib)
	errc := make(chan error, 1)
	req := bytes.Clone(c.request(payload))
	go func() {
		_, err := c.w.Write(req)
		errc <- err
	}()
	res, err := c.readResponseTimeout(20 * time.Second)
	var outcome string
	switch {
	case err != nil && strings.Contains(err.Error(), "timeout"):
		return "no answer within 20 s"
	case err != nil:
		return "connection closed (" + err.Error() + ")"
	case bytes.Contains(res, []byte(`"error"`)):
		outcome = "error reply"
	case len(res) > 20*mib:
		outcome = "answered in full (no limit)"
	default:
		outcome = "answered " + summarize(res)
	}
	select {
	case <-errc:
	case <-time.After(20 * time.Second):
		return outcome + ", request never fully read"
	}
	if _, err := c.w.Write(c.request("after")); err != nil {
		return outcome + ", connection closed"
	}
	if res, err := c.readResponseTimeout(10 * time.Second); err != nil || !bytes.Contains(res, []byte("after")) {
		return outcome + ", connection lost"
	}
	return outcome + ", connection kept"
}

// flood writes 10,000 requests of 1 KiB without reading any response, to
// an in-process server over OS pipes, and measures what the server holds
// once it has stopped taking more.
func flood(s server) floodResult {
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	g0 := runtime.NumGoroutine()
	c, err := startInProcess(s)
	if err != nil {
		return floodResult{err: err.Error()}
	}
	payload := strings.Repeat("z", 1024)
	var written atomic.Int64
	writerDone := make(chan struct{})
	go func() {
		defer close(writerDone)
		for range 10000 {
			if _, err := c.w.Write(c.request(payload)); err != nil {
				return
			}
			written.Add(1)
		}
	}()
	// Wait until the writer has made no progress for 500 ms (the server
	// stopped reading) or has written everything.
	last := int64(-1)
	for {
		select {
		case <-writerDone:
		case <-time.After(500 * time.Millisecond):
			if n := written.Load(); n != last {
				last = n
				continue
			}
		}
		break
	}
	var after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&after)
	res := floodResult{
		accepted:   written.Load(),
		heapMiB:    (float64(after.HeapInuse) - float64(before.HeapInuse)) / mib,
		goroutines: runtime.NumGoroutine() - g0,
	}
	// Let everything drain, then stop.
	go io.Copy(io.Discard, c.br)
	<-writerDone
	c.stop()
	return res
}

// readResponseTimeout is readResponse with a deadline.
func (c *conn) readResponseTimeout(d time.Duration) ([]byte, error) {
	type result struct {
		b   []byte
		err error
	}
	ch := make(chan result, 1)
	go func() {
		b, err := c.readResponse()
		ch <- result{bytes.Clone(b), err}
	}()
	select {
	case r := <-ch:
		return r.b, r.err
	case <-time.After(d):
		return nil, fmt.Errorf("timeout after %v", d)
	}
}

// peakRSS is a process's peak resident memory (VmHWM), in MiB.
func peakRSS(pid int) float64 {
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			kb, _ := strconv.ParseFloat(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 64)
			return kb / 1024
		}
	}
	return 0
}

func summarize(b []byte) string {
	if len(b) > 120 {
		return fmt.Sprintf("%s... (%d bytes)", b[:120], len(b))
	}
	return string(bytes.TrimSpace(b))
}
