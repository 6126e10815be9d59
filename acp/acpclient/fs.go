package acpclient

import (
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/agentwire/agentwire/acp"
	"github.com/agentwire/agentwire/internal/refusal"
	"github.com/agentwire/agentwire/jsonrpc"
)

// FileSystem serves fs/read_text_file for an agent. line is 1-based (0 means
// from the start) and limit counts lines (0 means to the end). An error that
// is a *jsonrpc.Error is answered as it is; any other is answered -32603
// without its text, which may name local paths.
type FileSystem interface {
	ReadTextFile(ctx context.Context, s *Session, path string, line, limit int) (string, error)
}

// FileWriter is implemented by a FileSystem that also serves
// fs/write_text_file (which creates the file if it does not exist).
type FileWriter interface {
	WriteTextFile(ctx context.Context, s *Session, path, content string) error
}

// NoFiles, as Options.FS, declares no file system: the agent is told the
// client reads and writes no files, and fs/* requests get -32601.
var NoFiles FileSystem = noFiles{}

// noFiles is comparable, so that Options.FS == NoFiles is a plain interface
// comparison.
type noFiles struct{}

func (noFiles) ReadTextFile(context.Context, *Session, string, int, int) (string, error) {
	return "", jsonrpc.NewError(jsonrpc.CodeMethodNotFound, "Method not found", map[string]any{"method": "fs/read_text_file"})
}

func (noFiles) WriteTextFile(context.Context, *Session, string, string) error {
	return jsonrpc.NewError(jsonrpc.CodeMethodNotFound, "Method not found", map[string]any{"method": "fs/write_text_file"})
}

// RootedFS serves the files under each session's roots (Session.Roots: the
// cwd and the additional directories unless SessionConfig.Roots says
// otherwise), and nothing else. It is the default Options.FS.
//
// Every access goes through an os.Root opened on the root directory, which
// resolves each path component itself (openat, no following of a link out of
// the root): a symlink inside a root works; one that leads out of it, or an
// absolute one, is refused, even when it is swapped in while the request
// runs. Checking a resolved path and then opening it would be a race by
// construction, so nothing here does that.
//
// A request is refused with -32602 and a data.reason:
//
//   - relative_path: the path is not absolute;
//   - invalid_path: it holds a NUL byte;
//   - invalid_range: a negative line or limit;
//   - outside_session_roots: it lies under no root, lexically (after
//     filepath.Clean, the way agents build paths) or through a symlink;
//   - not_a_regular_file: a directory, FIFO, socket or device (opened
//     non-blocking, so a FIFO cannot hang the request);
//   - special_file_system: a file of /proc, /sys and the like, reachable
//     when a root contains them (their files look regular, and
//     /proc/self/environ holds this process's secrets);
//   - too_large: the file is over MaxReadBytes (data.limit);
//   - binary: a NUL byte in its first 8 KiB;
//   - hard_link: a write to a file with more than one link, which would
//     change the file under its other names, possibly outside the roots;
//   - read_only: a write when ReadOnly.
//
// A file that does not exist gets -32002 with data.path; a permission or I/O
// error gets -32603. Error messages name the path the agent sent, never a
// resolved one, and never carry file contents.
//
// Reads keep line endings (CRLF too) and replace invalid UTF-8 with U+FFFD.
// Writes create missing parent directories (0o755) and the file (0o644),
// and write an existing file in place through in-root links, keeping its
// mode, owner and links, as editors do. A write is not atomic: a crash midway
// leaves the file truncated (a temporary file and a rename would replace a
// symlink by a file instead).
//
// Not covered: reads through hard links (the link is inside the root even
// when the file's other name is not); secrets inside the roots (.env files,
// keys); and terminals, which are not a sandbox at all.
//
// The zero value is ready to use. Served by a Conn, each session's roots are
// opened once (on the session's first file request, or when the connection
// calls OpenSession) and kept open for the session's life, so a root that
// moves is followed; the requests are counted and refusals logged once per
// burst. Called directly, outside a Conn, RootedFS opens the roots for each
// request and neither counts nor logs.
type RootedFS struct {
	// ReadOnly refuses fs/write_text_file (-32602, reason read_only), and
	// makes the connection declare no writeTextFile capability.
	ReadOnly bool
	// MaxReadBytes bounds the size of a file read. It is below acp-go-sdk's
	// 10 MiB line cap, so that a reply cannot break that SDK's reader.
	// Default DefaultMaxReadBytes (8 MiB).
	MaxReadBytes int
	// AllowHardLinks lets writes through a file with more than one link.
	// Default false: such writes are refused (-32602, reason hard_link).
	AllowHardLinks bool

	// st is the per-connection state, set by serve; nil outside a Conn.
	// Copies of a served RootedFS share it.
	st *fsState
}

