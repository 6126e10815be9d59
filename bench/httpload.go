package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Protocol versions of the two eras.
const (
	legacyVersion = "2025-11-25"
	modernVersion = "2026-07-28"
)

// reference is the target a row is compared with: the plain handler sent
// the same era's requests, so that the ratio is the cost of the library
// and not of the era's bigger requests.
func (t httpTarget) reference() string {
	if t.modern {
		return "plain-2026"
	}
	return "plain-2025"
}

func (t httpTarget) isReference() bool { return t.server == "plain" }

// An httpTarget is one row of the HTTP tables: a server process and the
// way the clients talk to it.
type httpTarget struct {
	name   string
	server string // an httpServers name
	modern bool   // 2026-07-28 (per-request _meta, the mirroring headers); else 2025-11-25 with initialize
	what   string
}

var httpTargets = []httpTarget{
	{name: "plain-2025", server: "plain", what: "hand-written handler, sent the 2025-11-25 form (initialize, then calls)"},
	{name: "plain-2026", server: "plain", modern: true, what: "hand-written handler, sent the 2026-07-28 form (_meta and headers ignored)"},
	{name: "agentwire-2025", server: "agentwire", what: "agentwire, 2025-11-25 (initialize, stateless)"},
	{name: "agentwire-2026", server: "agentwire", modern: true, what: "agentwire, 2026-07-28"},
	{name: "agentwire-sessions-2025", server: "agentwire-sessions", what: "agentwire, Sessions, 2025-11-25 (Mcp-Session-Id)"},
	{name: "go-sdk-stateful-2025", server: "go-sdk", what: "go-sdk, stateful, 2025-11-25 (Mcp-Session-Id)"},
	{name: "go-sdk-stateless-2025", server: "go-sdk-stateless", what: "go-sdk, Stateless, 2025-11-25"},
	{name: "go-sdk-stateful-2026", server: "go-sdk", modern: true, what: "go-sdk, stateful handler, 2026-07-28 (it refuses them unless Stateless)"},
	{name: "go-sdk-stateless-2026", server: "go-sdk-stateless", modern: true, what: "go-sdk, Stateless, 2026-07-28"},
	{name: "mcp-go-stateful-2025", server: "mcp-go", what: "mcp-go, WithStateful, 2025-11-25 (Mcp-Session-Id)"},
	{name: "mcp-go-stateless-2025", server: "mcp-go-stateless", what: "mcp-go, WithStateLess, 2025-11-25"},
	{name: "mcp-go-2026", server: "mcp-go-stateless", modern: true, what: "mcp-go, 2026-07-28 (sessions do not apply)"},
	{name: "ts-2025", server: "ts", what: "TypeScript SDK v2, 2025-11-25 (its stateless legacy fallback)"},
	{name: "ts-2026", server: "ts", modern: true, what: "TypeScript SDK v2, 2026-07-28"},
}

