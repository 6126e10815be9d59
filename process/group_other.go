//go:build !unix

package process

import (
	"os/exec"
)

// On Windows there is no process group to signal and no SIGTERM: the
// terminate step only waits, and the last step is TerminateProcess
// (os.Process.Kill). Children the server started are not reached; a Job
// Object would be needed for that.
func setGroup(cmd *exec.Cmd) {}

func terminateGroup(cmd *exec.Cmd) error { return nil }

func killGroup(cmd *exec.Cmd) error { return cmd.Process.Kill() }
