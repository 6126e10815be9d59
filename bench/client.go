package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"time"
)

// conn is the client side of one connection to a server under test: the
// same allocation-free raw pipe client for every server. Requests are
// pre-encoded lines with the id spliced in; responses are found by their
// lack of "method" (notifications have one) and not decoded.
type conn struct {
	srv   server
	w     io.WriteCloser // the server's input
	br    *bufio.Reader  // the server's output
	stop  func() error   // ends the server and waits for it
	pid   int            // of a subprocess; 0 in-process
	id    int64
	buf   []byte   // the request being built
	line  []byte   // a response that did not fit the reader's buffer
	sids  []string // ACP sessions
	turn  int      // next ACP session to use
	proc  *os.Process
	start time.Time
}

// startInProcess runs the server on a goroutine over OS pipes.
func startInProcess(s server) (*conn, error) {
	c2sR, c2sW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	s2cR, s2cW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	done := make(chan error, 1)
	go func() {
		err := s.serve(c2sR, s2cW)
		s2cW.Close()
		c2sR.Close()
		done <- err
	}()
	c := &conn{srv: s, w: c2sW, br: bufio.NewReaderSize(s2cR, 64<<10)}
	c.stop = func() error {
		c2sW.Close()
		defer s2cR.Close()
		go io.Copy(io.Discard, s2cR) // a server may answer while it drains
		select {
		case err := <-done:
			return err
		case <-time.After(5 * time.Second):
			return fmt.Errorf("%s did not end at EOF", s.name)
		}
	}
	return c, c.handshake()
}

// startSubprocess runs the server in a process of its own (this binary,
// re-executed with -serve).
func startSubprocess(s server) (*conn, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(self, "-serve", s.name)
	stderr := &tailBuffer{max: 8 << 10}
	cmd.Stderr = stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	c := &conn{srv: s, w: in, br: bufio.NewReaderSize(out, 64<<10), pid: cmd.Process.Pid, proc: cmd.Process}
	c.stop = func() error {
		in.Close()
		return awaitExit(cmd, out, s.name, stderr)
	}
	if err := c.handshake(); err != nil {
		c.stop()
		return nil, fmt.Errorf("%w; stderr: %s", err, stderr.String())
	}
	return c, nil
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > t.max {
		t.b = t.b[len(t.b)-t.max:]
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.b)
}

const mcpMeta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"bench","version":"1"},"io.modelcontextprotocol/clientCapabilities":{}}`

// acpSessions is how many sessions the ACP client opens: pipelined
// prompts go to different sessions (ACP allows one prompt per session).
const acpSessions = 16

// handshake does what the protocol needs before the measured requests.
func (c *conn) handshake() error {
	switch {
	case c.srv.work == wMCP && !c.srv.modern:
		if _, err := c.roundTrip(`{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"bench","version":"1"}}}` + "\n"); err != nil {
			return err
		}
		_, err := io.WriteString(c.w, `{"jsonrpc":"2.0","method":"notifications/initialized"}`+"\n")
		return err
	case c.srv.work == wACP:
		if _, err := c.roundTrip(`{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{}}}` + "\n"); err != nil {
			return err
		}
		for i := range acpSessions {
			res, err := c.roundTrip(`{"jsonrpc":"2.0","id":"new` + strconv.Itoa(i) + `","method":"session/new","params":{"cwd":"/","mcpServers":[]}}` + "\n")
			if err != nil {
				return err
			}
			var r struct {
				Result struct {
					SessionID string `json:"sessionId"`
				} `json:"result"`
			}
			if json.Unmarshal(res, &r) != nil || r.Result.SessionID == "" {
				return fmt.Errorf("session/new: %s", res)
			}
			c.sids = append(c.sids, r.Result.SessionID)
		}
	}
	return nil
}

// roundTrip sends one line and returns the response (a copy).
func (c *conn) roundTrip(line string) ([]byte, error) {
	if _, err := io.WriteString(c.w, line); err != nil {
		return nil, err
	}
	res, err := c.readResponse()
	return bytes.Clone(res), err
}

// request builds the next measured request into c.buf.
func (c *conn) request(payload string) []byte {
	c.id++
	b := append(c.buf[:0], `{"jsonrpc":"2.0","id":`...)
	b = strconv.AppendInt(b, c.id, 10)
	switch c.srv.work {
	case wEcho:
		b = append(b, `,"method":"echo","params":{"text":"`...)
		b = append(b, payload...)
		b = append(b, `"}}`...)
	case wMCP:
		b = append(b, `,"method":"tools/call","params":{`...)
		if c.srv.modern {
			b = append(b, mcpMeta...)
			b = append(b, ',')
		}
		b = append(b, `"name":"echo","arguments":{"text":"`...)
		b = append(b, payload...)
		b = append(b, `"}}}`...)
	case wACP:
		b = append(b, `,"method":"session/prompt","params":{"sessionId":"`...)
		b = append(b, c.sids[c.turn]...)
		c.turn = (c.turn + 1) % len(c.sids)
		b = append(b, `","prompt":[{"type":"text","text":"`...)
		b = append(b, payload...)
		b = append(b, `"}]}}`...)
	}
	c.buf = append(b, '\n')
	return c.buf
}

