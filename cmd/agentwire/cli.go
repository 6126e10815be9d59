package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"runtime/debug"
	"strings"
	"unicode/utf8"
)

// Exit statuses, the same in every command (documented in usage and the
// README).
const (
	exitOK = 0
	// exitFailure: the command ran and what it reports failed: a JSON-RPC
	// error (call), a failed check (check), a server that could not start
	// or listen (serve, bridge).
	exitFailure = 1
	// exitUsage: bad flags or arguments, in every command. call also
	// exits 2 on a transport failure (the server could not be started or
	// reached, was lost, or did not answer in time).
	exitUsage     = 2
	exitTransport = 2
	// exitInput: call only: the server asked for input (elicitation,
	// sampling, roots) that --input, --input-file or a terminal did not
	// answer.
	exitInput = 3
)

// Synopses: the usage line each command prints with --help and after a
// usage error.
const (
	callSynopsis = `usage: agentwire call [flags] -- CMD [ARGS...]
       agentwire call [flags] --connect unix:PATH|tcp:HOST:PORT
       agentwire call [flags] --url URL
`
	checkSynopsis = `usage: agentwire check [flags] -- CMD [ARGS...]
       agentwire check --url URL [--token T | --oauth] [flags]
`
	tapSynopsis = `usage: agentwire tap [--log FILE] [--grace D] -- CMD [ARGS...]
`
	bridgeSynopsis = `usage: agentwire bridge --http [HOST:]PORT [HTTP flags] -- CMD [ARGS...]
       agentwire bridge --http [HOST:]PORT [HTTP flags] --url URL
`
	serveSynopsis = `usage: agentwire serve echo|mcp|acp [flags]
`
	demoSynopsis = `usage: agentwire demo [wire]
`
)

// newFlags is a flag set that prints nothing by itself: parseFlags says
// what is wrong in one line, or prints the help on request.
func newFlags(name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	return fs
}

// parseFlags parses args; when done, the command returns code at once:
// 0 after --help (the help went to stdout), exitUsage after a bad flag
// (one line and the synopsis went to stderr).
func parseFlags(fs *flag.FlagSet, args []string, synopsis string, stdout, stderr io.Writer) (code int, done bool) {
	err := fs.Parse(args)
	if err == nil {
		return 0, false
	}
	if errors.Is(err, flag.ErrHelp) {
		printHelp(stdout, fs, synopsis)
		return exitOK, true
	}
	return usageError(stderr, fs.Name(), synopsis, "%v", err), true
}

// printHelp writes the synopsis and the flags.
func printHelp(w io.Writer, fs *flag.FlagSet, synopsis string) {
	fmt.Fprint(w, synopsis)
	n := 0
	fs.VisitAll(func(*flag.Flag) { n++ })
	if n > 0 {
		fmt.Fprintln(w, "\nFlags:")
		fs.SetOutput(w)
		fs.PrintDefaults()
		fs.SetOutput(io.Discard)
	}
	fmt.Fprintf(w, "\nExit status: %s\n", exitStatuses[strings.Fields(fs.Name())[0]])
}

// exitStatuses are the exit statuses of each command, as its --help says.
var exitStatuses = map[string]string{
	"call": "0 result, 1 JSON-RPC error, 2 usage error or transport failure,\n" +
		"3 the server asked for input that was not given, 128+N after signal N (130 SIGINT, 143 SIGTERM).",
	"check": "0 passed, 1 a check failed, 2 usage error, 128+N after signal N (130 SIGINT).",
	"acp": "0 end_turn (or the interactive session ended), 1 JSON-RPC error from the agent,\n" +
		"2 usage error, transport failure, no reply within --timeout and --cancel-grace, or a protocol version mismatch,\n" +
		"3 the agent requires authentication, 4 max_tokens, 5 max_turn_requests, 6 refusal,\n" +
		"7 cancelled without a signal, 8 unknown stop reason, 128+N after signal N (130 SIGINT, 143 SIGTERM).",
	"tap":    "the server's (128+N when signal N ended it), 2 usage error, 127 CMD could not be started,\n128+N after signal N to the tap (130 SIGINT).",
	"bridge": "0 stopped by SIGINT/SIGTERM, 1 the server or the listener failed, 2 usage error.",
	"serve":  "0 stopped (end of input, or SIGINT/SIGTERM with --listen/--http), 1 failure, 2 usage error.",
	"demo":   "0 done, 1 a step failed, 2 usage error.",
}

// usageError reports a usage error in one line, followed by the synopsis,
// and returns exitUsage.
func usageError(stderr io.Writer, name, synopsis, format string, args ...any) int {
	fmt.Fprintf(stderr, "agentwire %s: %s\n%s(agentwire %s --help for the flags)\n", name, fmt.Sprintf(format, args...), synopsis, name)
	return exitUsage
}

// Bounds of an error message printed to stderr: a failing server's stderr
// tail is shown in part, each line cut to a terminal's width or so.
const (
	maxErrLines    = 16
	maxErrLineSize = 240
)

// boundText keeps the first lines and the last lines of s when it has too
// many, and cuts every line at maxErrLineSize bytes (on a rune boundary).
func boundText(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > maxErrLines {
		head, tail := 6, maxErrLines-7
		omitted := len(lines) - head - tail
		lines = append(append(lines[:head:head], fmt.Sprintf("[… %d lines omitted …]", omitted)), lines[len(lines)-tail:]...)
	}
	for i, l := range lines {
		lines[i] = cutLine(l, maxErrLineSize)
	}
	return strings.Join(lines, "\n")
}

// cutLine cuts l to at most n bytes, on a rune boundary, marking the cut.
func cutLine(l string, n int) string {
	if len(l) <= n {
		return l
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(l[cut]) {
		cut--
	}
	return l[:cut] + fmt.Sprintf("[… %d bytes cut]", len(l)-cut)
}

// version is agentwire's version: the module version it was built at, or
// the VCS revision of a build from a working tree.
func version() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	v := bi.Main.Version
	var rev, modified string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				modified = "+modified"
			}
		}
	}
	if v == "" || v == "(devel)" {
		v = "devel"
		if rev != "" {
			if len(rev) > 12 {
				rev = rev[:12]
			}
			v += " " + rev + modified
		}
	}
	return v + " " + bi.GoVersion
}
