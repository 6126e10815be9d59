package acpclient

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/agentwire/agentwire/acp"
	"github.com/agentwire/agentwire/jsonrpc"
)

// outsideSentinel is the content of the files outside the roots: no answer,
// error or log line may ever carry it.
const outsideSentinel = "OUTSIDE-SENTINEL"

// fsFixture is a session root with an outside directory beside it.
type fsFixture struct {
	base, root, outside string
	s                   *Session
}

func newFSFixture(t *testing.T) *fsFixture {
	t.Helper()
	base := t.TempDir()
	x := &fsFixture{base: base, root: filepath.Join(base, "root"), outside: filepath.Join(base, "outside")}
	for _, d := range []string{x.root, x.outside, filepath.Join(x.root, "sub")} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	x.file(t, "outside/secret", outsideSentinel+"\n")
	x.file(t, "root/a.txt", "in root\n")
	x.file(t, "root/crlf.txt", "l1\r\nl2\r\nl3")
	x.file(t, "root/binary.bin", "ab\x00cd")
	x.file(t, "root/late-nul.txt", strings.Repeat("x", binarySniff)+"\x00")
	x.file(t, "root/bad-utf8.txt", "a\xffb")
	x.file(t, "root/nine.txt", "123456789")
	x.file(t, "root/eight.txt", "12345678")
	x.link(t, "a.txt", "root/link-in")
	x.link(t, "../a.txt", "root/sub/link-up")
	x.link(t, filepath.Join(x.outside, "secret"), "root/abs-link")
	x.link(t, filepath.Join(x.root, "a.txt"), "root/abs-link-in")
	x.link(t, "../outside/secret", "root/rel-out")
	x.link(t, "../outside", "root/dir-out")
	x.link(t, "loop", "root/loop")
	x.s = &Session{id: "s1", cwd: x.root, roots: []string{x.root}}
	return x
}

func (x *fsFixture) file(t *testing.T, rel, content string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(x.base, rel), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func (x *fsFixture) link(t *testing.T, target, rel string) {
	t.Helper()
	if err := os.Symlink(target, filepath.Join(x.base, rel)); err != nil {
		t.Fatal(err)
	}
}

func (x *fsFixture) read(t *testing.T, rel string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(x.base, rel))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// fsWant is an expected error: its code and data.reason ("" for none).
type fsWant struct {
	code   int64
	reason string
}

// checkFSError fails unless err is the *jsonrpc.Error want describes, with
// no file contents in it.
func checkFSError(t *testing.T, err error, want fsWant) *jsonrpc.Error {
	t.Helper()
	var je *jsonrpc.Error
	if !errors.As(err, &je) {
		t.Fatalf("error = %v (%T), want a *jsonrpc.Error %d %s", err, err, want.code, want.reason)
	}
	var data struct {
		Reason string `json:"reason"`
	}
	if len(je.Data) > 0 {
		if err := json.Unmarshal(je.Data, &data); err != nil {
			t.Fatalf("data %s: %v", je.Data, err)
		}
	}
	if je.Code != want.code || data.Reason != want.reason {
		t.Fatalf("error = %d %q reason %q, want %d reason %q", je.Code, je.Message, data.Reason, want.code, want.reason)
	}
	if strings.Contains(je.Error(), outsideSentinel) {
		t.Fatalf("error carries file contents: %v", je)
	}
	return je
}

var (
	wantOutside    = fsWant{jsonrpc.CodeInvalidParams, "outside_session_roots"}
	wantNotRegular = fsWant{jsonrpc.CodeInvalidParams, "not_a_regular_file"}
)

func TestRootedFSReadRefusesWhatLiesOutsideTheRootsOrIsNoText(t *testing.T) {
	x := newFSFixture(t)
	r := x.root
	tests := []struct {
		name  string
		fs    RootedFS
		path  string
		line  int
		limit int
		want  fsWant
	}{
		{name: "dot-dot escape", path: r + "/../outside/secret", want: wantOutside},
		{name: "dot-dot escape through a subdirectory", path: r + "/sub/../../outside/secret", want: wantOutside},
		{name: "absolute-target symlink out", path: r + "/abs-link", want: wantOutside},
		{name: "absolute-target symlink even to a file inside", path: r + "/abs-link-in", want: wantOutside},
		{name: "relative symlink out", path: r + "/rel-out", want: wantOutside},
		{name: "symlink to an outside directory", path: r + "/dir-out/secret", want: wantOutside},
		{name: "an outside path", path: x.outside + "/secret", want: wantOutside},
		{name: "a sibling sharing the root's prefix", path: r + "x/secret", want: wantOutside},
		{name: "relative path", path: "a.txt", want: fsWant{jsonrpc.CodeInvalidParams, "relative_path"}},
		{name: "relative path with dot-dot", path: "../outside/secret", want: fsWant{jsonrpc.CodeInvalidParams, "relative_path"}},
		{name: "NUL in the path", path: r + "/a.txt\x00/../../outside/secret", want: fsWant{jsonrpc.CodeInvalidParams, "invalid_path"}},
		{name: "a directory", path: r + "/sub", want: wantNotRegular},
		{name: "the root itself", path: r, want: wantNotRegular},
		{name: "binary file", path: r + "/binary.bin", want: fsWant{jsonrpc.CodeInvalidParams, "binary"}},
		{name: "over MaxReadBytes", fs: RootedFS{MaxReadBytes: 8}, path: r + "/nine.txt", want: fsWant{jsonrpc.CodeInvalidParams, "too_large"}},
		{name: "a symlink loop", path: r + "/loop", want: fsWant{jsonrpc.CodeInvalidParams, "symlink_loop"}},
		{name: "negative line", path: r + "/a.txt", line: -1, want: fsWant{jsonrpc.CodeInvalidParams, "invalid_range"}},
		{name: "negative limit", path: r + "/a.txt", limit: -1, want: fsWant{jsonrpc.CodeInvalidParams, "invalid_range"}},
		{name: "missing file", path: r + "/missing.txt", want: fsWant{acp.CodeResourceNotFound, ""}},
		{name: "missing because a parent is a file", path: r + "/a.txt/x", want: fsWant{acp.CodeResourceNotFound, ""}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.fs.ReadTextFile(t.Context(), x.s, tt.path, tt.line, tt.limit)
			if got != "" {
				t.Fatalf("content = %q, want none", got)
			}
			checkFSError(t, err, tt.want)
		})
	}
}

