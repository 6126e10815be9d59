package acpclient_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/agentwire/agentwire/acp/acpclient"
	"github.com/agentwire/agentwire/internal/wiretest"
)

// rawAgent is an agent made of raw wire lines: the test reads what the
// client wrote, in order, and writes the agent's lines itself.
type rawAgent struct {
	t     *testing.T
	out   *io.PipeWriter // the agent's stdout
	in    *io.PipeReader
	lines chan string // what the client wrote
}

// initResult is a plain agent's initialize result.
const initResult = `{"protocolVersion":1,"agentCapabilities":{"loadSession":true,"promptCapabilities":{"image":true},"sessionCapabilities":{"close":{}}},"authMethods":[{"id":"login","name":"Log in"}],"agentInfo":{"name":"raw","version":"0"}}`

// dialRaw connects a client to a raw agent that answers initialize with
// result.
func dialRaw(t *testing.T, opts *acpclient.Options, result string) (*acpclient.Conn, *rawAgent) {
	t.Helper()
	toAgent, fromClient := io.Pipe()
	toClient, fromAgent := io.Pipe()
	a := &rawAgent{t: t, out: fromAgent, in: toAgent, lines: make(chan string, 1<<16)}
	go func() {
		defer close(a.lines)
		sc := bufio.NewScanner(toAgent)
		sc.Buffer(nil, 1<<24)
		for sc.Scan() {
			a.lines <- sc.Text()
		}
	}()
	if opts == nil {
		opts = &acpclient.Options{}
	}
	if opts.Logger == nil {
		opts.Logger = wiretest.Quiet
	}
	type res struct {
		c   *acpclient.Conn
		err error
	}
	ch := make(chan res, 1)
	go func() {
		c, err := acpclient.New(t.Context(), toClient, fromClient, opts)
		ch <- res{c, err}
	}()
	init := a.expect("initialize")
	a.reply(init, result)
	r := <-ch
	if r.err != nil {
		t.Fatalf("New: %v", r.err)
	}
	t.Cleanup(func() {
		fromAgent.Close()
		r.c.Close()
		toAgent.Close()
	})
	return r.c, a
}

// next returns the client's next line.
func (a *rawAgent) next() string {
	a.t.Helper()
	select {
	case l, ok := <-a.lines:
		if !ok {
			a.t.Fatal("the client closed its output")
		}
		return l
	case <-time.After(10 * time.Second):
		a.t.Fatal("no line from the client within 10 s")
	}
	return ""
}

// expect returns the client's next line, which must have the method.
func (a *rawAgent) expect(method string) string {
	a.t.Helper()
	l := a.next()
	if m := field(l, "method"); m != method {
		a.t.Fatalf("want %s, got %s", method, l)
	}
	return l
}

// send writes one line as the agent.
func (a *rawAgent) send(line string) {
	a.t.Helper()
	if _, err := io.WriteString(a.out, line+"\n"); err != nil {
		a.t.Fatalf("agent write: %v", err)
	}
}

// reply answers the request on line with a result.
func (a *rawAgent) reply(line, result string) {
	a.t.Helper()
	a.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":%s}`, rawField(line, "id"), result))
}

// replyError answers the request on line with an error object.
func (a *rawAgent) replyError(line, errObj string) {
	a.t.Helper()
	a.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"error":%s}`, rawField(line, "id"), errObj))
}

func rawField(line, name string) string {
	var m map[string]json.RawMessage
	if json.Unmarshal([]byte(line), &m) != nil {
		return ""
	}
	return string(m[name])
}

func field(line, name string) string {
	var s string
	if json.Unmarshal([]byte(rawField(line, name)), &s) != nil {
		return strings.Trim(rawField(line, name), `"`)
	}
	return s
}

// param returns a top-level member of a line's params as raw JSON.
func param(line, name string) string {
	var m map[string]json.RawMessage
	json.Unmarshal([]byte(rawField(line, "params")), &m)
	return string(m[name])
}

// openRaw opens a session "s1" on a raw agent.
func openRaw(t *testing.T, c *acpclient.Conn, a *rawAgent, cfg acpclient.SessionConfig) *acpclient.Session {
	t.Helper()
	if cfg.Cwd == "" {
		cfg.Cwd = t.TempDir()
	}
	ch := make(chan *acpclient.Session, 1)
	go func() {
		s, err := c.NewSession(context.Background(), cfg)
		if err != nil {
			t.Errorf("NewSession: %v", err)
		}
		ch <- s
	}()
	a.reply(a.expect("session/new"), `{"sessionId":"s1","modes":{"currentModeId":"ask","availableModes":[{"id":"ask","name":"Ask"},{"id":"code","name":"Code"}]}}`)
	s := <-ch
	if s == nil {
		t.FailNow()
	}
	return s
}
