package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/agentwire/agentwire/acp"
	"github.com/agentwire/agentwire/acp/acpclient"
)

// acpRenderer is `agentwire acp`'s UpdateHandler: the agent's reply (its
// agent_message_chunk text) goes to stdout as it arrives, everything else
// (thoughts, tool calls, plans, mode changes) to stderr. It runs on the
// connection's reading goroutine, so it only formats and writes.
type acpRenderer struct {
	stdout, stderr io.Writer
	json           bool // --json: the updates as JSON lines on stdout
	quiet          bool // --quiet: nothing on stderr but errors
	thoughts       bool // --thoughts
	color          bool // dim thoughts, on a terminal without NO_COLOR
	// sep: stdout and stderr are one terminal, so a stderr line after an
	// unterminated chunk needs a newline on stdout first.
	sep bool
	// ttyOut: stdout is a terminal, so the reply is escaped as stderr is
	// (with --prompt into a pipe it stays byte for byte).
	ttyOut bool

	mu      sync.Mutex
	midLine bool // stdout's last chunk did not end in a newline
	n       map[string]int64
	tools   map[string]*toolState
	terms   func(id string) (*acpclient.Terminal, bool)
}

type toolState struct {
	title, kind, status string
	// terminals are those of its content, kept from the first sight: the
	// connection forgets a terminal once the agent releases it.
	terminals map[string]*acpclient.Terminal
}

// terminalLines is how much of a finished terminal's output is shown.
const terminalLines = 10

func newACPRenderer(stdout, stderr io.Writer, asJSON, quiet, thoughts bool) *acpRenderer {
	tty := isTerminal(os.Stderr) && stderr == io.Writer(os.Stderr)
	return &acpRenderer{stdout: stdout, stderr: stderr, json: asJSON, quiet: quiet, thoughts: thoughts,
		color: tty && os.Getenv("NO_COLOR") == "", sep: tty && isTerminal(os.Stdout) && stdout == io.Writer(os.Stdout),
		ttyOut: isTerminal(os.Stdout) && stdout == io.Writer(os.Stdout),
		n:      map[string]int64{}, tools: map[string]*toolState{}}
}

// termSafe escapes what a terminal would act on in text the agent chose:
// C0 controls (but newline and tab, when kept), DEL and C1 controls become
// \xNN, so that a tool title or a file's content cannot hide, rewrite or
// recolour what the user is asked (ESC and CSI sequences, a carriage
// return over the line) or write the clipboard (OSC 52). With keepLines
// false, newlines and tabs become spaces: a question's parts stay on
// their line.
func termSafe(s string, keepLines bool) string {
	clean := true
	for _, r := range s {
		if unsafeRune(r, keepLines) {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		switch {
		case !unsafeRune(r, keepLines):
			b.WriteRune(r)
		case r == '\n' || r == '\t' || r == '\r':
			b.WriteByte(' ')
		default:
			fmt.Fprintf(&b, "\\x%02x", r)
		}
	}
	return b.String()
}

func unsafeRune(r rune, keepLines bool) bool {
	switch {
	case r == '\n' || r == '\t':
		return !keepLines
	case r < 0x20, r == 0x7f, r >= 0x80 && r < 0xa0:
		return true
	}
	return false
}

func (r *acpRenderer) counts() map[string]int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	m := make(map[string]int64, len(r.n))
	for k, v := range r.n {
		m[k] = v
	}
	return m
}

// HandleUpdate renders one update.
func (r *acpRenderer) HandleUpdate(_ context.Context, u *acpclient.Update) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.n[u.Kind]++
	if r.json {
		b, _ := json.Marshal(struct {
			SessionID string          `json:"sessionId"`
			Update    json.RawMessage `json:"update"`
		}{u.SessionID, u.Raw})
		fmt.Fprintf(r.stdout, "%s\n", b)
		return nil
	}
	switch u.Kind {
	case acp.UpdateAgentMessageChunk:
		if t := u.Text(); t != "" {
			if r.ttyOut {
				t = termSafe(t, true)
			}
			io.WriteString(r.stdout, t)
			r.midLine = !strings.HasSuffix(t, "\n")
		} else if v, err := u.Decode(); err == nil {
			r.lineLocked("[%s content]", v.(*acp.ContentChunk).Content.Type)
		}
		return nil
	}
	if r.quiet {
		return nil
	}
	v, err := u.Decode()
	if err != nil {
		r.lineLocked("(a malformed %s update)", u.Kind)
		return nil
	}
	switch v := v.(type) {
	case *acp.ContentChunk:
		switch u.Kind {
		case acp.UpdateAgentThoughtChunk:
			if r.thoughts {
				r.thoughtLocked(v.Content.Text)
			}
		case acp.UpdateUserMessageChunk:
			r.lineLocked("> %s", cutLine(strings.TrimRight(v.Content.Text, "\n"), 400))
		}
	case *acp.ToolCall:
		r.toolLocked(u.Kind, v)
	case *acp.Plan:
		var b strings.Builder
		b.WriteString("plan:")
		for _, e := range v.Entries {
			mark := "[ ]"
			switch e.Status {
			case "in_progress":
				mark = "[~]"
			case "completed":
				mark = "[x]"
			}
			fmt.Fprintf(&b, "\n  %s %s", mark, termSafe(cutLine(e.Content, 200), false))
		}
		r.lineLocked("%s", b.String())
	case *acp.CurrentMode:
		r.lineLocked("mode: %s", v.CurrentModeID)
	case *acp.ConfigOptions:
		for _, o := range v.ConfigOptions {
			name := o.ID
			if o.Category == "model" {
				name = "model"
			}
			r.lineLocked("%s: %s", name, o.CurrentValue)
		}
	case *acp.SessionInfo:
		if v.Title != nil {
			r.lineLocked("title: %s", cutLine(*v.Title, 200))
		}
	}
	return nil
}