func TestRootedFSReadRefusalsNameTheAgentsPathAndTheLimit(t *testing.T) {
	x := newFSFixture(t)
	_, err := RootedFS{}.ReadTextFile(t.Context(), x.s, x.root+"/missing.txt", 0, 0)
	je := checkFSError(t, err, fsWant{acp.CodeResourceNotFound, ""})
	if want := `{"path":"` + x.root + `/missing.txt"}`; string(je.Data) != want {
		t.Fatalf("data = %s, want %s", je.Data, want)
	}
	// The agent's path as sent, not the cleaned or resolved one.
	sent := x.root + "/sub/../../outside/secret"
	_, err = RootedFS{}.ReadTextFile(t.Context(), x.s, sent, 0, 0)
	je = checkFSError(t, err, wantOutside)
	if !strings.Contains(je.Message, sent) || !strings.Contains(string(je.Data), sent) {
		t.Fatalf("error %v does not name the path sent", je)
	}
	_, err = RootedFS{MaxReadBytes: 8}.ReadTextFile(t.Context(), x.s, x.root+"/nine.txt", 0, 0)
	je = checkFSError(t, err, fsWant{jsonrpc.CodeInvalidParams, "too_large"})
	if !strings.Contains(string(je.Data), `"limit":8`) {
		t.Fatalf("data = %s, want the limit", je.Data)
	}
}

