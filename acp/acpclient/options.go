package acpclient

import (
	"log/slog"
	"time"

	"github.com/agentwire/agentwire/acp"
	"github.com/agentwire/agentwire/client"
)

// Defaults of Options and TerminalOptions.
const (
	DefaultCancelGrace       = 5 * time.Second
	DefaultInitTimeout       = 30 * time.Second
	DefaultMaxTerminals      = 16
	DefaultMaxTerminalOutput = 1 << 20
	DefaultKillGrace         = 2 * time.Second
	DefaultMaxReadBytes      = 8 << 20
	DefaultMaxMCPConnections = 32
	// DefaultMaxPendingPermissions bounds the questions being decided at
	// once (each runs its policy on a goroutine).
	DefaultMaxPendingPermissions = 64
	// DefaultMaxQueuedUpdates and DefaultMaxQueuedBytes bound what waits
	// behind a slow update handler before reading from the agent pauses.
	DefaultMaxQueuedUpdates = 1024
	DefaultMaxQueuedBytes   = 16 << 20
)

// Options configures a client connection. The zero value (or nil) means the
// documented defaults: files served from each session's roots (read and
// write), no terminals, every permission refused.
type Options struct {
	// Info is sent as clientInfo. Default {Name: "agentwire", Version: "dev"}.
	Info acp.Implementation
	// Logger receives diagnostics. Nil means slog.Default().
	Logger *slog.Logger

	// FS serves fs/read_text_file, and fs/write_text_file when it also
	// implements FileWriter. Nil means RootedFS{} (confined to each
	// session's roots, read and write); NoFiles declares no file system.
	FS FileSystem
	// Terminals, when set, declares and serves terminal/*: commands run in
	// their own process groups (see TerminalOptions). Nil declares none.
	Terminals *TerminalOptions
	// Permissions answers session/request_permission. Nil means DenyAll.
	Permissions PermissionPolicy
	// Updates receives every session/update of every session, in receive
	// order, unless the session has its own handler (SessionConfig.Updates).
	// Updates for a session this connection does not know arrive here
	// with a nil Session. Nil drops them (session state is still kept).
	Updates UpdateHandler
	// TerminalAuth declares clientCapabilities.auth.terminal: the caller
	// can run an agent's "terminal" auth method on a terminal.
	TerminalAuth bool

	// CancelGrace is how long a cancelled Prompt waits for the agent's
	// "cancelled" answer before it abandons the request ($/cancel_request).
	// Default 5 s.
	CancelGrace time.Duration
	// InitTimeout bounds initialize in Start and New. Default 30 s.
	InitTimeout time.Duration
	// IgnoreCapabilities sends methods the agent did not advertise anyway
	// (a conformance checker's probes). Default: such calls fail locally
	// with a *NotSupportedError and nothing is sent.
	IgnoreCapabilities bool
	// MaxQueuedUpdates and MaxQueuedBytes bound the messages held behind a
	// slow update handler; past them reading from the agent pauses (the
	// agent's writes block) instead of buffering more. Defaults 1024 and
	// 16 MiB.
	MaxQueuedUpdates int
	MaxQueuedBytes   int
	// MaxMCPConnections bounds the connections an agent may open to the MCP
	// servers offered with SessionConfig.ProvideMCP. Default 32.
	MaxMCPConnections int
	// MaxPendingPermissions bounds the permission questions being decided
	// at once; past it a question is refused without asking (DenyAll's
	// choice), counted in Stats.Permissions.Overflow and logged. Default 64.
	MaxPendingPermissions int

	// Transport configures the underlying client: Process (grace of the
	// shutdown ladder, stderr), Restart, OnViolation, Strict,
	// MaxMessageBytes. Its Handler, Admit, Cancel and InboundCancel are
	// set by this package.
	Transport *client.Options
}

// TerminalOptions configures the terminal runtime. The zero value means the
// defaults.
type TerminalOptions struct {
	// MaxLive bounds the terminals not yet released, per connection; the
	// excess gets -33000 with data.reason "too_many_terminals". Default 16.
	MaxLive int
	// MaxOutputBytes caps the output kept per terminal, whatever the
	// agent's outputByteLimit asks. Default 1 MiB.
	MaxOutputBytes int
	// KillGrace is the wait between SIGTERM and SIGKILL to a terminal's
	// process group on terminal/kill, release and close. Default 2 s.
	KillGrace time.Duration
	// Env returns the base environment of a session's commands (the
	// request's entries override it). Nil means os.Environ().
	Env func(s *Session) []string
	// AllowCwdOutsideRoots lets terminal/create run in a directory outside
	// the session's roots. Default: refused with -32602. A terminal is not
	// a sandbox either way: the command may change directory.
	AllowCwdOutsideRoots bool
}
