package acp

import "os"

// baseEnv is the environment a bridged server inherits before the
// declaration's own variables.
func baseEnv() []string { return os.Environ() }
