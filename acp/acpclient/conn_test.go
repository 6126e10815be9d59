package acpclient_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/agentwire/agentwire/acp"
	"github.com/agentwire/agentwire/acp/acpclient"
	"github.com/agentwire/agentwire/internal/wiretest"
)

// chunkAgent is an agent whose prompt "n N" streams N numbered chunks and
// "slow N" N chunks 20 ms apart (stopping when cancelled).
func chunkAgent() *acp.Agent {
	return &acp.Agent{
		Info:  acp.Implementation{Name: "chunks", Version: "1"},
		Modes: []acp.SessionMode{{ID: "ask", Name: "Ask"}, {ID: "code", Name: "Code"}},
		Prompt: func(ctx context.Context, t *acp.Turn) (acp.StopReason, error) {
			text := t.Prompt[0].Text
			if n, ok := strings.CutPrefix(text, "n "); ok {
				steps, _ := strconv.Atoi(n)
				for i := 1; i <= steps; i++ {
					if err := t.MessageChunk(strconv.Itoa(i)); err != nil {
						return "", err
					}
				}
				return acp.EndTurn, nil
			}
			if n, ok := strings.CutPrefix(text, "slow "); ok {
				steps, _ := strconv.Atoi(n)
				for i := 1; i <= steps; i++ {
					select {
					case <-ctx.Done():
						return acp.Cancelled, nil
					case <-time.After(20 * time.Millisecond):
					}
					t.MessageChunk(strconv.Itoa(i))
				}
				return acp.EndTurn, nil
			}
			return acp.EndTurn, t.MessageChunk(text)
		},
	}
}