// FSStats counts the file requests a connection's RootedFS answered:
// Reads and Writes those served, Refused those answered with an error
// (whatever its reason: confinement, a limit, a missing file, an I/O error).
type FSStats struct {
	Reads, Writes, Refused int64
}

// binarySniff is how much of a file is searched for a NUL byte: the amount
// git and grep look at to call a file binary.
const binarySniff = 8 << 10

// Writable reports whether f serves writes: true unless ReadOnly.
func (f RootedFS) Writable() bool { return !f.ReadOnly }

// serveFS is how a connection turns Options.FS into what it serves: srv is
// NoFiles when no file system is declared; read and write are the
// capabilities to declare. A RootedFS (nil FS included) gets its own state,
// so two connections given the same Options count and cache separately.
func serveFS(fsys FileSystem, log *slog.Logger) (srv FileSystem, read, write bool) {
	switch v := fsys.(type) {
	case nil:
		return RootedFS{}.serve(log), true, true
	case noFiles:
		return NoFiles, false, false
	case RootedFS:
		return v.serve(log), true, v.Writable()
	case *RootedFS:
		if v == nil {
			return RootedFS{}.serve(log), true, true
		}
		return v.serve(log), true, v.Writable()
	}
	_, write = fsys.(FileWriter)
	if w, ok := fsys.(interface{ Writable() bool }); ok && write {
		write = w.Writable()
	}
	return fsys, true, write
}

// serve returns a copy of f with state of its own: the session roots cache,
// counters and the refusal log.
func (f RootedFS) serve(log *slog.Logger) RootedFS {
	f.st = &fsState{sessions: map[*Session]*rootSet{}}
	f.st.log.Logger = log
	return f
}

// fsState is a served RootedFS's state, one per connection.
type fsState struct {
	reads, writes, refused atomic.Int64
	log                    refusal.Log

	mu       sync.Mutex
	sessions map[*Session]*rootSet
	closed   bool
}

// rootSet is one session's opened roots.
type rootSet struct {
	entries []rootEntry // longest prefix first
	roots   []*os.Root  // each opened root once, for closing
	stop    func() bool // stops the AfterFunc on the session's ctx
}

// rootEntry maps a path prefix (a root as given, or its realpath) to its
// opened root; root is nil when the directory could not be opened.
type rootEntry struct {
	prefix string
	root   *os.Root
}

// openRootSet opens each absolute root, and adds its realpath as an alias
// for the same os.Root: agents send the cwd either as given or resolved
// (macOS's /tmp is /private/tmp), and both name the same files.
func openRootSet(paths []string) *rootSet {
	rs := &rootSet{}
	for _, p := range paths {
		if !filepath.IsAbs(p) {
			continue // no absolute path can lie under it
		}
		p = filepath.Clean(p)
		r, err := os.OpenRoot(p)
		if err != nil {
			r = nil
		} else {
			rs.roots = append(rs.roots, r)
		}
		rs.entries = append(rs.entries, rootEntry{p, r})
		if real, err := filepath.EvalSymlinks(p); err == nil && real != p && filepath.IsAbs(real) {
			rs.entries = append(rs.entries, rootEntry{real, r})
		}
	}
	slices.SortStableFunc(rs.entries, func(a, b rootEntry) int { return len(b.prefix) - len(a.prefix) })
	return rs
}

func (rs *rootSet) close() {
	if rs.stop != nil {
		rs.stop()
	}
	for _, r := range rs.roots {
		r.Close()
	}
}

// lookup returns the root of the longest prefix that path (clean, absolute)
// lies under, and path relative to it.
func (rs *rootSet) lookup(path string) (r *os.Root, rel string, ok bool) {
	for _, e := range rs.entries {
		if !under(path, e.prefix) {
			continue
		}
		rel, err := filepath.Rel(e.prefix, path)
		if err != nil || (rel != "." && !filepath.IsLocal(rel)) {
			return nil, "", false
		}
		return e.root, rel, true
	}
	return nil, "", false
}

// under reports whether path equals prefix or lies beneath it, lexically.
func under(path, prefix string) bool {
	if path == prefix {
		return true
	}
	if !strings.HasPrefix(path, prefix) {
		return false
	}
	return strings.HasSuffix(prefix, string(filepath.Separator)) || path[len(prefix)] == filepath.Separator
}