const modernMeta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"bench","version":"1"},"io.modelcontextprotocol/clientCapabilities":{}}`

// httpLoad is one simulated client: sequential POSTs on a shared
// keep-alive transport, its own session when the server mints one.
type httpLoad struct {
	hc      *http.Client
	url     string
	modern  bool
	session string // Mcp-Session-Id, when the server gave one
	id      int64
	who     string // this client's tag in the echoed text
	body    bytes.Buffer
	resp    bytes.Buffer
}

func newHTTPLoad(hc *http.Client, url string, modern bool, who string) *httpLoad {
	return &httpLoad{hc: hc, url: url, modern: modern, who: who}
}

// newTransport is the load generator's connection pool: keep-alive, room
// for every client's connection.
func newTransport(conns int) *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConns = conns + 16
	t.MaxIdleConnsPerHost = conns + 16
	t.MaxConnsPerHost = 0
	t.DisableCompression = true
	return t
}

// post sends one message and returns the response's body and type.
func (l *httpLoad) post(method, name string, body []byte) (*http.Response, error) {
	req, err := http.NewRequest(http.MethodPost, l.url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	h := req.Header
	h["Content-Type"] = []string{"application/json"}
	h["Accept"] = []string{"application/json, text/event-stream"}
	if l.modern {
		h["Mcp-Protocol-Version"] = []string{modernVersion}
		h["Mcp-Method"] = []string{method}
		if name != "" {
			h["Mcp-Name"] = []string{name}
		}
	} else {
		h["Mcp-Protocol-Version"] = []string{legacyVersion}
		if l.session != "" {
			h["Mcp-Session-Id"] = []string{l.session}
		}
	}
	return l.hc.Do(req)
}

// initialize does the legacy handshake, keeping any session id.
func (l *httpLoad) initialize() error {
	if l.modern {
		return nil
	}
	res, err := l.post("initialize", "", []byte(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"`+legacyVersion+`","capabilities":{},"clientInfo":{"name":"bench","version":"1"}}}`))
	if err != nil {
		return err
	}
	l.session = res.Header.Get("Mcp-Session-Id")
	msg, err := l.answer(res, "0")
	if err != nil {
		return fmt.Errorf("initialize: %w", err)
	}
	if !bytes.Contains(msg, []byte(`"protocolVersion"`)) {
		return fmt.Errorf("initialize: %s", summarize(msg))
	}
	res, err = l.post("notifications/initialized", "", []byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}`))
	if err != nil {
		return err
	}
	io.Copy(io.Discard, res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusAccepted && res.StatusCode != http.StatusOK {
		return fmt.Errorf("notifications/initialized: HTTP %s", res.Status)
	}
	return nil
}

// call sends one tools/call of echo and checks that the answer echoes the
// text: a server that answers something else cannot score.
func (l *httpLoad) call() error {
	l.id++
	id := strconv.FormatInt(l.id, 10)
	text := l.who + "-" + id
	b := &l.body
	b.Reset()
	b.WriteString(`{"jsonrpc":"2.0","id":`)
	b.WriteString(id)
	b.WriteString(`,"method":"tools/call","params":{`)
	if l.modern {
		b.WriteString(modernMeta)
		b.WriteByte(',')
	}
	b.WriteString(`"name":"echo","arguments":{"text":"`)
	b.WriteString(text)
	b.WriteString(`"}}}`)
	res, err := l.post("tools/call", "echo", b.Bytes())
	if err != nil {
		return err
	}
	msg, err := l.answer(res, id)
	if err != nil {
		return err
	}
	var r struct {
		Result struct {
			Content []struct {
				Type string `json:"type"`
				Text string `json:"text"`
			} `json:"content"`
			IsError bool `json:"isError"`
		} `json:"result"`
	}
	if err := json.Unmarshal(msg, &r); err != nil {
		return fmt.Errorf("answer: %v: %s", err, summarize(msg))
	}
	c := r.Result.Content
	if r.Result.IsError || len(c) != 1 || c[0].Type != "text" || c[0].Text != text {
		return fmt.Errorf("wrong answer to %q: %s", text, summarize(msg))
	}
	return nil
}

// answer reads a response, a JSON object or an event stream, and returns
// the JSON-RPC response with the given id; an error response is an error.
func (l *httpLoad) answer(res *http.Response, id string) ([]byte, error) {
	defer res.Body.Close()
	l.resp.Reset()
	if _, err := l.resp.ReadFrom(res.Body); err != nil {
		return nil, err
	}
	body := l.resp.Bytes()
	if res.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("HTTP %s: %s", res.Status, summarize(body))
	}
	var msg []byte
	if strings.HasPrefix(res.Header.Get("Content-Type"), "text/event-stream") {
		msg = sseResponse(body, id)
	} else {
		msg = body
	}
	if msg == nil {
		return nil, fmt.Errorf("no response with id %s in: %s", id, summarize(body))
	}
	var env struct {
		ID    json.RawMessage `json:"id"`
		Error json.RawMessage `json:"error"`
	}
	if err := json.Unmarshal(msg, &env); err != nil {
		return nil, fmt.Errorf("%v: %s", err, summarize(msg))
	}
	if string(env.ID) != id && string(env.ID) != `"`+id+`"` {
		return nil, fmt.Errorf("answer to id %s has id %s", id, env.ID)
	}
	if len(env.Error) > 0 && string(env.Error) != "null" {
		return nil, errReply{summarize(msg)}
	}
	return msg, nil
}

// sseResponse finds, in an event stream, the event whose data is the
// response with the given id (notifications may come first).
func sseResponse(stream []byte, id string) []byte {
	sc := bufio.NewScanner(bytes.NewReader(stream))
	sc.Buffer(nil, 16<<20)
	var data []byte
	for sc.Scan() {
		line := sc.Bytes()
		switch {
		case bytes.HasPrefix(line, []byte("data:")):
			d := bytes.TrimPrefix(bytes.TrimPrefix(line, []byte("data:")), []byte(" "))
			if data != nil {
				data = append(data, '\n')
			}
			data = append(data, d...)
		case len(line) == 0 && data != nil:
			if isResponseTo(data, id) {
				return data
			}
			data = nil
		}
	}
	if data != nil && isResponseTo(data, id) {
		return data
	}
	return nil
}

func isResponseTo(msg []byte, id string) bool {
	var env struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
	}
	return json.Unmarshal(msg, &env) == nil && env.Method == "" && (string(env.ID) == id || string(env.ID) == `"`+id+`"`)
}