func pipe(t *testing.T, agent *acp.Agent, opts *acpclient.Options) *acpclient.Conn {
	t.Helper()
	if opts == nil {
		opts = &acpclient.Options{}
	}
	if opts.Logger == nil {
		opts.Logger = wiretest.Quiet
	}
	c, err := acpclient.Pipe(agent, &acp.Options{Logger: wiretest.Quiet}, opts)
	if err != nil {
		t.Fatalf("Pipe: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// collector keeps the text of every chunk per session.
type collector struct {
	mu     sync.Mutex
	chunks map[string][]string
	delay  func()
}

func (k *collector) HandleUpdate(ctx context.Context, u *acpclient.Update) error {
	if k.delay != nil {
		k.delay()
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.chunks == nil {
		k.chunks = map[string][]string{}
	}
	if u.Kind == acp.UpdateAgentMessageChunk {
		k.chunks[u.SessionID] = append(k.chunks[u.SessionID], u.Text())
	}
	return nil
}

func (k *collector) of(id string) []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return append([]string(nil), k.chunks[id]...)
}

// onFirstUpdate is an update handler that closes its channel when the
// first update arrives: a test that acts during a prompt waits for it
// instead of sleeping, which a loaded machine can outlast before the
// prompt has even reached the agent.
func onFirstUpdate() (*collector, <-chan struct{}) {
	started := make(chan struct{})
	var once sync.Once
	return &collector{delay: func() { once.Do(func() { close(started) }) }}, started
}

func numbered(n int) string {
	var b strings.Builder
	for i := 1; i <= n; i++ {
		b.WriteString(strconv.Itoa(i))
		b.WriteByte(' ')
	}
	return b.String()
}

func TestPromptReturnsAfterEveryUpdateItsTurnSent(t *testing.T) {
	k := &collector{}
	c := pipe(t, chunkAgent(), &acpclient.Options{Updates: k})
	s, err := c.NewSession(t.Context(), acpclient.SessionConfig{Cwd: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	reason, err := s.Prompt(t.Context(), acp.TextBlock("n 300"))
	if err != nil || reason != acp.EndTurn {
		t.Fatalf("Prompt = %q, %v", reason, err)
	}
	if got := strings.Join(k.of(s.ID()), " ") + " "; got != numbered(300) {
		t.Fatalf("when Prompt returned the handler had seen %d chunks: %.80s…", len(k.of(s.ID())), got)
	}
}

func TestUpdatesOfManySessionsAreDeliveredInReceiveOrderEvenWithASlowHandler(t *testing.T) {
	k := &collector{delay: func() {
		if d := rand.IntN(300); d > 150 {
			time.Sleep(time.Duration(d) * time.Microsecond) // a handler slower than the inline budget
		}
	}}
	c := pipe(t, chunkAgent(), &acpclient.Options{Updates: k})
	const sessions, chunks = 4, 500
	var wg sync.WaitGroup
	ids := make([]string, sessions)
	for i := range sessions {
		s, err := c.NewSession(t.Context(), acpclient.SessionConfig{Cwd: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		ids[i] = s.ID()
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := s.Prompt(t.Context(), acp.TextBlock(fmt.Sprintf("n %d", chunks))); err != nil {
				t.Error(err)
			}
			if got := strings.Join(k.of(s.ID()), " ") + " "; got != numbered(chunks) {
				t.Errorf("session %s: chunks out of order or missing when Prompt returned", s.ID())
			}
		}()
	}
	wg.Wait()
	if st := c.Stats(); st.Updates < sessions*chunks {
		t.Fatalf("Stats.Updates = %d, want ≥ %d", st.Updates, sessions*chunks)
	}
}

// Regression (a flake under load): the second prompt was sent in a loop
// from the moment the first was started, and could reach the agent first,
// which then refused the first one, so that no second prompt ever saw the
// session busy. It is now sent once the first prompt's first chunk has
// arrived, while the first runs for seconds more.
func TestASecondPromptOnABusySessionIsABusyErrorNotAuthentication(t *testing.T) {
	k, started := onFirstUpdate()
	c := pipe(t, chunkAgent(), &acpclient.Options{Updates: k})
	s, err := c.NewSession(t.Context(), acpclient.SessionConfig{Cwd: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	first := make(chan error, 1)
	go func() {
		_, err := s.Prompt(t.Context(), acp.TextBlock("slow 500"))
		first <- err
	}()
	select {
	case <-started: // the first prompt is admitted and running
	case err := <-first:
		t.Fatalf("the first prompt ended before its first chunk: %v", err)
	}
	_, err = s.Prompt(t.Context(), acp.TextBlock("again"))
	var busy *acpclient.BusyError
	if !errors.As(err, &busy) || busy.Reason != "prompt_in_progress" || errors.Is(err, acpclient.ErrAuthRequired) {
		t.Fatalf("second prompt: %v", err)
	}
	s.Cancel(t.Context())
	if err := <-first; err != nil {
		t.Fatal(err)
	}
}

func TestCancellingAPromptsContextAnswersCancelled(t *testing.T) {
	k, started := onFirstUpdate()
	c := pipe(t, chunkAgent(), &acpclient.Options{Updates: k})
	s, err := c.NewSession(t.Context(), acpclient.SessionConfig{Cwd: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	go func() {
		select {
		case <-started:
		case <-ctx.Done():
		}
		cancel()
	}()
	reason, err := s.Prompt(ctx, acp.TextBlock("slow 500"))
	if err != nil || reason != acp.Cancelled {
		t.Fatalf("Prompt = %q, %v; want cancelled, nil", reason, err)
	}
}

func TestCancelPutsSessionCancelOnTheWireBeforeThePendingPermissionsCancelledAnswer(t *testing.T) {
	// A human who does not answer: the spec's "cancelled" must not wait.
	asked := make(chan struct{})
	ignoring := make(chan struct{})
	defer close(ignoring)
	c, a := dialRaw(t, &acpclient.Options{Permissions: acpclient.PermissionFunc(func(ctx context.Context, _ *acpclient.Session, _ *acpclient.PermissionRequest) (acpclient.PermissionOutcome, error) {
		close(asked)
		select {
		case <-ignoring:
		case <-time.After(time.Minute):
		}
		return acpclient.Selected("allow"), nil
	})}, initResult)
	s := openRaw(t, c, a, acpclient.SessionConfig{})
	done := make(chan acp.StopReason, 1)
	go func() {
		r, _ := s.Prompt(context.Background(), acp.TextBlock("hi"))
		done <- r
	}()
	prompt := a.expect("session/prompt")
	a.send(`{"jsonrpc":"2.0","id":"p1","method":"session/request_permission","params":{"sessionId":"s1","toolCall":{"toolCallId":"t1","title":"Edit"},"options":[{"optionId":"allow","name":"Allow","kind":"allow_once"},{"optionId":"no","name":"No","kind":"reject_once"}]}}`)
	<-asked
	if err := s.Cancel(t.Context()); err != nil {
		t.Fatal(err)
	}
	if l := a.next(); field(l, "method") != "session/cancel" || rawField(l, "id") != "" {
		t.Fatalf("first after Cancel: %s; want the session/cancel notification", l)
	}
	if l := a.next(); rawField(l, "id") != `"p1"` || !strings.Contains(l, `{"outcome":{"outcome":"cancelled"}}`) {
		t.Fatalf("then: %s; want the permission answered cancelled", l)
	}
	// A question asked after the cancel is answered at once.
	a.send(`{"jsonrpc":"2.0","id":"p2","method":"session/request_permission","params":{"sessionId":"s1","toolCall":{"toolCallId":"t2"},"options":[{"optionId":"allow","name":"Allow","kind":"allow_once"}]}}`)
	if l := a.next(); rawField(l, "id") != `"p2"` || !strings.Contains(l, `"cancelled"`) {
		t.Fatalf("a later question: %s", l)
	}
	a.reply(prompt, `{"stopReason":"cancelled"}`)
	if r := <-done; r != acp.Cancelled {
		t.Fatalf("Prompt = %q", r)
	}
	if st := c.Stats(); st.Permissions.Cancelled != 2 || st.Permissions.Asked != 2 {
		t.Fatalf("permission stats %+v", st.Permissions)
	}
}

func TestTheDefaultPolicyRefusesWithTheRejectOption(t *testing.T) {
	c, a := dialRaw(t, nil, initResult)
	openRaw(t, c, a, acpclient.SessionConfig{})
	a.send(`{"jsonrpc":"2.0","id":7,"method":"session/request_permission","params":{"sessionId":"s1","toolCall":{"toolCallId":"t1"},"options":[{"optionId":"a","name":"Allow","kind":"allow_once"},{"optionId":"r","name":"Reject","kind":"reject_once"}]}}`)
	if l := a.next(); !strings.Contains(l, `{"outcome":{"outcome":"selected","optionId":"r"}}`) {
		t.Fatalf("got %s", l)
	}
	// An unknown session is -32002 and asks nobody.
	a.send(`{"jsonrpc":"2.0","id":8,"method":"session/request_permission","params":{"sessionId":"nope","toolCall":{},"options":[]}}`)
	if l := a.next(); wiretest.ErrCode(t, l) != -32002 {
		t.Fatalf("got %s", l)
	}
}

func TestAPolicyThatChoosesAnUnofferedOptionIsAnsweredWithARefusalNotCancelled(t *testing.T) {
	c, a := dialRaw(t, &acpclient.Options{Permissions: acpclient.PermissionFunc(func(context.Context, *acpclient.Session, *acpclient.PermissionRequest) (acpclient.PermissionOutcome, error) {
		return acpclient.Selected("made-up"), nil
	})}, initResult)
	openRaw(t, c, a, acpclient.SessionConfig{})
	a.send(`{"jsonrpc":"2.0","id":7,"method":"session/request_permission","params":{"sessionId":"s1","toolCall":{"toolCallId":"t1"},"options":[{"optionId":"r","name":"Reject","kind":"reject_always"}]}}`)
	if l := a.next(); !strings.Contains(l, `"optionId":"r"`) {
		t.Fatalf("got %s", l)
	}
	if c.Stats().Permissions.PolicyErrors != 1 {
		t.Fatal("the policy error was not counted")
	}
}

func TestMethodsTheClientDidNotDeclareGetMethodNotFound(t *testing.T) {
	c, a := dialRaw(t, &acpclient.Options{FS: acpclient.NoFiles}, initResult)
	openRaw(t, c, a, acpclient.SessionConfig{})
	for i, m := range []string{"fs/read_text_file", "fs/write_text_file", "terminal/create", "elicitation/create", "mcp/connect", "_vendor/thing"} {
		a.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":%q,"params":{"sessionId":"s1","path":"/etc/passwd","command":"true","serverId":"x"}}`, i, m))
		if l := a.next(); wiretest.ErrCode(t, l) != -32601 {
			t.Fatalf("%s: %s", m, l)
		}
	}
	if c.Stats().Refused != 6 {
		t.Fatalf("Refused = %d", c.Stats().Refused)
	}
}

func TestInitializeDeclaresExactlyWhatTheClientServes(t *testing.T) {
	for name, tc := range map[string]struct {
		opts *acpclient.Options
		want string
	}{
		"defaults":  {&acpclient.Options{}, `{"fs":{"readTextFile":true,"writeTextFile":true},"terminal":false,"auth":{}}`},
		"read-only": {&acpclient.Options{FS: acpclient.RootedFS{ReadOnly: true}}, `{"fs":{"readTextFile":true,"writeTextFile":false},"terminal":false,"auth":{}}`},
		"nothing":   {&acpclient.Options{FS: acpclient.NoFiles}, `{"fs":{"readTextFile":false,"writeTextFile":false},"terminal":false,"auth":{}}`},
		"all":       {&acpclient.Options{Terminals: &acpclient.TerminalOptions{}, TerminalAuth: true}, `{"fs":{"readTextFile":true,"writeTextFile":true},"terminal":true,"auth":{"terminal":true}}`},
	} {
		t.Run(name, func(t *testing.T) {
			var seen string
			opts := *tc.opts
			c := pipe(t, &acp.Agent{Prompt: func(context.Context, *acp.Turn) (acp.StopReason, error) { return acp.EndTurn, nil }}, &opts)
			b, _ := json.Marshal(c.ClientCapabilities())
			seen = string(b)
			if seen != tc.want {
				t.Fatalf("declared %s, want %s", seen, tc.want)
			}
		})
	}
}

func TestAuthenticationRequiredIsSurfacedWithWhatTheAgentOffers(t *testing.T) {
	c, a := dialRaw(t, nil, `{"protocolVersion":1,"agentCapabilities":{},"authMethods":[{"id":"login","name":"Log in"},{"id":"key","name":"API key","type":"env_var","vars":[{"name":"KEY"}]},{"id":"tui","name":"Terminal","type":"terminal","args":["--login"]}],"agentInfo":{"name":"raw","version":"0"}}`)
	errc := make(chan error, 1)
	go func() {
		_, err := c.NewSession(context.Background(), acpclient.SessionConfig{Cwd: t.TempDir()})
		errc <- err
	}()
	a.replyError(a.expect("session/new"), `{"code":-32000,"message":"Authentication required"}`)
	err := <-errc
	var ae *acpclient.AuthRequiredError
	if !errors.As(err, &ae) || !errors.Is(err, acpclient.ErrAuthRequired) || len(ae.Methods) != 3 {
		t.Fatalf("NewSession: %v", err)
	}
	if ae.Methods[1].Type != "env_var" || !strings.Contains(string(ae.Methods[1].Raw), `"vars"`) || ae.Methods[2].Args[0] != "--login" {
		t.Fatalf("methods lost what the agent said: %+v", ae.Methods)
	}
	// A terminal method is never passed to authenticate.
	if err := c.Authenticate(t.Context(), "tui"); err == nil {
		t.Fatal("Authenticate passed a terminal method to the agent")
	}
	go func() { errc <- c.Authenticate(context.Background(), "login") }()
	l := a.expect("authenticate")
	if param(l, "methodId") != `"login"` {
		t.Fatalf("authenticate params: %s", l)
	}
	a.reply(l, `{}`)
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
}

func TestUpdatesSentBeforeTheSessionNewResultReachTheHandlerBeforeNewSessionReturns(t *testing.T) {
	k := &collector{}
	c, a := dialRaw(t, &acpclient.Options{Updates: k}, initResult)
	ch := make(chan *acpclient.Session, 1)
	go func() {
		s, err := c.NewSession(context.Background(), acpclient.SessionConfig{Cwd: t.TempDir()})
		if err != nil {
			t.Error(err)
		}
		ch <- s
	}()
	l := a.expect("session/new")
	a.send(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"early","update":{"sessionUpdate":"available_commands_update","availableCommands":[{"name":"web","description":"search"}]}}}`)
	a.send(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"early","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"welcome"}}}}`)
	a.reply(l, `{"sessionId":"early"}`)
	s := <-ch
	if s == nil {
		t.FailNow()
	}
	if got := k.of("early"); len(got) != 1 || got[0] != "welcome" {
		t.Fatalf("handler saw %q when NewSession returned", got)
	}
	if cmds := s.Commands(); len(cmds) != 1 || cmds[0].Name != "web" {
		t.Fatalf("commands %+v", cmds)
	}
	if st := c.Stats(); st.ParkedUpdates != 2 || st.OrphanUpdates != 0 {
		t.Fatalf("stats %+v", st)
	}
}

func TestAnUpdateForAnUnknownSessionGoesToTheConnectionHandlerWithNoSession(t *testing.T) {
	got := make(chan *acpclient.Session, 1)
	c, a := dialRaw(t, &acpclient.Options{Updates: acpclient.UpdateFunc(func(_ context.Context, u *acpclient.Update) error {
		got <- u.Session
		return nil
	})}, initResult)
	a.send(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"ghost","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"boo"}}}}`)
	if s := <-got; s != nil {
		t.Fatalf("Session = %v", s)
	}
	if c.Stats().OrphanUpdates != 1 {
		t.Fatal("not counted")
	}
}

func TestASlowHandlerPausesTheAgentInsteadOfBufferingItsFlood(t *testing.T) {
	release := make(chan struct{})
	var n atomic.Int64
	var order atomic.Bool
	order.Store(true)
	k := acpclient.UpdateFunc(func(_ context.Context, u *acpclient.Update) error {
		if n.Load() == 0 {
			<-release
		}
		if u.Text() != strconv.FormatInt(n.Add(1), 10) {
			order.Store(false)
		}
		return nil
	})
	const flood = 50000
	c := pipe(t, chunkAgent(), &acpclient.Options{Updates: k, MaxQueuedUpdates: 64})
	s, err := c.NewSession(t.Context(), acpclient.SessionConfig{Cwd: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := s.Prompt(context.Background(), acp.TextBlock(fmt.Sprintf("n %d", flood)))
		done <- err
	}()
	time.Sleep(300 * time.Millisecond) // let the agent run into the pause
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	if ms.HeapAlloc > 64<<20 {
		t.Fatalf("heap %d MiB while the handler was blocked", ms.HeapAlloc>>20)
	}
	select {
	case <-done:
		t.Fatal("the prompt finished while its updates could not be handled")
	default:
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if n.Load() != flood || !order.Load() {
		t.Fatalf("handled %d of %d, in order: %v", n.Load(), flood, order.Load())
	}
}

func TestSetModeDuringAPromptIsAnsweredAtOnce(t *testing.T) {
	k, started := onFirstUpdate()
	c := pipe(t, chunkAgent(), &acpclient.Options{Updates: k})
	s, err := c.NewSession(t.Context(), acpclient.SessionConfig{Cwd: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.Prompt(context.Background(), acp.TextBlock("slow 500"))
	}()
	select {
	case <-started:
	case <-done:
		t.Fatal("the prompt ended before its first chunk")
	}
	if err := s.SetMode(t.Context(), "code"); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
		t.Fatal("SetMode waited for the prompt")
	default:
	}
	if s.Mode() != "code" {
		t.Fatalf("mode %q", s.Mode())
	}
	s.Cancel(t.Context())
	<-done
}

func TestCloseDuringAPromptIsAnsweredCancelledBeforeTheAgentStops(t *testing.T) {
	k, started := onFirstUpdate()
	c := pipe(t, chunkAgent(), &acpclient.Options{Updates: k})
	s, err := c.NewSession(t.Context(), acpclient.SessionConfig{Cwd: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	res := make(chan acp.StopReason, 1)
	go func() {
		r, _ := s.Prompt(context.Background(), acp.TextBlock("slow 500"))
		res <- r
	}()
	select {
	case <-started:
	case r := <-res:
		t.Fatalf("the prompt ended before its first chunk: %q", r)
	}
	c.Close()
	if r := <-res; r != acp.Cancelled {
		t.Fatalf("Prompt = %q; want cancelled (the agent cancels at end of input)", r)
	}
	if _, err := c.NewSession(t.Context(), acpclient.SessionConfig{Cwd: t.TempDir()}); !errors.Is(err, acpclient.ErrClosed) {
		t.Fatalf("after Close: %v", err)
	}
}

func TestCallsTheAgentDidNotAdvertiseFailLocally(t *testing.T) {
	c, a := dialRaw(t, nil, `{"protocolVersion":1,"agentCapabilities":{},"authMethods":[],"agentInfo":{"name":"raw","version":"0"}}`)
	if _, err := c.ResumeSession(t.Context(), "x", acpclient.SessionConfig{Cwd: t.TempDir()}); !errors.Is(err, acpclient.ErrNotSupported) {
		t.Fatalf("ResumeSession: %v", err)
	}
	if _, err := c.ListSessions(t.Context(), "", ""); !errors.Is(err, acpclient.ErrNotSupported) {
		t.Fatalf("ListSessions: %v", err)
	}
	s := openRaw(t, c, a, acpclient.SessionConfig{})
	if _, err := s.Prompt(t.Context(), acp.ImageBlock("image/png", "AAAA", "")); !errors.Is(err, acpclient.ErrNotSupported) {
		t.Fatalf("image prompt: %v", err)
	}
	if _, err := c.NewSession(t.Context(), acpclient.SessionConfig{Cwd: t.TempDir(), MCPServers: []acp.MCPServer{{Type: "http", Name: "x", URL: "http://x"}}}); !errors.Is(err, acpclient.ErrNotSupported) {
		t.Fatalf("http MCP server: %v", err)
	}
	// Nothing of that reached the wire.
	go s.Close(context.Background())
	select {
	case l := <-a.lines:
		t.Fatalf("sent %s", l)
	case <-time.After(100 * time.Millisecond):
	}
}

func TestLoadSessionDeliversTheWholeReplayBeforeItReturns(t *testing.T) {
	k := &collector{}
	c, a := dialRaw(t, &acpclient.Options{Updates: k}, initResult)
	ch := make(chan error, 1)
	go func() {
		_, err := c.LoadSession(context.Background(), "old", acpclient.SessionConfig{Cwd: t.TempDir()})
		ch <- err
	}()
	l := a.expect("session/load")
	if param(l, "sessionId") != `"old"` || param(l, "mcpServers") != `[]` {
		t.Fatalf("params %s", l)
	}
	for i := 1; i <= 1000; i++ {
		a.send(fmt.Sprintf(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"old","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"%d"}}}}`, i))
	}
	a.reply(l, `{}`)
	if err := <-ch; err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(k.of("old"), " ") + " "; got != numbered(1000) {
		t.Fatalf("replay incomplete when LoadSession returned: %d", len(k.of("old")))
	}
}

func TestAnAgentThatIgnoresCancelIsAbandonedAfterTheCancelGrace(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, a := dialRaw(t, &acpclient.Options{CancelGrace: 2 * time.Second}, initResult)
		s := openRaw(t, c, a, acpclient.SessionConfig{})
		ctx, cancel := context.WithCancelCause(context.Background())
		res := make(chan error, 1)
		go func() {
			_, err := s.Prompt(ctx, acp.TextBlock("hi"))
			res <- err
		}()
		prompt := a.expect("session/prompt")
		stop := errors.New("user gave up")
		start := time.Now()
		cancel(stop)
		a.expect("session/cancel")
		l := a.expect("$/cancel_request")
		if waited := time.Since(start); waited != 2*time.Second {
			t.Fatalf("abandoned after %v; want the 2 s grace", waited)
		}
		if param(l, "requestId") != rawField(prompt, "id") {
			t.Fatalf("cancel_request %s for %s", l, prompt)
		}
		if err := <-res; !errors.Is(err, stop) {
			t.Fatalf("Prompt: %v; want the context's cause", err)
		}
		a.reply(prompt, `{"stopReason":"cancelled"}`) // late: counted, not delivered
		synctest.Wait()
		if n := c.Stats().Transport.LateResponses; n != 1 {
			t.Fatalf("late responses %d", n)
		}
	})
}

func TestAVersionTheClientDoesNotSpeakIsRefused(t *testing.T) {
	toAgent, fromClient := io.Pipe()
	toClient, fromAgent := io.Pipe()
	defer fromAgent.Close()
	defer toAgent.Close()
	go func() {
		buf := make([]byte, 4096)
		n, _ := toAgent.Read(buf)
		id := rawField(strings.TrimSpace(string(buf[:n])), "id")
		fmt.Fprintf(fromAgent, `{"jsonrpc":"2.0","id":%s,"result":{"protocolVersion":2,"agentCapabilities":{}}}`+"\n", id)
		for {
			if _, err := toAgent.Read(buf); err != nil {
				return
			}
		}
	}()
	_, err := acpclient.New(t.Context(), toClient, fromClient, &acpclient.Options{Logger: wiretest.Quiet})
	var ve *acpclient.VersionError
	if !errors.As(err, &ve) || ve.Agent != 2 {
		t.Fatalf("New: %v", err)
	}
}

func TestTheAgentsBackgroundLimitReachesTheCallerAsABusyErrorWithItsLimit(t *testing.T) {
	c := pipe(t, chunkAgent(), nil)
	const n = acp.DefaultMaxBackground + 1
	sessions := make([]*acpclient.Session, n)
	for i := range sessions {
		s, err := c.NewSession(t.Context(), acpclient.SessionConfig{Cwd: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		sessions[i] = s
	}
	errs := make(chan error, n)
	for _, s := range sessions {
		go func() {
			_, err := s.Prompt(t.Context(), acp.TextBlock("slow 50"))
			errs <- err
		}()
	}
	var busy []*acpclient.BusyError
	for range n {
		err := <-errs
		var b *acpclient.BusyError
		if errors.As(err, &b) {
			busy = append(busy, b)
			// The refusal comes at once; end the others.
			for _, s := range sessions {
				s.Cancel(t.Context())
			}
		} else if err != nil {
			t.Errorf("prompt: %v", err)
		}
	}
	if len(busy) != 1 || busy[0].Reason != "connection_busy" || busy[0].Limit != acp.DefaultMaxBackground {
		t.Fatalf("busy refusals: %+v", busy)
	}
}

func TestAPromptWhoseContextHasEndedSendsNothing(t *testing.T) {
	c, a := dialRaw(t, nil, initResult)
	s := openRaw(t, c, a, acpclient.SessionConfig{})
	ctx, cancel := context.WithCancelCause(t.Context())
	gone := errors.New("the user left")
	cancel(gone)
	if _, err := s.Prompt(ctx, acp.TextBlock("hi")); !errors.Is(err, gone) {
		t.Fatalf("Prompt = %v", err)
	}
	select {
	case l := <-a.lines:
		t.Fatalf("sent %s", l)
	case <-time.After(100 * time.Millisecond):
	}
}

func TestPermissionQuestionsBeyondTheBoundAreRefusedWithoutAsking(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	var asked atomic.Int64
	var during atomic.Bool
	c, a := dialRaw(t, &acpclient.Options{MaxPendingPermissions: 2, Permissions: acpclient.PermissionFunc(func(ctx context.Context, _ *acpclient.Session, r *acpclient.PermissionRequest) (acpclient.PermissionOutcome, error) {
		asked.Add(1)
		during.Store(r.DuringPrompt)
		<-release // a policy that ignores its ctx
		return acpclient.Selected("y"), nil
	})}, initResult)
	openRaw(t, c, a, acpclient.SessionConfig{})
	for i := 1; i <= 2; i++ {
		a.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"session/request_permission","params":{"sessionId":"s1","toolCall":{"toolCallId":"t"},"options":[{"optionId":"y","name":"Yes","kind":"allow_once"},{"optionId":"n","name":"No","kind":"reject_once"}]}}`, i))
		// Withdrawn at once: the policy's goroutine stays, holding its slot.
		a.send(fmt.Sprintf(`{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":%d}}`, i))
		if l := a.next(); wiretest.ErrCode(t, l) != -32800 {
			t.Fatalf("withdrawn question %d: %s", i, l)
		}
	}
	a.send(`{"jsonrpc":"2.0","id":3,"method":"session/request_permission","params":{"sessionId":"s1","toolCall":{"toolCallId":"t"},"options":[{"optionId":"y","name":"Yes","kind":"allow_once"},{"optionId":"n","name":"No","kind":"reject_once"}]}}`)
	if l := a.next(); !strings.Contains(l, `"optionId":"n"`) {
		t.Fatalf("the question past the bound: %s", l)
	}
	if st := c.Stats().Permissions; st.Overflow != 1 || asked.Load() != 2 {
		t.Fatalf("stats %+v, policy asked %d times", st, asked.Load())
	}
	if during.Load() {
		t.Fatal("DuringPrompt for a question asked with no prompt in flight")
	}
}

func TestATerminalDoesNotOutliveItsSessionOrTheConnection(t *testing.T) {
	for _, end := range []string{"session", "connection"} {
		t.Run(end, func(t *testing.T) {
			c, a := dialRaw(t, &acpclient.Options{Terminals: &acpclient.TerminalOptions{KillGrace: 300 * time.Millisecond}}, initResult)
			s := openRaw(t, c, a, acpclient.SessionConfig{})
			a.send(`{"jsonrpc":"2.0","id":"t1","method":"terminal/create","params":{"sessionId":"s1","command":"sh","args":["-c","trap '' TERM; echo ready; sleep 600"]}}`)
			l := a.next()
			var res struct {
				TerminalID string `json:"terminalId"`
			}
			if err := json.Unmarshal([]byte(rawField(l, "result")), &res); err != nil || res.TerminalID == "" {
				t.Fatalf("terminal/create: %s", l)
			}
			term, ok := c.Terminal(res.TerminalID)
			if !ok {
				t.Fatal("the connection does not know its terminal")
			}
			// "ready" comes after the trap: SIGTERM is then ignored for sure.
			for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
				if out, _ := term.Output(); strings.Contains(out, "ready") {
					break
				}
				if time.Now().After(deadline) {
					t.Fatal("the command never started")
				}
			}
			if end == "session" {
				go func() { a.reply(a.expect("session/close"), `{}`) }()
				if err := s.Close(t.Context()); err != nil {
					t.Fatal(err)
				}
			} else {
				c.Close()
			}
			select {
			case <-term.Done():
			default:
				t.Fatalf("the terminal still runs after the %s closed", end)
			}
			if st, exited := term.Exited(); !exited || st.Signal != "SIGKILL" {
				t.Fatalf("exit %+v %v; want killed (it ignores SIGTERM)", st, exited)
			}
		})
	}
}