// OpenSession opens s's roots now rather than on its first file request, so
// that the session follows its directories from its start. The connection
// calls it when a session is made; it reports a root that is not an
// existing directory. A RootedFS outside a Conn only checks the roots.
func (f RootedFS) OpenSession(s *Session) error {
	var bad []string
	check := func(rs *rootSet) {
		for _, e := range rs.entries {
			if e.root == nil {
				bad = append(bad, e.prefix)
			}
		}
	}
	if rs, ok := f.st.get(s); ok {
		check(rs)
	} else {
		rs := openRootSet(s.Roots())
		check(rs)
		rs.close()
	}
	for _, p := range s.Roots() {
		if !filepath.IsAbs(p) {
			bad = append(bad, p)
		}
	}
	if len(bad) > 0 {
		return errors.New("acpclient: session roots that are not absolute paths of existing directories: " + strings.Join(bad, ", "))
	}
	return nil
}

// get returns s's cached roots, opening them on first use. ok is false when
// there is no cache (outside a Conn, after Close, or once s has ended); the
// caller then opens the roots for the one request.
func (st *fsState) get(s *Session) (*rootSet, bool) {
	if st == nil {
		return nil, false
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	if rs, ok := st.sessions[s]; ok {
		return rs, true
	}
	// Checked under mu: a session whose ctx has ended gets no cache entry,
	// so none is left behind once its AfterFunc has run.
	if st.closed || (s.ctx != nil && s.ctx.Err() != nil) {
		return nil, false
	}
	rs := openRootSet(s.roots)
	if s.ctx != nil {
		// The roots end with the session even if the connection never
		// calls CloseSession (a lost agent, a forgotten Close).
		rs.stop = context.AfterFunc(s.ctx, func() { st.closeSession(s) })
	}
	st.sessions[s] = rs
	return rs, true
}

func (st *fsState) closeSession(s *Session) {
	if st == nil {
		return
	}
	st.mu.Lock()
	rs := st.sessions[s]
	delete(st.sessions, s)
	st.mu.Unlock()
	if rs != nil {
		rs.close()
	}
}

// CloseSession closes s's roots. The connection calls it when a session
// ends; a later request for s opens them again for that request only.
func (f RootedFS) CloseSession(s *Session) { f.st.closeSession(s) }

// Close closes every session's roots. The connection calls it when it
// closes.
func (f RootedFS) Close() {
	st := f.st
	if st == nil {
		return
	}
	st.mu.Lock()
	st.closed = true
	sessions := st.sessions
	st.sessions = map[*Session]*rootSet{}
	st.mu.Unlock()
	for _, rs := range sessions {
		rs.close()
	}
}

// fsStats returns the counters of what serveFS returned: a RootedFS's, zero
// for any other file system (which counts for itself, if at all).
func fsStats(srv FileSystem) FSStats {
	if f, ok := srv.(RootedFS); ok {
		return f.stats()
	}
	return FSStats{}
}

// stats returns the connection's file counters (zero outside a Conn).
func (f RootedFS) stats() FSStats {
	if f.st == nil {
		return FSStats{}
	}
	return FSStats{Reads: f.st.reads.Load(), Writes: f.st.writes.Load(), Refused: f.st.refused.Load()}
}

// done counts a request and logs a refusal (invalid params: the agent asked
// for something the confinement or a limit refuses) once per burst.
func (st *fsState) done(method string, s *Session, path string, err error, ok *atomic.Int64) {
	if st == nil {
		return
	}
	if err == nil {
		ok.Add(1)
		return
	}
	st.refused.Add(1)
	var je *jsonrpc.Error
	if errors.As(err, &je) && je.Code == jsonrpc.CodeInvalidParams {
		st.log.Refused("acp client: file request refused", "method", method, "session", s.ID(), "path", path, "error", je.Message)
	}
}

// ReadTextFile serves fs/read_text_file under s's roots.
func (f RootedFS) ReadTextFile(ctx context.Context, s *Session, path string, line, limit int) (string, error) {
	content, err := f.read(ctx, s, path, line, limit)
	var reads *atomic.Int64
	if f.st != nil {
		reads = &f.st.reads
	}
	f.st.done("fs/read_text_file", s, path, err, reads)
	return content, err
}

// WriteTextFile serves fs/write_text_file under s's roots.
func (f RootedFS) WriteTextFile(ctx context.Context, s *Session, path, content string) error {
	err := f.write(ctx, s, path, content)
	var writes *atomic.Int64
	if f.st != nil {
		writes = &f.st.writes
	}
	f.st.done("fs/write_text_file", s, path, err, writes)
	return err
}

func (f RootedFS) read(ctx context.Context, s *Session, path string, line, limit int) (string, error) {
	if line < 0 || limit < 0 {
		return "", invalid("invalid_range", "line and limit must not be negative", path)
	}
	r, rel, release, err := f.resolve(ctx, s, path)
	if err != nil {
		return "", err
	}
	defer release()
	file, err := r.OpenFile(rel, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return "", fileError("read", path, err)
	}
	defer file.Close()
	fi, err := file.Stat()
	if err != nil {
		return "", fileError("read", path, err)
	}
	if err := checkFile(file, fi, path); err != nil {
		return "", err
	}
	maxBytes := f.MaxReadBytes
	if maxBytes <= 0 {
		maxBytes = DefaultMaxReadBytes
	}
	if fi.Size() > int64(maxBytes) {
		return "", tooLarge(path, maxBytes)
	}
	// The size is checked again on what is read: the file may grow.
	data, err := io.ReadAll(io.LimitReader(file, int64(maxBytes)+1))
	if err != nil {
		return "", fileError("read", path, err)
	}
	if len(data) > maxBytes {
		return "", tooLarge(path, maxBytes)
	}
	if bytes.IndexByte(data[:min(len(data), binarySniff)], 0) >= 0 {
		return "", invalid("binary", "not a text file: "+path, path)
	}
	return strings.ToValidUTF8(string(selectLines(data, line, limit)), "\uFFFD"), nil
}

// selectLines returns limit lines (0: all) from line (1-based, 0: 1), each
// with its line ending; nothing past the end.
func selectLines(data []byte, line, limit int) []byte {
	pos := 0
	for n := 1; n < line; n++ {
		i := bytes.IndexByte(data[pos:], '\n')
		if i < 0 {
			return nil
		}
		pos += i + 1
	}
	data = data[pos:]
	if limit == 0 {
		return data
	}
	end := 0
	for range limit {
		i := bytes.IndexByte(data[end:], '\n')
		if i < 0 {
			return data
		}
		end += i + 1
	}
	return data[:end]
}

func (f RootedFS) write(ctx context.Context, s *Session, path, content string) error {
	if f.ReadOnly {
		return invalid("read_only", "files are read-only for this agent", path)
	}
	r, rel, release, err := f.resolve(ctx, s, path)
	if err != nil {
		return err
	}
	defer release()
	file, err := f.openExisting(r, rel, path)
	if errors.Is(err, fs.ErrNotExist) {
		if dir := filepath.Dir(rel); dir != "." {
			if err := r.MkdirAll(dir, 0o755); err != nil {
				return fileError("write", path, err)
			}
		}
		file, err = r.OpenFile(rel, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NONBLOCK, 0o644)
		if errors.Is(err, fs.ErrExist) {
			// Made by someone else meanwhile (or a dangling link): write it
			// as an existing file, with that path's checks.
			file, err = f.openExisting(r, rel, path)
		} else if err == nil {
			err = f.checkWritable(file, path)
		}
	}
	if err != nil {
		return fileError("write", path, err)
	}
	_, err = file.WriteString(content)
	if cerr := file.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fileError("write", path, err)
	}
	return nil
}