// loadResult is one measurement of one target at one concurrency.
type loadResult struct {
	reqs     int
	elapsed  time.Duration
	p50, p99 time.Duration
	cpu      float64 // server CPU seconds over the measurement
}

func (r loadResult) rps() float64       { return float64(r.reqs) / r.elapsed.Seconds() }
func (r loadResult) cpuPerReq() float64 { return r.cpu / float64(r.reqs) }

// drive runs c clients against p for warm, then for dur with the server's
// CPU time measured around it.
func drive(p *serverProc, t httpTarget, c int, warm, dur time.Duration) (loadResult, error) {
	tr := newTransport(c)
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr}
	loads := make([]*httpLoad, c)
	for i := range loads {
		loads[i] = newHTTPLoad(hc, p.url, t.modern, "c"+strconv.Itoa(i))
		if err := loads[i].initialize(); err != nil {
			return loadResult{}, err
		}
	}
	// Warm up: connections open, the server's pools and caches filled.
	if _, _, err := runLoads(loads, warm); err != nil {
		return loadResult{}, err
	}
	cpu0, err := cpuSeconds(p.pid)
	if err != nil {
		return loadResult{}, err
	}
	lat, elapsed, err := runLoads(loads, dur)
	if err != nil {
		return loadResult{}, err
	}
	cpu1, err := cpuSeconds(p.pid)
	if err != nil {
		return loadResult{}, err
	}
	r := loadResult{reqs: len(lat), elapsed: elapsed, cpu: cpu1 - cpu0}
	if len(lat) == 0 {
		return r, errors.New("no request completed")
	}
	slices.Sort(lat)
	r.p50, r.p99 = lat[len(lat)/2], lat[len(lat)*99/100]
	return r, nil
}

// runLoads runs every client's sequential calls until d has passed and
// returns the latencies of all of them.
func runLoads(loads []*httpLoad, d time.Duration) ([]time.Duration, time.Duration, error) {
	type out struct {
		lat []time.Duration
		err error
	}
	outs := make(chan out, len(loads))
	start := time.Now()
	deadline := start.Add(d)
	for _, l := range loads {
		go func() {
			lat := make([]time.Duration, 0, 1024)
			for {
				t := time.Now()
				if !t.Before(deadline) {
					break
				}
				if err := l.call(); err != nil {
					outs <- out{err: err}
					return
				}
				lat = append(lat, time.Since(t))
			}
			outs <- out{lat: lat}
		}()
	}
	var all []time.Duration
	var firstErr error
	for range loads {
		o := <-outs
		if o.err != nil && firstErr == nil {
			firstErr = o.err
		}
		all = append(all, o.lat...)
	}
	return all, time.Since(start), firstErr
}
