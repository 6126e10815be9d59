//go:build !unix

package process

import "os"

// Without POSIX signals a process only ever exits with a code.
func signalName(*os.ProcessState) string { return "" }