func TestRootedFSReadServesTextUnderTheRoots(t *testing.T) {
	x := newFSFixture(t)
	r := x.root
	tests := []struct {
		name        string
		fs          RootedFS
		path        string
		line, limit int
		want        string
	}{
		{name: "a file", path: r + "/a.txt", want: "in root\n"},
		{name: "an unclean path that stays inside", path: r + "/sub/../a.txt", want: "in root\n"},
		{name: "an in-root symlink", path: r + "/link-in", want: "in root\n"},
		{name: "an in-root relative symlink going up", path: r + "/sub/link-up", want: "in root\n"},
		{name: "all lines keep CRLF", path: r + "/crlf.txt", want: "l1\r\nl2\r\nl3"},
		{name: "line 1 is line 0", path: r + "/crlf.txt", line: 1, want: "l1\r\nl2\r\nl3"},
		{name: "line 2, limit 1", path: r + "/crlf.txt", line: 2, limit: 1, want: "l2\r\n"},
		{name: "limit 2 from the start", path: r + "/crlf.txt", limit: 2, want: "l1\r\nl2\r\n"},
		{name: "limit past the end", path: r + "/crlf.txt", line: 2, limit: 5, want: "l2\r\nl3"},
		{name: "the last line without an ending", path: r + "/crlf.txt", line: 3, want: "l3"},
		{name: "one line past the end", path: r + "/crlf.txt", line: 4, want: ""},
		{name: "far past the end", path: r + "/crlf.txt", line: 100, limit: 3, want: ""},
		{name: "past the end after a final newline", path: r + "/a.txt", line: 2, want: ""},
		{name: "invalid UTF-8 becomes U+FFFD", path: r + "/bad-utf8.txt", want: "a\uFFFDb"},
		{name: "a NUL after the first 8 KiB", path: r + "/late-nul.txt", want: strings.Repeat("x", binarySniff) + "\x00"},
		{name: "exactly MaxReadBytes", fs: RootedFS{MaxReadBytes: 8}, path: r + "/eight.txt", want: "12345678"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.fs.ReadTextFile(t.Context(), x.s, tt.path, tt.line, tt.limit)
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Fatalf("content = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestRootedFSReadsThroughTheRealpathAliasOfASymlinkedRoot(t *testing.T) {
	base := t.TempDir()
	real := filepath.Join(base, "real")
	if err := os.Mkdir(real, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(real, "f.txt"), []byte("aliased"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(base, "beside.txt"), []byte(outsideSentinel), 0o644); err != nil {
		t.Fatal(err)
	}
	given := filepath.Join(base, "given")
	if err := os.Symlink(real, given); err != nil {
		t.Fatal(err)
	}
	s := &Session{id: "s", cwd: given, roots: []string{given}}
	for _, f := range []RootedFS{{}, RootedFS{}.serve(slog.New(slog.DiscardHandler))} {
		for _, p := range []string{given + "/f.txt", real + "/f.txt"} {
			got, err := f.ReadTextFile(t.Context(), s, p, 0, 0)
			if err != nil || got != "aliased" {
				t.Fatalf("read %s = %q, %v; want aliased", p, got, err)
			}
		}
		_, err := f.ReadTextFile(t.Context(), s, base+"/beside.txt", 0, 0)
		checkFSError(t, err, wantOutside)
		if err := f.WriteTextFile(t.Context(), s, real+"/new.txt", "via alias"); err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
}

func TestRootedFSWriteRefusesWhatLiesOutsideOrIsNotAPlainFile(t *testing.T) {
	x := newFSFixture(t)
	r := x.root
	x.file(t, "root/h1", "linked")
	if err := os.Link(filepath.Join(r, "h1"), filepath.Join(r, "h2")); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(filepath.Join(x.outside, "secret"), filepath.Join(r, "hard-out")); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		fs   RootedFS
		path string
		want fsWant
	}{
		{name: "dot-dot escape", path: r + "/../outside/secret", want: wantOutside},
		{name: "absolute-target symlink", path: r + "/abs-link", want: wantOutside},
		{name: "relative symlink out", path: r + "/rel-out", want: wantOutside},
		{name: "a new file in an outside directory", path: r + "/dir-out/new.txt", want: wantOutside},
		{name: "new parents under an outside directory", path: r + "/dir-out/a/b/new.txt", want: wantOutside},
		{name: "relative path", path: "a.txt", want: fsWant{jsonrpc.CodeInvalidParams, "relative_path"}},
		{name: "NUL in the path", path: r + "/a\x00.txt", want: fsWant{jsonrpc.CodeInvalidParams, "invalid_path"}},
		{name: "a directory", path: r + "/sub", want: wantNotRegular},
		{name: "a hard link inside", path: r + "/h1", want: fsWant{jsonrpc.CodeInvalidParams, "hard_link"}},
		{name: "a hard link to an outside file", path: r + "/hard-out", want: fsWant{jsonrpc.CodeInvalidParams, "hard_link"}},
		{name: "read-only", fs: RootedFS{ReadOnly: true}, path: r + "/a.txt", want: fsWant{jsonrpc.CodeInvalidParams, "read_only"}},
		{name: "read-only, a new file", fs: RootedFS{ReadOnly: true}, path: r + "/new.txt", want: fsWant{jsonrpc.CodeInvalidParams, "read_only"}},
		{name: "a parent that is a file", path: r + "/a.txt/x", want: fsWant{acp.CodeResourceNotFound, ""}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkFSError(t, tt.fs.WriteTextFile(t.Context(), x.s, tt.path, "overwritten"), tt.want)
		})
	}
	// Nothing was written anywhere: not truncated before a refusal either.
	for rel, want := range map[string]string{
		"outside/secret": outsideSentinel + "\n", "root/h1": "linked", "root/a.txt": "in root\n",
	} {
		if got := x.read(t, rel); got != want {
			t.Errorf("%s = %q after refused writes, want %q", rel, got, want)
		}
	}
	for _, rel := range []string{"outside/new.txt", "outside/a", "root/new.txt"} {
		if _, err := os.Lstat(filepath.Join(x.base, rel)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s exists after refused writes (%v)", rel, err)
		}
	}
}

func TestRootedFSWriteWithAllowHardLinksWritesTheSharedFile(t *testing.T) {
	x := newFSFixture(t)
	x.file(t, "root/h1", "linked")
	if err := os.Link(filepath.Join(x.root, "h1"), filepath.Join(x.root, "h2")); err != nil {
		t.Fatal(err)
	}
	if err := (RootedFS{AllowHardLinks: true}).WriteTextFile(t.Context(), x.s, x.root+"/h1", "both"); err != nil {
		t.Fatal(err)
	}
	if got := x.read(t, "root/h2"); got != "both" {
		t.Fatalf("h2 = %q, want both", got)
	}
}

func TestRootedFSWriteCreatesFilesAndParentsAndWritesThroughInRootLinks(t *testing.T) {
	x := newFSFixture(t)
	f := RootedFS{}
	// A missing file with missing parents.
	if err := f.WriteTextFile(t.Context(), x.s, x.root+"/new/deeper/f.txt", "made\r\n"); err != nil {
		t.Fatal(err)
	}
	if got := x.read(t, "root/new/deeper/f.txt"); got != "made\r\n" {
		t.Fatalf("new file = %q", got)
	}
	fi, err := os.Stat(filepath.Join(x.root, "new/deeper/f.txt"))
	if err != nil || fi.Mode().Perm()&^0o022 != 0o644 {
		t.Fatalf("new file mode = %v, %v; want 0644 (less the umask)", fi.Mode(), err)
	}
	// An existing file: replaced whole, shorter content leaves no tail.
	if err := f.WriteTextFile(t.Context(), x.s, x.root+"/crlf.txt", "x"); err != nil {
		t.Fatal(err)
	}
	if got := x.read(t, "root/crlf.txt"); got != "x" {
		t.Fatalf("rewritten file = %q, want x", got)
	}
	// Through an in-root link: the target changes, the link stays a link.
	if err := f.WriteTextFile(t.Context(), x.s, x.root+"/sub/link-up", "via link\n"); err != nil {
		t.Fatal(err)
	}
	if got := x.read(t, "root/a.txt"); got != "via link\n" {
		t.Fatalf("link target = %q, want the new content", got)
	}
	if fi, err := os.Lstat(filepath.Join(x.root, "sub/link-up")); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Fatalf("the link was replaced: %v, %v", fi.Mode(), err)
	}
	// An empty write makes an empty file.
	if err := f.WriteTextFile(t.Context(), x.s, x.root+"/empty.txt", ""); err != nil {
		t.Fatal(err)
	}
	if got := x.read(t, "root/empty.txt"); got != "" {
		t.Fatalf("empty file = %q", got)
	}
}

func TestRootedFSPermissionDeniedIsAnInternalErrorWithoutTheOSText(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("root reads files whatever their mode")
	}
	x := newFSFixture(t)
	if err := os.Chmod(filepath.Join(x.root, "a.txt"), 0); err != nil {
		t.Fatal(err)
	}
	_, err := RootedFS{}.ReadTextFile(t.Context(), x.s, x.root+"/a.txt", 0, 0)
	je := checkFSError(t, err, fsWant{jsonrpc.CodeInternalError, "permission_denied"})
	if strings.Contains(je.Message, "openat") {
		t.Fatalf("message carries the OS text: %q", je.Message)
	}
}

func TestRootedFSWritableFollowsReadOnly(t *testing.T) {
	if !(RootedFS{}).Writable() || (RootedFS{ReadOnly: true}).Writable() {
		t.Fatal("Writable must be !ReadOnly")
	}
}

// plainFS is a FileSystem that is no FileWriter.
type plainFS struct{}

func (plainFS) ReadTextFile(context.Context, *Session, string, int, int) (string, error) {
	return "", nil
}

func TestServeFSDeclaresWhatTheFileSystemServes(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	tests := []struct {
		name        string
		fs          FileSystem
		read, write bool
		rooted      bool
	}{
		{name: "nil means a read-write RootedFS", fs: nil, read: true, write: true, rooted: true},
		{name: "NoFiles declares nothing", fs: NoFiles},
		{name: "a RootedFS value", fs: RootedFS{}, read: true, write: true, rooted: true},
		{name: "a read-only RootedFS", fs: RootedFS{ReadOnly: true}, read: true, rooted: true},
		{name: "a *RootedFS", fs: &RootedFS{ReadOnly: true}, read: true, rooted: true},
		{name: "a reader only", fs: plainFS{}, read: true},
		{name: "NoFiles wrapped is not NoFiles", fs: struct{ FileSystem }{NoFiles}, read: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv, read, write := serveFS(tt.fs, log)
			if read != tt.read || write != tt.write {
				t.Fatalf("declared read %v write %v, want %v %v", read, write, tt.read, tt.write)
			}
			if (srv == NoFiles) == tt.read {
				t.Fatalf("server %v with read %v", srv, read)
			}
			rf, ok := srv.(RootedFS)
			if ok != tt.rooted || (ok && rf.st == nil) {
				t.Fatalf("served %T (state %v), want a RootedFS with state: %v", srv, ok && rf.st != nil, tt.rooted)
			}
		})
	}
	// Two connections given the same RootedFS keep separate state.
	shared := RootedFS{}
	a, _, _ := serveFS(shared, log)
	b, _, _ := serveFS(shared, log)
	if a.(RootedFS).st == b.(RootedFS).st {
		t.Fatal("two connections share one RootedFS state")
	}
}

