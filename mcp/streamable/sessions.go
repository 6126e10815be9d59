package streamable

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/agentwire/agentwire/rpc"
)

// SessionOptions turns on sessions for legacy clients (2025-03-26 ..
// 2025-11-25 Streamable HTTP, "Session Management"): Mcp-Session-Id is
// minted on initialize, the client may open the GET stream for the
// server's own messages, several streams per session each carry a message
// at most once, DELETE ends the session, and, with an event store, a
// dropped stream is resumed with Last-Event-ID. A session is one long-lived
// connection of the backend, as on stdio, so that a legacy
// resources/subscribe, logging/setLevel, list-change notification or
// server request lives as long as the session. The zero value means every
// default; a 2026-07-28 request is served statelessly whatever is set.
type SessionOptions struct {
	// IdleTimeout ends a session that has had no request and no open
	// stream for this long. Default 10 min; a session that has had no
	// request since initialize gets FirstIdleTimeout instead.
	IdleTimeout time.Duration
	// FirstIdleTimeout ends a session that has sent nothing after its
	// initialize (a scanner, a probe, an abandoned connect). Default
	// 60 s, never more than IdleTimeout.
	FirstIdleTimeout time.Duration
	// MaxSessions bounds the live sessions. A new one over the cap makes
	// room by ending the session idle the longest with no open stream and
	// nothing in flight; when there is none, initialize gets 503 with
	// Retry-After: 1. Default 4096.
	MaxSessions int
	// MaxStreamsPerSession bounds one session's open event streams (its
	// GET streams, resumptions included, and the POST responses being
	// streamed); beyond it a GET gets 503 with Retry-After: 1, counted in
	// Stats.SessionStreamsRefused. A GET that takes the standalone stream
	// over from an older one still counts until the older one has ended.
	// Default 16.
	MaxStreamsPerSession int
	// Events keeps the events of the session's streams for resumption.
	// Nil means an in-memory store with its defaults (NewMemoryEvents);
	// NoEvents turns resumability off (no event ids, no priming event).
	Events EventStore
	// Retry is the reconnection delay sent (the SSE retry field) on the
	// priming event of a resumable stream and before the server ends a
	// connection without ending its stream (Shutdown with a Store).
	// Default 1 s. It sets the resume deadline too: a request whose POST
	// connection goes before its answer, its stream resumable, runs on
	// for three times Retry (at least 10 s, at most IdleTimeout) waiting
	// for a GET with Last-Event-ID to take its stream over; then it is
	// cancelled, as notifications/cancelled would, logged once per burst,
	// and no longer keeps its session busy (its MaxInFlight place is its
	// handler's until the handler returns, which the cancellation bounds).
	Retry time.Duration
	// Store, when set, shares sessions across a fleet of instances behind
	// one load balancer: a request for a session another instance made
	// (or one that stopped) is served here after the session is restored
	// from its record (SessionRecord.Restore fed to a new connection, the
	// answers dropped); the record is loaded before anything is made, so
	// an unknown id costs one Load, and a Load that fails for another
	// reason than ErrUnknownSession is 503 with Retry-After: 1 (counted in
	// Stats.StoreErrors), never 404, which would make the client drop a
	// session that lives on. This instance then holds it, and one that
	// learns that another holds its session (or that it has ended) drops
	// its copy: at once when Store is a SessionWatcher, else (and when a
	// watcher's message is lost) when it touches the record, at most
	// every quarter of IdleTimeout. Shutdown then keeps the
	// records and ends streams with a retry field, so that clients resume
	// elsewhere. Use it with an Events store the fleet shares too, an
	// EventFollower so that a stream whose request runs on another
	// instance can be followed. A client's answer to a server request
	// made by another instance is not relayed to it. Nil: sessions live
	// in this process only.
	Store SessionStore
	// Instance names this process in Store's records. Default: random.
	Instance string
}

// NoEvents is an EventStore that keeps nothing: a session's streams are
// not resumable, and no event ids or priming events are sent.
var NoEvents EventStore = noEvents{}

// EventStore keeps the events of resumable SSE streams (2025-11-25
// transports, "Resumability and Redelivery"). Event ids are the store's:
// opaque to clients, unique within their session, and they name their
// stream, so that a GET with Last-Event-ID resumes exactly the stream that
// dropped. Stream ids are the handler's; they are unique within a session.
// Methods are called concurrently, for many sessions at once; a method
// that fails returns an error wrapping the cause and the handler serves on
// without resumability for that message (it is still delivered live).
type EventStore interface {
	// Append records data (one encoded JSON-RPC message; nil for a
	// priming event, which is never replayed) as the next event of stream
	// in session and returns its id.
	Append(ctx context.Context, session, stream string, data []byte) (id string, err error)
	// Replay calls send, in order, for each event of lastID's stream after
	// lastID (priming events skipped), and returns that stream's id. It
	// returns an error wrapping ErrUnknownEvent when lastID is not an
	// event of session, or when events after it are gone (trimmed or
	// expired): a gap the client must hear about, never a silent loss. An
	// error from send ends the replay and is returned.
	Replay(ctx context.Context, session, lastID string, send func(id string, data []byte) error) (stream string, err error)
	// EndStream says that stream will carry nothing more and nobody will
	// resume it (its request was cancelled, or left unanswered): its
	// events may be forgotten. A stream whose response has been stored is
	// not ended: its connection may break after the response was written,
	// before the client read it, and the client resumes it; it is left to
	// the store's retention (MemoryEvents drops answered streams first).
	EndStream(ctx context.Context, session, stream string) error
	// EndSession forgets every stream of session.
	EndSession(ctx context.Context, session string) error
}

