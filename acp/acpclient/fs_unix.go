//go:build unix

package acpclient

import (
	"io/fs"
	"syscall"
)

// linkCount returns the file's number of hard links.
func linkCount(fi fs.FileInfo) uint64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return uint64(st.Nlink)
	}
	return 1
}