func TestNoFilesRefusesWithMethodNotFound(t *testing.T) {
	_, err := NoFiles.ReadTextFile(t.Context(), &Session{}, "/x", 0, 0)
	checkFSError(t, err, fsWant{jsonrpc.CodeMethodNotFound, ""})
	checkFSError(t, NoFiles.(FileWriter).WriteTextFile(t.Context(), &Session{}, "/x", ""), fsWant{jsonrpc.CodeMethodNotFound, ""})
}

// logLines is a slog handler that keeps the messages it gets.
type logLines struct {
	mu    sync.Mutex
	lines []string
}

func (l *logLines) Enabled(context.Context, slog.Level) bool { return true }
func (l *logLines) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	b.WriteString(r.Message)
	r.Attrs(func(a slog.Attr) bool {
		b.WriteString(" " + a.Key + "=" + a.Value.String())
		return true
	})
	l.mu.Lock()
	l.lines = append(l.lines, b.String())
	l.mu.Unlock()
	return nil
}
func (l *logLines) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *logLines) WithGroup(string) slog.Handler      { return l }

func TestServedRootedFSCountsRequestsAndLogsRefusalsOncePerBurst(t *testing.T) {
	x := newFSFixture(t)
	lines := &logLines{}
	f := RootedFS{}.serve(slog.New(lines))
	defer f.Close()
	ctx := t.Context()
	if _, err := f.ReadTextFile(ctx, x.s, x.root+"/a.txt", 0, 0); err != nil {
		t.Fatal(err)
	}
	if err := f.WriteTextFile(ctx, x.s, x.root+"/w.txt", "w"); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, err := f.ReadTextFile(ctx, x.s, x.root+"/rel-out", 0, 0); err == nil {
			t.Fatal("escape served")
		}
	}
	if _, err := f.ReadTextFile(ctx, x.s, x.root+"/missing", 0, 0); err == nil {
		t.Fatal("missing file served")
	}
	if got, want := fsStats(f), (FSStats{Reads: 1, Writes: 1, Refused: 4}); got != want {
		t.Fatalf("stats = %+v, want %+v", got, want)
	}
	lines.mu.Lock()
	defer lines.mu.Unlock()
	if len(lines.lines) != 1 || !strings.Contains(lines.lines[0], "refused") || !strings.Contains(lines.lines[0], "rel-out") {
		t.Fatalf("log = %q, want one line for the burst naming the path", lines.lines)
	}
	if strings.Contains(lines.lines[0], outsideSentinel) {
		t.Fatalf("log carries file contents: %q", lines.lines[0])
	}
	if fsStats(RootedFS{}) != (FSStats{}) || fsStats(plainFS{}) != (FSStats{}) {
		t.Fatal("an unserved RootedFS counts")
	}
}

