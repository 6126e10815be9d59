package telemetry_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net/http/httptest"
	"testing"

	"github.com/agentwire/agentwire/mcp"
	"github.com/agentwire/agentwire/mcp/host"
	"github.com/agentwire/agentwire/mcp/server"
	"github.com/agentwire/agentwire/mcp/streamable"
	"github.com/agentwire/agentwire/rpc"
	"github.com/agentwire/agentwire/telemetry"
	"go.uber.org/goleak"
)

// A legacy Streamable HTTP session's requests carry the digest of its
// Mcp-Session-Id as mcp.session.id (the first 16 bytes of its SHA-256, in
// hex), never the id itself, a bearer capability; a stateless request
// carries none. Regression: the raw id was recorded.
func TestServerSpanNamesTheHTTPSession(t *testing.T) {
	defer goleak.VerifyNone(t)
	sr, tp := recorder(t)
	o := &telemetry.Options{TracerProvider: tp, Transport: telemetry.TCP, HTTP: true}
	srv := server.New(mcp.Implementation{Name: "s", Version: "1"}, &server.Options{Eras: mcp.LegacyOnly})
	var sid string // the session's id, as the handler sees it
	srv.AddTool(mcp.Tool{Name: "echo"}, func(ctx context.Context, _ *server.ToolRequest) (*mcp.ToolResult, error) {
		sid = streamable.SessionIDFrom(ctx)
		return mcp.TextResult("ok"), nil
	})
	h := streamable.NewHandler(srv, &streamable.Options{
		Sessions: &streamable.SessionOptions{},
		Conn:     &rpc.Options{Middleware: []rpc.Middleware{telemetry.ServerMiddleware(o)}},
	})
	web := httptest.NewServer(h)
	defer web.Close()
	defer h.Shutdown(context.Background())

	sess, err := streamable.Connect(t.Context(), web.URL+"/mcp", &host.Options{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sess.CallTool(t.Context(), "echo", nil); err != nil {
		t.Fatal(err)
	}
	sess.Close()
	var call string
	for _, s := range sr.Ended() {
		if s.Name() == "tools/call echo" {
			call = attrsOf(s)["mcp.session.id"]
		}
	}
	sum := sha256.Sum256([]byte(sid))
	if want := hex.EncodeToString(sum[:16]); sid == "" || call != want {
		t.Fatalf("tools/call in session %q has mcp.session.id %q, want its digest %q", sid, call, want)
	}

	// The same server without sessions: stateless, no id.
	sr2, tp2 := recorder(t)
	o2 := &telemetry.Options{TracerProvider: tp2, Transport: telemetry.TCP, HTTP: true}
	dual := server.New(mcp.Implementation{Name: "s", Version: "1"}, nil)
	dual.AddTool(mcp.Tool{Name: "echo"}, func(context.Context, *server.ToolRequest) (*mcp.ToolResult, error) {
		return mcp.TextResult("ok"), nil
	})
	h2 := streamable.NewHandler(dual, &streamable.Options{Conn: &rpc.Options{Middleware: []rpc.Middleware{telemetry.ServerMiddleware(o2)}}})
	web2 := httptest.NewServer(h2)
	defer web2.Close()
	defer h2.Shutdown(context.Background())
	sess2, err := streamable.Connect(t.Context(), web2.URL+"/mcp", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer sess2.Close()
	if _, err := sess2.CallTool(t.Context(), "echo", nil); err != nil {
		t.Fatal(err)
	}
	for _, s := range sr2.Ended() {
		wantAttrs(t, s, nil, "mcp.session.id")
	}
}
