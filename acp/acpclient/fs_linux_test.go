package acpclient

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/agentwire/agentwire/jsonrpc"
)

// fsHangBound is the safety net of the tests of things that could block
// forever: a correct implementation answers at once, so it is never reached.
const fsHangBound = 2 * time.Second

// promptly runs op and fails the test if it has not returned within
// fsHangBound.
func promptly(t *testing.T, op func() error) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), fsHangBound)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- op() }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		t.Fatalf("still blocked after %v", fsHangBound)
		return nil
	}
}

func TestRootedFSRefusesAFIFOWithoutBlocking(t *testing.T) {
	x := newFSFixture(t)
	fifo := filepath.Join(x.root, "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	// A FIFO with no writer blocks an ordinary open for reading, and one
	// with no reader an ordinary open for writing.
	err := promptly(t, func() error {
		_, err := RootedFS{}.ReadTextFile(t.Context(), x.s, fifo, 0, 0)
		return err
	})
	checkFSError(t, err, wantNotRegular)
	err = promptly(t, func() error { return RootedFS{}.WriteTextFile(t.Context(), x.s, fifo, "x") })
	checkFSError(t, err, wantNotRegular)

	// With a reader waiting, the write open succeeds; it is still no file.
	r, err := os.OpenFile(fifo, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	err = promptly(t, func() error { return RootedFS{}.WriteTextFile(t.Context(), x.s, fifo, "x") })
	checkFSError(t, err, wantNotRegular)
}

func TestRootedFSRefusesProcFilesReachedThroughAnInRootRelativeSymlink(t *testing.T) {
	if _, err := os.Stat("/proc/self/environ"); err != nil {
		t.Skip("no /proc:", err)
	}
	// A root that contains /proc (here "/"; a chroot or container tree
	// with /proc mounted is the same case): os.Root allows the link, and
	// /proc/self/environ is a regular file holding this process's secrets.
	x := newFSFixture(t)
	rel, err := filepath.Rel(x.root, "/proc/self/environ")
	if err != nil {
		t.Fatal(err)
	}
	x.link(t, rel, "root/env")
	s := &Session{id: "s", cwd: x.root, roots: []string{"/"}}
	want := fsWant{jsonrpc.CodeInvalidParams, "special_file_system"}
	for _, p := range []string{x.root + "/env", "/proc/self/environ", "/proc/self/status", "/sys/kernel/uevent_seqnum"} {
		if _, err := os.Stat(p); err != nil {
			continue
		}
		t.Run(p, func(t *testing.T) {
			got, err := RootedFS{}.ReadTextFile(t.Context(), s, p, 0, 0)
			if got != "" {
				t.Fatalf("served %d bytes of a kernel file", len(got))
			}
			checkFSError(t, err, want)
		})
	}
	// The same root serves ordinary files: the refusal is the file system's.
	if got, err := (RootedFS{}).ReadTextFile(t.Context(), s, x.root+"/a.txt", 0, 0); err != nil || got != "in root\n" {
		t.Fatalf("ordinary file under / = %q, %v", got, err)
	}
	checkFSError(t, RootedFS{}.WriteTextFile(t.Context(), s, "/proc/self/comm", "x"), want)
}
