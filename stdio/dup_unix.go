//go:build unix && !linux

package stdio

import "syscall"

func dupTo(oldfd, newfd int) error { return syscall.Dup2(oldfd, newfd) }