// EventFollower is an EventStore whose streams other processes append to
// (a fleet's shared store). Follow calls send for each event of stream
// after afterID as it is appended, until send returns an error (which
// Follow returns), the stream's response has been sent (nil), or ctx
// ends (ctx's error). The handler uses it to resume, on this instance, a
// stream whose request is still running on another.
type EventFollower interface {
	EventStore
	Follow(ctx context.Context, session, stream, afterID string, send func(id string, data []byte) error) error
}

// ErrUnknownEvent is wrapped by EventStore.Replay when Last-Event-ID names
// no event of the session, or one whose successors are gone.
var ErrUnknownEvent = errors.New("mcp: unknown or expired Last-Event-ID")

// ErrUnknownSession is wrapped by SessionStore.Load when there is no such
// session (never made, ended, or expired).
var ErrUnknownSession = errors.New("mcp: unknown session")

// SessionStore shares legacy sessions across instances (SessionOptions.
// Store). The handler saves a session's record when it is made and when
// its restorable state changes, touches it while it is used, and deletes
// it when the session ends; another instance loads it to take the session
// over.
type SessionStore interface {
	// Save creates or replaces rec, to expire after ttl without a Touch.
	Save(ctx context.Context, rec *SessionRecord, ttl time.Duration) error
	// Load returns id's record, or an error wrapping ErrUnknownSession.
	Load(ctx context.Context, id string) (*SessionRecord, error)
	// Touch extends id's life by ttl and returns the instance that holds
	// it now (SessionRecord.Holder), so that a holder that has been taken
	// over learns it; an error wrapping ErrUnknownSession when it is gone.
	Touch(ctx context.Context, id string, ttl time.Duration) (holder string, err error)
	// Delete forgets id. Deleting an unknown session is not an error.
	Delete(ctx context.Context, id string) error
}

// SessionWatcher is a SessionStore that tells every instance when a
// session changes hands or ends, so that an instance drops its copy at
// once rather than at its next Touch. The handler watches from NewHandler
// until Shutdown; on a change of a session it holds, it touches the
// record (the truth: a message may come late) and drops its copy when
// another instance holds it or it has gone. What a watcher tells is told
// at most once (a message lost while its connection is down is not sent
// again): the Touch every quarter of IdleTimeout stays the fallback.
type SessionWatcher interface {
	SessionStore
	// WatchSessions calls f for each session another instance took over
	// (holder: the new holder) or ended (holder ""), until stop is called
	// or ctx ends. f must not block.
	WatchSessions(ctx context.Context, f func(id, holder string)) (stop func(), err error)
}

// SessionRecord is what a SessionStore keeps of a session: enough to
// check who may use it and to rebuild its backend connection elsewhere.
type SessionRecord struct {
	// ID is the Mcp-Session-Id.
	ID string `json:"id"`
	// Owner is the identity the session is bound to ("" when the
	// endpoint does not verify identities).
	Owner string `json:"owner,omitempty"`
	// Version is the protocol version initialize negotiated.
	Version string `json:"version"`
	// Holder is the instance that serves the session now.
	Holder string `json:"holder"`
	// Restore is the client's messages that built the session's state, in
	// order (initialize, notifications/initialized, the last
	// logging/setLevel, each live resources/subscribe): replayed into a
	// new connection to restore it, their answers dropped. A request is
	// kept once it has been answered successfully, re-encoded with only
	// what restoring needs (initialize's protocolVersion, capabilities and
	// clientInfo; a level; a uri) under an id of the record's. It is
	// bounded: at most 1024 subscriptions and 256 KiB in all; what would
	// overflow it is left out and logged, and a session whose initialize
	// alone is over 64 KiB has no record (another instance answers 404).
	Restore []json.RawMessage `json:"restore"`
}

// SessionBackend is a Backend that can serve legacy sessions: one
// long-lived handler per session, which keeps the session's state
// (negotiated version, client capabilities, log level, subscriptions) as
// a stdio connection's handler does. *server.Server and *bridge.Bridge
// are SessionBackends. NewHandler panics when Options.Sessions or
// Options.SSE is set and the backend is not one.
type SessionBackend interface {
	Backend
	// SessionHandler returns the handler of one new session's connection.
	SessionHandler() rpc.Handler
}

// SSEOptions serves the 2024-11-05 HTTP+SSE transport beside the
// endpoint, for clients that predate Streamable HTTP: a GET on Path opens
// an event stream whose first event (endpoint) names the URL to POST
// messages to; every answer and server message travels on that stream.
// Such a session is legacy only: a 2026-07-28 request on it gets -32022.
// The zero value means the defaults.
type SSEOptions struct {
	// Path is the event stream's path. Default "/sse".
	Path string
	// MessagePath is the path messages are POSTed to (with the session in
	// its sessionId query parameter). Default "/messages".
	MessagePath string
}

type noEvents struct{}

func (noEvents) Append(context.Context, string, string, []byte) (string, error) { return "", nil }
func (noEvents) Replay(context.Context, string, string, func(string, []byte) error) (string, error) {
	return "", ErrUnknownEvent
}
func (noEvents) EndStream(context.Context, string, string) error { return nil }
func (noEvents) EndSession(context.Context, string) error        { return nil }
