//go:build !linux && !darwin && !freebsd && !netbsd && !openbsd && !dragonfly

package main

import "os"

// isTerminal is false where agentwire cannot tell: answers then come from
// --input or --input-file.
func isTerminal(f *os.File) bool { return false }
