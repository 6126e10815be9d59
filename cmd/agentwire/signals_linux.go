package main

import (
	"os"
	"strconv"
	"strings"
	"syscall"
)

// killChildGroups kills the process group of every child of ours that
// leads one: the servers this command started (they run in groups of
// their own). Linux lists a process's children in /proc.
func killChildGroups() {
	tasks, _ := os.ReadDir("/proc/self/task")
	for _, t := range tasks {
		b, err := os.ReadFile("/proc/self/task/" + t.Name() + "/children")
		if err != nil {
			continue
		}
		for _, f := range strings.Fields(string(b)) {
			pid, err := strconv.Atoi(f)
			if err != nil || pid <= 1 {
				continue
			}
			if pgid, err := syscall.Getpgid(pid); err == nil && pgid == pid {
				syscall.Kill(-pid, syscall.SIGKILL)
			}
		}
	}
}
