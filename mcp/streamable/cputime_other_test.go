//go:build !unix

package streamable_test

import "time"

func processCPU() (time.Duration, bool) { return 0, false }