func TestServedRootedFSKeepsTheRootOpenAndFollowsItWhenItMoves(t *testing.T) {
	x := newFSFixture(t)
	f := RootedFS{}.serve(slog.New(slog.DiscardHandler))
	defer f.Close()
	if err := f.OpenSession(x.s); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(x.root, x.base+"/moved"); err != nil {
		t.Fatal(err)
	}
	// The session's root is the directory it named when the session began,
	// wherever it is now.
	got, err := f.ReadTextFile(t.Context(), x.s, x.root+"/a.txt", 0, 0)
	if err != nil || got != "in root\n" {
		t.Fatalf("read after the move = %q, %v", got, err)
	}
}

func TestRootedFSOpenSessionReportsRootsThatAreNoDirectories(t *testing.T) {
	x := newFSFixture(t)
	s := &Session{id: "s", roots: []string{x.root, x.root + "/missing", "relative"}}
	for _, f := range []RootedFS{{}, RootedFS{}.serve(slog.New(slog.DiscardHandler))} {
		err := f.OpenSession(s)
		if err == nil || !strings.Contains(err.Error(), x.root+"/missing") || !strings.Contains(err.Error(), "relative") {
			t.Fatalf("OpenSession = %v, want both bad roots named", err)
		}
		_, err = f.ReadTextFile(t.Context(), s, x.root+"/missing/f", 0, 0)
		checkFSError(t, err, fsWant{acp.CodeResourceNotFound, ""})
		f.Close()
	}
}