var (
	methodKey = []byte(`"method"`)
	errorKey  = []byte(`"error":{`)
)

// errReply is an error answer where a result was expected: the workload
// is broken for that server, and its figures would be meaningless.
type errReply struct{ line string }

func (e errReply) Error() string { return "error reply: " + e.line }

// readResult is readResponse that fails on an error reply.
func (c *conn) readResult() ([]byte, error) {
	line, err := c.readResponse()
	if err == nil && bytes.Contains(line, errorKey) {
		return nil, errReply{summarize(line)}
	}
	return line, err
}

// readResponse reads lines until one without "method": the response.
// The returned slice is valid until the next read.
func (c *conn) readResponse() ([]byte, error) {
	for {
		line, err := c.readLine()
		if err != nil {
			return nil, err
		}
		if !bytes.Contains(line, methodKey) {
			return line, nil
		}
	}
}

func (c *conn) readLine() ([]byte, error) {
	line, err := c.br.ReadSlice('\n')
	if err == nil {
		return line, nil
	}
	if !errors.Is(err, bufio.ErrBufferFull) {
		return nil, err
	}
	c.line = append(c.line[:0], line...)
	for {
		line, err = c.br.ReadSlice('\n')
		c.line = append(c.line, line...)
		if err == nil {
			return c.line, nil
		}
		if !errors.Is(err, bufio.ErrBufferFull) {
			return nil, err
		}
	}
}

// sequential sends n requests one at a time and returns the time of
// each round trip.
func (c *conn) sequential(n int, lat []time.Duration) ([]time.Duration, error) {
	lat = lat[:0]
	for range n {
		req := c.request("hello")
		t := time.Now()
		if _, err := c.w.Write(req); err != nil {
			return nil, err
		}
		if _, err := c.readResult(); err != nil {
			return nil, err
		}
		lat = append(lat, time.Since(t))
	}
	return lat, nil
}

// pipelined keeps window requests in flight until n are answered. ACP
// prompts go to sessions that are free (one prompt per session at a
// time): the id says which session a reply frees.
func (c *conn) pipelined(n, window int) (time.Duration, error) {
	slots := make(chan int, window)
	for i := range window {
		slots <- i
	}
	werr := make(chan error, 1)
	start := time.Now()
	go func() {
		for range n {
			slot := <-slots
			if _, err := c.w.Write(c.requestOn(slot, window)); err != nil {
				werr <- err
				return
			}
		}
		werr <- nil
	}()
	for range n {
		line, err := c.readResult()
		if err != nil {
			return 0, err
		}
		slots <- slotOf(line, window)
	}
	d := time.Since(start)
	return d, <-werr
}

// requestOn builds the next request for a pipeline slot: its id is a
// multiple of window plus the slot, and an ACP prompt goes to the slot's
// session.
func (c *conn) requestOn(slot, window int) []byte {
	c.id = (c.id/int64(window)+1)*int64(window) + int64(slot)
	c.id--
	if c.srv.work == wACP {
		c.turn = slot % len(c.sids)
	}
	return c.request("hello")
}

var idKey = []byte(`"id":`)

// slotOf reads the slot back from a reply's numeric id.
func slotOf(line []byte, window int) int {
	i := bytes.Index(line, idKey)
	if i < 0 {
		return 0
	}
	j := i + len(idKey)
	for j < len(line) && line[j] == ' ' {
		j++
	}
	k := j
	for k < len(line) && line[k] >= '0' && line[k] <= '9' {
		k++
	}
	id, err := strconv.ParseInt(string(line[j:k]), 10, 64)
	if err != nil {
		return 0
	}
	return int(id % int64(window))
}

// awaitExit waits for a served subprocess whose stdin was closed to exit,
// draining its stdout meanwhile; one that is still running after 5 s is
// killed, and either failure names its stderr.
func awaitExit(cmd *exec.Cmd, out io.Reader, name string, stderr fmt.Stringer) error {
	go io.Copy(io.Discard, out)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			return fmt.Errorf("%s exited with %v; stderr: %s", name, err, stderr.String())
		}
		return nil
	case <-time.After(5 * time.Second):
		cmd.Process.Kill()
		<-done
		return fmt.Errorf("%s did not exit at EOF; stderr: %s", name, stderr.String())
	}
}
