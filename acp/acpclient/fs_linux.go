package acpclient

import (
	"os"
	"syscall"
)

// specialFS reports whether file lies on one of the kernel's pseudo file
// systems. It asks the open file (fstatfs), not a path, so it holds wherever
// such a file system is mounted and whatever links led there. A file whose
// file system cannot be told is refused too.
func specialFS(file *os.File) bool {
	rc, err := file.SyscallConn()
	if err != nil {
		return true
	}
	var st syscall.Statfs_t
	var serr error
	if err := rc.Control(func(fd uintptr) { serr = syscall.Fstatfs(int(fd), &st) }); err != nil || serr != nil {
		return true
	}
	// Magic numbers (statfs f_type, linux/magic.h) of the kernel's pseudo file
	// systems. Their files look regular but are views of the kernel and of
	// processes: /proc/self/environ is this process's environment, with its
	// secrets, and writes under /sys change the machine.
	specialFSTypes := [...]uint32{
		0x9fa0,     // proc
		0x62656572, // sysfs
		0x64626720, // debugfs
		0x74726163, // tracefs
		0x73636673, // securityfs
		0x27e0eb,   // cgroup
		0x63677270, // cgroup2
		0xcafe4a11, // bpf
		0xde5e81e4, // efivarfs
		0x62656570, // configfs
	}
	t := uint32(st.Type)
	for _, m := range specialFSTypes {
		if t == m {
			return true
		}
	}
	return false
}
