//go:build !unix

package main

import "os/exec"

// Without process groups the server alone is reached: the terminate step
// only waits, and the last one kills the process.
func ownGroup(cmd *exec.Cmd) {}

func terminateGroup(cmd *exec.Cmd) {}

func killGroup(cmd *exec.Cmd) { cmd.Process.Kill() }