func TestServedRootedFSClosesTheRootsWhenTheSessionEnds(t *testing.T) {
	x := newFSFixture(t)
	read := func(f RootedFS, s *Session) {
		t.Helper()
		if _, err := f.ReadTextFile(context.Background(), s, x.root+"/a.txt", 0, 0); err != nil {
			t.Fatal(err)
		}
	}
	cached := func(f RootedFS, s *Session) *rootSet {
		f.st.mu.Lock()
		defer f.st.mu.Unlock()
		return f.st.sessions[s]
	}
	closedRoot := func(rs *rootSet) bool {
		_, err := rs.roots[0].Stat(".")
		return errors.Is(err, os.ErrClosed)
	}

	t.Run("CloseSession", func(t *testing.T) {
		f := RootedFS{}.serve(slog.New(slog.DiscardHandler))
		read(f, x.s)
		rs := cached(f, x.s)
		if rs == nil || closedRoot(rs) {
			t.Fatal("no open roots cached after a read")
		}
		f.CloseSession(x.s)
		if cached(f, x.s) != nil || !closedRoot(rs) {
			t.Fatal("CloseSession left the roots open")
		}
		// A late request still works, on roots opened for it alone.
		read(f, x.s)
		f.Close()
	})
	t.Run("Close", func(t *testing.T) {
		f := RootedFS{}.serve(slog.New(slog.DiscardHandler))
		other := &Session{id: "s2", roots: x.s.roots}
		read(f, x.s)
		read(f, other)
		a, b := cached(f, x.s), cached(f, other)
		f.Close()
		if !closedRoot(a) || !closedRoot(b) {
			t.Fatal("Close left roots open")
		}
		read(f, x.s)
		if cached(f, x.s) != nil {
			t.Fatal("roots cached after Close")
		}
	})
	t.Run("the session's context ends", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			f := RootedFS{}.serve(slog.New(slog.DiscardHandler))
			defer f.Close()
			ctx, cancel := context.WithCancelCause(context.Background())
			s := &Session{id: "s3", roots: x.s.roots, ctx: ctx, cancel: cancel}
			read(f, s)
			rs := cached(f, s)
			cancel(errors.New("session closed"))
			synctest.Wait()
			if cached(f, s) != nil || !closedRoot(rs) {
				t.Fatal("the roots outlived the session's context")
			}
			read(f, s)
			if cached(f, s) != nil {
				t.Fatal("roots cached for an ended session")
			}
		})
	})
}

