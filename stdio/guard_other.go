//go:build !unix

package stdio

import "os"

// GuardStdout returns os.Stdout unchanged on systems without dup2: the
// guard of guarantee C9 is a Unix facility here. Handlers must still never write
// to stdout.
func GuardStdout() (*os.File, error) { return os.Stdout, nil }
