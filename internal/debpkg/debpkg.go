package debpkg

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// Spec names a program and the Debian packages it comes in.
type Spec struct {
	// Package is the package that holds the program ("nginx"); the cache
	// is keyed by its name and version.
	Package string
	// Program is the program's path as the package installs it, without
	// the leading slash ("usr/sbin/nginx"). Its base name is looked for
	// on PATH first.
	Program string
	// Also are packages unpacked beside it: parts of the program packaged
	// apart, and libraries it links that a machine may lack.
	Also []string
}

// The programs agentwire's tests run.
var (
	// Nginx is nginx, the load balancer of the fleet tests.
	Nginx = Spec{Package: "nginx", Program: "usr/sbin/nginx"}
	// RedisServer is redis-server. Debian's redis-server package holds
	// little more than a link into redis-tools; jemalloc and lzf are
	// libraries redis-tools links.
	RedisServer = Spec{Package: "redis-server", Program: "usr/bin/redis-server",
		Also: []string{"redis-tools", "libjemalloc2", "liblzf1"}}
)

// found is what one Spec came to, once per test binary.
type found struct {
	once sync.Once
	path string
	env  []string
	skip string
	err  error
}

var (
	foundMu sync.Mutex
	byName  = map[string]*found{}
)

// Binary returns the path of s's program and the environment it needs to
// run (LD_LIBRARY_PATH naming the libraries unpacked beside it; nil for a
// program installed on the machine): the installed one if there is one,
// or the one unpacked in the cache, fetching it first if need be. It
// skips t where there is no apt-get, and fails t when the fetch fails.
// The answer is kept for the life of the test binary.
func Binary(t testing.TB, s Spec) (path string, env []string) {
	t.Helper()
	foundMu.Lock()
	f := byName[s.Package+"\x00"+s.Program]
	if f == nil {
		f = &found{}
		byName[s.Package+"\x00"+s.Program] = f
	}
	foundMu.Unlock()
	f.once.Do(func() {
		if p, err := exec.LookPath(filepath.Base(s.Program)); err == nil {
			f.path = p
			return
		}
		if _, err := os.Stat("/" + s.Program); err == nil {
			f.path = "/" + s.Program
			return
		}
		if _, err := exec.LookPath("apt-get"); err != nil {
			f.skip = fmt.Sprintf("this test needs %s, from Debian's %s package (no apt-get here)", filepath.Base(s.Program), s.Package)
			return
		}
		f.path, f.env, f.err = fetch(s)
	})
	if f.skip != "" {
		t.Skip(f.skip)
	}
	if f.err != nil {
		t.Fatal(f.err)
	}
	return f.path, f.env
}

// Find is Binary for a program that is not a test (the benchmarks): the
// same lookup and the same cache, with ErrNoAPT where there is no apt-get
// and the fetch's error otherwise.
func Find(s Spec) (path string, env []string, err error) {
	if p, err := exec.LookPath(filepath.Base(s.Program)); err == nil {
		return p, nil, nil
	}
	if _, err := os.Stat("/" + s.Program); err == nil {
		return "/" + s.Program, nil, nil
	}
	if _, err := exec.LookPath("apt-get"); err != nil {
		return "", nil, fmt.Errorf("%w: %s is in Debian's %s package", ErrNoAPT, filepath.Base(s.Program), s.Package)
	}
	return fetch(s)
}

// ErrNoAPT: the program is not installed and there is no apt-get to
// fetch it with.
var ErrNoAPT = errors.New("debpkg: not installed, and no apt-get here")

// version is the candidate version of pkg as apt knows it, made fit for
// a directory name; "" when apt knows none.
func version(pkg string) string {
	out, _ := exec.Command("apt-cache", "show", "--no-all-versions", pkg).Output()
	for line := range strings.Lines(string(out)) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "Version:"); ok {
			return strings.NewReplacer(":", "_", "/", "_", "~", "_").Replace(strings.TrimSpace(v))
		}
	}
	return ""
}

// fetch unpacks s's packages into the cache, unless a run before did.
func fetch(s Spec) (string, []string, error) {
	v := version(s.Package)
	if v == "" {
		// A fresh machine may have no package lists yet.
		if out, err := exec.Command("apt-get", "update", "-q").CombinedOutput(); err != nil {
			return "", nil, fmt.Errorf("apt-get update: %v\n%s", err, out)
		}
		if v = version(s.Package); v == "" {
			return "", nil, fmt.Errorf("apt-cache knows no %s package", s.Package)
		}
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	dir := filepath.Join(cache, "agentwire-test", s.Package, v)
	root := filepath.Join(dir, "root")
	bin := filepath.Join(root, filepath.FromSlash(s.Program))
	env := func() []string {
		libs, _ := filepath.Glob(filepath.Join(root, "usr", "lib", "*-linux-gnu"))
		libs = append(libs, filepath.Join(root, "usr", "lib"))
		return []string{"LD_LIBRARY_PATH=" + strings.Join(libs, ":")}
	}
	if _, err := os.Stat(bin); err == nil {
		return bin, env(), nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", nil, err
	}
	tmp, err := os.MkdirTemp(filepath.Dir(dir), "fetch-")
	if err != nil {
		return "", nil, err
	}
	defer os.RemoveAll(tmp)
	pkgs := append([]string{s.Package}, s.Also...)
	cmd := exec.Command("apt-get", append([]string{"download", "-q"}, pkgs...)...)
	cmd.Dir = tmp
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", nil, fmt.Errorf("apt-get download %s: %v\n%s", strings.Join(pkgs, " "), err, out)
	}
	debs, _ := filepath.Glob(filepath.Join(tmp, "*.deb"))
	for _, deb := range debs {
		if out, err := exec.Command("dpkg-deb", "-x", deb, filepath.Join(tmp, "root")).CombinedOutput(); err != nil {
			return "", nil, fmt.Errorf("dpkg-deb -x %s: %v\n%s", filepath.Base(deb), err, out)
		}
	}
	// Into place in one step: a concurrent run finds it whole or not at
	// all (and when one got there first, its copy serves).
	if err := os.Rename(filepath.Join(tmp, "root"), root); err != nil {
		if _, serr := os.Stat(bin); serr != nil {
			return "", nil, fmt.Errorf("putting %s in the cache: %v", s.Package, err)
		}
	}
	if _, err := os.Stat(bin); err != nil {
		return "", nil, fmt.Errorf("no %s in the packages fetched (%s): %v", s.Program, strings.Join(pkgs, " "), err)
	}
	return bin, env(), nil
}