func (r *acpRenderer) toolLocked(kind string, tc *acp.ToolCall) {
	st := r.tools[tc.ToolCallID]
	if st == nil || kind == acp.UpdateToolCall {
		st = &toolState{terminals: map[string]*acpclient.Terminal{}}
		r.tools[tc.ToolCallID] = st
	}
	changed := false
	if tc.Title != "" {
		st.title = tc.Title
	}
	if tc.Kind != "" {
		st.kind = tc.Kind
	}
	if tc.Status != "" && tc.Status != st.status {
		st.status, changed = tc.Status, true
	}
	title := st.title
	if title == "" {
		title = tc.ToolCallID
	}
	if kind == acp.UpdateToolCall {
		status := st.status
		if status == "" {
			status = "pending"
		}
		k := ""
		if st.kind != "" {
			k = " [" + st.kind + "]"
		}
		r.lineLocked("⚙ %s%s %s", cutLine(title, 200), k, status)
	} else if changed {
		r.lineLocked("↳ %s: %s", cutLine(title, 200), st.status)
	}
	for _, c := range tc.Content {
		switch c.Type {
		case "diff":
			old := ""
			if c.OldText != nil {
				old = *c.OldText
			}
			add, del := diffCounts(old, c.NewText)
			r.lineLocked("  edit %s (+%d −%d)", c.Path, add, del)
		case "terminal":
			if _, seen := st.terminals[c.TerminalID]; !seen {
				t, _ := r.terminal(c.TerminalID)
				st.terminals[c.TerminalID] = t
				if t != nil {
					r.lineLocked("  $ %s", cutLine(t.Command(), 200))
				}
			}
		}
	}
	if changed && (st.status == "completed" || st.status == "failed") {
		for _, t := range st.terminals {
			if t == nil {
				continue
			}
			out, truncated := t.Output()
			lines := lastLines(out, terminalLines)
			if truncated || strings.Count(strings.TrimRight(out, "\n"), "\n") >= terminalLines {
				r.lineLocked("  …") // more came before these lines
			}
			for _, l := range lines {
				r.lineLocked("  %s", cutLine(l, 400))
			}
			if es, ok := t.Exited(); ok {
				switch {
				case es.ExitCode != nil && *es.ExitCode != 0:
					r.lineLocked("  (exit status %d)", *es.ExitCode)
				case es.Signal != "":
					r.lineLocked("  (killed by %s)", es.Signal)
				}
			}
		}
	}
}

// setTerminals gives the renderer the connection's terminals.
func (r *acpRenderer) setTerminals(f func(id string) (*acpclient.Terminal, bool)) {
	r.mu.Lock()
	r.terms = f
	r.mu.Unlock()
}

func (r *acpRenderer) terminal(id string) (*acpclient.Terminal, bool) {
	if r.terms == nil {
		return nil, false
	}
	return r.terms(id)
}

// diffCounts counts the lines a diff adds and removes, by line multiset:
// a summary, not a diff.
func diffCounts(old, new string) (add, del int) {
	seen := map[string]int{}
	if old != "" {
		for _, l := range strings.Split(old, "\n") {
			seen[l]++
		}
	}
	if new != "" {
		for _, l := range strings.Split(new, "\n") {
			if seen[l] > 0 {
				seen[l]--
			} else {
				add++
			}
		}
	}
	for _, n := range seen {
		del += n
	}
	return add, del
}

// lineLocked writes one line (or several) to stderr, after ending an
// unterminated chunk on the same terminal.
func (r *acpRenderer) lineLocked(format string, args ...any) {
	if r.sep && r.midLine {
		io.WriteString(r.stdout, "\n")
		r.midLine = false
	}
	for i, a := range args {
		if str, ok := a.(string); ok {
			args[i] = termSafe(str, true)
		}
	}
	fmt.Fprintf(r.stderr, format+"\n", args...)
}

func (r *acpRenderer) thoughtLocked(text string) {
	if r.sep && r.midLine {
		io.WriteString(r.stdout, "\n")
		r.midLine = false
	}
	text = termSafe(text, true)
	if r.color {
		fmt.Fprintf(r.stderr, "\x1b[2m%s\x1b[0m", text)
	} else {
		io.WriteString(r.stderr, text)
	}
	if !strings.HasSuffix(text, "\n") {
		io.WriteString(r.stderr, "\n")
	}
}

