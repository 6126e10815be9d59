//go:build unix

package process

import (
	"os"
	"strconv"
	"syscall"
)

// signalNames spells signals the way people and protocols name them (ACP's
// terminal exit status, for one); syscall.Signal.String gives the C
// library's description ("killed") instead.
var signalNames = map[syscall.Signal]string{
	syscall.SIGABRT: "SIGABRT", syscall.SIGALRM: "SIGALRM", syscall.SIGBUS: "SIGBUS",
	syscall.SIGCHLD: "SIGCHLD", syscall.SIGCONT: "SIGCONT", syscall.SIGFPE: "SIGFPE",
	syscall.SIGHUP: "SIGHUP", syscall.SIGILL: "SIGILL", syscall.SIGINT: "SIGINT",
	syscall.SIGIO: "SIGIO", syscall.SIGKILL: "SIGKILL", syscall.SIGPIPE: "SIGPIPE",
	syscall.SIGPROF: "SIGPROF", syscall.SIGQUIT: "SIGQUIT", syscall.SIGSEGV: "SIGSEGV",
	syscall.SIGSTOP: "SIGSTOP", syscall.SIGSYS: "SIGSYS", syscall.SIGTERM: "SIGTERM",
	syscall.SIGTRAP: "SIGTRAP", syscall.SIGTSTP: "SIGTSTP", syscall.SIGTTIN: "SIGTTIN",
	syscall.SIGTTOU: "SIGTTOU", syscall.SIGURG: "SIGURG", syscall.SIGUSR1: "SIGUSR1",
	syscall.SIGUSR2: "SIGUSR2", syscall.SIGVTALRM: "SIGVTALRM", syscall.SIGWINCH: "SIGWINCH",
	syscall.SIGXCPU: "SIGXCPU", syscall.SIGXFSZ: "SIGXFSZ",
}

// signalName names the signal that ended the process; "" when it exited.
func signalName(st *os.ProcessState) string {
	ws, ok := st.Sys().(syscall.WaitStatus)
	if !ok || !ws.Signaled() {
		return ""
	}
	if name, ok := signalNames[ws.Signal()]; ok {
		return name
	}
	return "SIG" + strconv.Itoa(int(ws.Signal())) // a real-time signal
}