// openExisting opens an existing file for writing and truncates it only once
// it passed the checks: opening with O_TRUNC would empty a hard-linked file
// before the link count could be looked at.
func (f RootedFS) openExisting(r *os.Root, rel, path string) (*os.File, error) {
	file, err := r.OpenFile(rel, os.O_WRONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	if err := f.checkWritable(file, path); err != nil {
		file.Close()
		return nil, err
	}
	if err := file.Truncate(0); err != nil {
		file.Close()
		return nil, err
	}
	return file, nil
}

func (f RootedFS) checkWritable(file *os.File, path string) error {
	fi, err := file.Stat()
	if err != nil {
		return err
	}
	if err := checkFile(file, fi, path); err != nil {
		return err
	}
	if !f.AllowHardLinks && linkCount(fi) > 1 {
		return invalid("hard_link", "file has other hard links: "+path, path)
	}
	return nil
}

// checkFile refuses what is not a regular file of an ordinary file system.
func checkFile(file *os.File, fi fs.FileInfo, path string) error {
	if !fi.Mode().IsRegular() {
		return invalid("not_a_regular_file", "not a regular file: "+path, path)
	}
	if specialFS(file) {
		return invalid("special_file_system", "file of a kernel file system (/proc, /sys): "+path, path)
	}
	return nil
}

// resolve checks path and finds the root it lies under. release closes roots
// opened for this request only.
func (f RootedFS) resolve(ctx context.Context, s *Session, path string) (r *os.Root, rel string, release func(), err error) {
	if err := ctx.Err(); err != nil {
		return nil, "", nil, context.Cause(ctx)
	}
	if s == nil {
		return nil, "", nil, jsonrpc.NewError(jsonrpc.CodeInternalError, "no session", nil)
	}
	if strings.IndexByte(path, 0) >= 0 {
		// The path is not echoed: a NUL would make it unreadable in logs.
		return nil, "", nil, jsonrpc.NewError(jsonrpc.CodeInvalidParams, "path contains a NUL byte", map[string]string{"reason": "invalid_path"})
	}
	if !filepath.IsAbs(path) {
		return nil, "", nil, invalid("relative_path", "path must be absolute: "+path, path)
	}
	clean := filepath.Clean(path)
	rs, cached := f.st.get(s)
	release = func() {}
	if !cached {
		rs = openRootSet(s.Roots())
		release = rs.close
	}
	r, rel, ok := rs.lookup(clean)
	if !ok {
		release()
		return nil, "", nil, outside(path)
	}
	if r == nil {
		release()
		return nil, "", nil, notFound(path)
	}
	return r, rel, release, nil
}

func invalid(reason, msg, path string) *jsonrpc.Error {
	return jsonrpc.NewError(jsonrpc.CodeInvalidParams, msg, map[string]string{"reason": reason, "path": path})
}

func outside(path string) *jsonrpc.Error {
	return invalid("outside_session_roots", "path outside the session's roots: "+path, path)
}

func notFound(path string) *jsonrpc.Error {
	return jsonrpc.NewError(acp.CodeResourceNotFound, "file not found: "+path, map[string]string{"path": path})
}

func tooLarge(path string, limit int) *jsonrpc.Error {
	return jsonrpc.NewError(jsonrpc.CodeInvalidParams, "file too large: "+path,
		map[string]any{"reason": "too_large", "path": path, "limit": limit})
}

// fileError maps an error of os.Root or the file to the answer. The OS text
// is never passed on: it names the resolved path.
func fileError(op, path string, err error) error {
	var je *jsonrpc.Error
	if errors.As(err, &je) {
		return je
	}
	internal := func(reason, msg string) error {
		return jsonrpc.NewError(jsonrpc.CodeInternalError, msg+": "+path, map[string]string{"reason": reason, "path": path})
	}
	switch {
	case escapes(err):
		return outside(path)
	case errors.Is(err, fs.ErrNotExist), errors.Is(err, syscall.ENOTDIR):
		return notFound(path)
	case errors.Is(err, syscall.EISDIR), errors.Is(err, syscall.ENXIO):
		// EISDIR: a directory opened for writing; ENXIO: a FIFO with no
		// reader opened for writing without blocking.
		return invalid("not_a_regular_file", "not a regular file: "+path, path)
	case errors.Is(err, syscall.ELOOP):
		return invalid("symlink_loop", "too many levels of symbolic links: "+path, path)
	case errors.Is(err, syscall.ENAMETOOLONG):
		return invalid("name_too_long", "path too long: "+path, path)
	case errors.Is(err, fs.ErrPermission):
		return internal("permission_denied", "permission denied")
	case errors.Is(err, syscall.EROFS):
		return internal("read_only_file_system", "read-only file system")
	case errors.Is(err, syscall.ENOSPC), errors.Is(err, syscall.EDQUOT):
		return internal("no_space", "no space left on device")
	case errors.Is(err, os.ErrClosed):
		return internal("session_closed", "session closed")
	}
	return internal("io_error", "cannot "+op+" file")
}

// escapes reports os.Root's refusal of a path that leads out of the root
// (through "..", a symlink out, or an absolute symlink). Its error value is
// unexported, so it is known by its text; the tests pin it. EXDEV is what
// openat2's RESOLVE_BENEATH says for the same thing.
func escapes(err error) bool {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		err = pe.Err
	}
	return errors.Is(err, syscall.EXDEV) || (err != nil && err.Error() == "path escapes from parent")
}