// info writes a line of ours to stderr (unless --quiet).
func (r *acpRenderer) info(line string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.quiet {
		r.lineLocked("%s", line)
	}
}

// prompt writes the interactive prompt to stderr.
func (r *acpRenderer) prompt(s string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	io.WriteString(r.stderr, s)
}

// endTurn ends the reply with a newline if the agent did not, and forgets
// the turn's tool calls.
func (r *acpRenderer) endTurn() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.midLine {
		io.WriteString(r.stdout, "\n")
		r.midLine = false
	}
	clear(r.tools)
}

// jsonStop is --json's last line: the stop reason.
func (r *acpRenderer) jsonStop(reason acp.StopReason) {
	r.mu.Lock()
	defer r.mu.Unlock()
	b, _ := json.Marshal(map[string]string{"stopReason": string(reason)})
	fmt.Fprintf(r.stdout, "%s\n", b)
}

// askPolicy asks the user on the terminal: the question on stderr, the
// answer from the one line reader of stdin. Lines typed before the
// question (during the turn) are dropped first, so that they cannot answer
// it; a digit picks an option, y the first allow option, n or an empty
// line the first reject option.
type askPolicy struct {
	lines  *prompter
	render *acpRenderer

	turn  chan struct{} // one question at a time (taken with the question's ctx)
	cmu   sync.Mutex
	clock *pausableDeadline // the turn's --timeout, paused while asking
}

func (q *askPolicy) setClock(c *pausableDeadline) {
	q.cmu.Lock()
	q.clock = c
	q.cmu.Unlock()
}

func (q *askPolicy) RequestPermission(ctx context.Context, _ *acpclient.Session, req *acpclient.PermissionRequest) (acpclient.PermissionOutcome, error) {
	if !req.DuringPrompt {
		// Nobody is waiting at a question: the idle prompt reads stdin,
		// and an answer must never be taken for a prompt (or the reverse).
		q.render.info("refused a permission question asked outside a turn")
		return pick(req, "reject"), nil
	}
	select {
	case q.turn <- struct{}{}:
	case <-ctx.Done():
		return acpclient.PermissionOutcome{Cancelled: true}, nil // withdrawn while it waited
	}
	defer func() { <-q.turn }()
	if ctx.Err() != nil {
		return acpclient.PermissionOutcome{Cancelled: true}, nil
	}
	q.cmu.Lock()
	clock := q.clock
	q.cmu.Unlock()
	clock.pause()
	defer clock.resume()
	q.drain()

	tc := req.ToolCall
	title := tc.Title
	if title == "" {
		title = tc.ToolCallID
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Permission: %s", termSafe(cutLine(title, 200), false))
	if tc.Kind != "" {
		fmt.Fprintf(&b, " (%s)", termSafe(cutLine(tc.Kind, 40), false))
	}
	for _, l := range tc.Locations {
		fmt.Fprintf(&b, " — %s", termSafe(cutLine(l.Path, 300), false))
	}
	for i, o := range req.Options {
		fmt.Fprintf(&b, "\n  [%d] %s (%s)", i+1, termSafe(cutLine(o.Name, 120), false), termSafe(cutLine(o.Kind, 40), false))
	}
	q.render.mu.Lock()
	q.render.lineLocked("%s", b.String())
	q.render.mu.Unlock()
	for {
		q.render.prompt("allow? (a number, y or n; empty rejects) > ")
		l, err := q.lines.readLine(ctx)
		if err != nil {
			q.render.prompt("\n")
			if ctx.Err() != nil {
				return acpclient.PermissionOutcome{Cancelled: true}, nil
			}
			return pick(req, "reject"), nil // end of input
		}
		switch l = strings.ToLower(strings.TrimSpace(l)); l {
		case "", "n", "no":
			return pick(req, "reject"), nil
		case "y", "yes":
			return pick(req, "allow"), nil
		}
		if n, err := strconv.Atoi(l); err == nil && n >= 1 && n <= len(req.Options) {
			return acpclient.Selected(req.Options[n-1].OptionID), nil
		}
		q.render.prompt(fmt.Sprintf("  answer 1 to %d, y or n\n", len(req.Options)))
	}
}

// pick is the first option of a kind ("allow" or "reject"), once before
// always; with none offered, the first reject (or cancelled) for a
// refusal, and a refusal for an allow nobody offered.
func pick(req *acpclient.PermissionRequest, kind string) acpclient.PermissionOutcome {
	for _, k := range []string{kind + "_once", kind + "_always"} {
		if o, ok := req.Option(k); ok {
			return acpclient.Selected(o.OptionID)
		}
	}
	if kind == "allow" {
		return pick(req, "reject")
	}
	return acpclient.PermissionOutcome{Cancelled: true}
}

// drain drops the lines typed before the question.
func (q *askPolicy) drain() {
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		_, err := q.lines.readLine(ctx)
		cancel()
		if err != nil {
			return
		}
	}
}