func TestRootedFSReturnsTheCauseOfACancelledRequest(t *testing.T) {
	x := newFSFixture(t)
	cause := errors.New("agent cancelled")
	ctx, cancel := context.WithCancelCause(t.Context())
	cancel(cause)
	if _, err := (RootedFS{}).ReadTextFile(ctx, x.s, x.root+"/a.txt", 0, 0); !errors.Is(err, cause) {
		t.Fatalf("err = %v, want the cause", err)
	}
	if err := (RootedFS{}).WriteTextFile(ctx, x.s, x.root+"/a.txt", "no"); !errors.Is(err, cause) {
		t.Fatalf("err = %v, want the cause", err)
	}
	if got := x.read(t, "root/a.txt"); got != "in root\n" {
		t.Fatalf("a cancelled write wrote: %q", got)
	}
}

// TestRootedFSNeverReadsOutsideWhileADirectoryIsSwappedForASymlink pins the
// race that checking a resolved path and then opening it loses: root/d is
// swapped between a real directory and a symlink to an outside directory
// (absolute and relative in turn) while readers read root/d/secret.
func TestRootedFSNeverReadsOutsideWhileADirectoryIsSwappedForASymlink(t *testing.T) {
	x := newFSFixture(t)
	d, parked := filepath.Join(x.root, "d"), filepath.Join(x.root, "parked")
	if err := os.Mkdir(d, 0o755); err != nil {
		t.Fatal(err)
	}
	x.file(t, "root/d/secret", "inside")
	for _, f := range []RootedFS{{}, RootedFS{}.serve(slog.New(slog.DiscardHandler))} {
		var inside, escapes, leaked atomic.Int64
		stop := make(chan struct{})
		var wg sync.WaitGroup
		for range 4 {
			wg.Go(func() {
				for {
					select {
					case <-stop:
						return
					default:
					}
					got, err := f.ReadTextFile(context.Background(), x.s, d+"/secret", 0, 0)
					var je *jsonrpc.Error
					switch {
					case strings.Contains(got, outsideSentinel) || (err != nil && strings.Contains(err.Error(), outsideSentinel)):
						leaked.Add(1)
					case err == nil && got == "inside":
						inside.Add(1)
					case errors.As(err, &je) && bytes.Contains(je.Data, []byte("outside_session_roots")):
						escapes.Add(1)
					}
				}
			})
		}
		targets := []string{x.outside, "../outside"}
		start := time.Now()
		for i := 0; ; i++ {
			if err := os.Rename(d, parked); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(targets[i%2], d); err != nil {
				t.Fatal(err)
			}
			if err := os.Remove(d); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(parked, d); err != nil {
				t.Fatal(err)
			}
			// At least a second, and until both sides of the race were
			// seen (bounded, so a broken run ends).
			el := time.Since(start)
			if el > 10*time.Second || (el > time.Second && inside.Load() > 0 && escapes.Load() > 0) {
				break
			}
		}
		close(stop)
		wg.Wait()
		f.Close()
		if leaked.Load() > 0 {
			t.Fatalf("read the outside file %d times", leaked.Load())
		}
		if inside.Load() == 0 || escapes.Load() == 0 {
			t.Fatalf("the race was not exercised: %d inside reads, %d refused escapes", inside.Load(), escapes.Load())
		}
	}
}
