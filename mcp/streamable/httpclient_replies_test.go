package streamable_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/agentwire/agentwire/mcp"
	"github.com/agentwire/agentwire/mcp/host"
	"github.com/agentwire/agentwire/mcp/streamable"
)

// A legacy Streamable HTTP server's requests are bounded as an HTTP+SSE
// server's are: 64 pings on the standalone stream get at most
// ClientOptions.MaxServerRequests answers in flight at once on goroutines
// of their own, plus the one the stream's reader answers itself while
// they are all taken, and every one is answered in the end. (A goroutine
// and a POST each, without a bound, let a server make the client start as
// many as it liked.)
func TestHTTPClientAnswersAtMostMaxServerRequestsOfALegacyServersRequestsAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		answers := newAnswerCounter()
		const n = 64
		var events []string
		for i := range n {
			events = append(events, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"ping"}`, i))
		}
		h := legacyServerSending(events, func(w http.ResponseWriter, _ []byte) { answers.take(w) })
		sess, err := streamable.Connect(t.Context(), "http://legacy.test/mcp", nil, &streamable.ClientOptions{Client: pipeClient(h), MaxServerRequests: 4})
		if err != nil {
			t.Fatal(err)
		}
		defer sess.Close()
		synctest.Wait()
		if peak, _ := answers.counts(); peak != 4+1 {
			t.Errorf("%d answers in flight at once, want 4 and the reader's", peak)
		}
		close(answers.release)
		synctest.Wait()
		if peak, served := answers.counts(); peak != 4+1 || served != n {
			t.Errorf("%d answers in flight at most, %d answered; want 4+1 and %d", peak, served, n)
		}
	})
}

// While every place for the server's requests is taken by answers that
// wait (an elicitation waiting on a person), the next request is refused
// at once with -32000 by the stream's reader, instead of stopping the
// stream until a place is free: the stream may carry what the waiting
// answers need (regression: the reader waited for a place, and a stream
// could stop behind answers that were waiting on it).
func TestHTTPClientRefusesTheServersRequestsBeyondMaxServerRequestsAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		refusals := make(chan string, 4)
		var events []string
		for i := range 3 {
			events = append(events, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"elicitation/create","params":{"message":"?","requestedSchema":{"type":"object"}}}`, i))
		}
		h := legacyServerSending(events, func(w http.ResponseWriter, body []byte) {
			refusals <- string(body)
			w.WriteHeader(http.StatusAccepted)
		})
		person := make(chan struct{})
		sess, err := streamable.Connect(t.Context(), "http://legacy.test/mcp", &host.Options{
			Capabilities: map[string]any{"elicitation": map[string]any{}},
			OnInput: func(ctx context.Context, _ mcp.InputRequest) (any, error) {
				select {
				case <-person:
				case <-ctx.Done():
				}
				return map[string]any{"action": "decline"}, nil
			}}, &streamable.ClientOptions{Client: pipeClient(h), MaxServerRequests: 2})
		if err != nil {
			t.Fatal(err)
		}
		defer sess.Close()
		synctest.Wait()
		select {
		case got := <-refusals:
			if !strings.Contains(got, `"id":2`) || !strings.Contains(got, `"code":-32000`) {
				t.Errorf("the third request's answer: %s, want -32000 for id 2", got)
			}
		default:
			t.Fatal("the request beyond MaxServerRequests was not answered while the others waited")
		}
		close(person)
		synctest.Wait()
		if n := len(refusals); n != 2 {
			t.Errorf("%d more answers once the person answered, want 2", n)
		}
	})
}

// legacyServerSending is a 2025-11-25 Streamable HTTP server that refuses
// server/discover (400), mints a session on initialize, sends events (each
// a JSON-RPC message) on the standalone GET stream, accepts the client's
// notifications (202), and hands each answer the client POSTs to answer.
func legacyServerSending(events []string, answer func(w http.ResponseWriter, body []byte)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet {
			w.Header().Set("Content-Type", "text/event-stream")
			w.(http.Flusher).Flush()
			for _, e := range events {
				fmt.Fprintf(w, "event: message\ndata: %s\n\n", e)
				w.(http.Flusher).Flush()
			}
			<-r.Context().Done()
			return
		}
		if r.Method != http.MethodPost {
			return
		}
		b, _ := io.ReadAll(r.Body)
		var m sseMsg
		json.Unmarshal(b, &m)
		switch {
		case m.Method == "server/discover":
			w.WriteHeader(http.StatusBadRequest)
		case m.Method == "initialize":
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set(mcp.HeaderSessionID, "sess-1")
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"protocolVersion":"2025-11-25","capabilities":{},"serverInfo":{"name":"legacy","version":"1"}}}`, m.ID)
		case m.Method != "":
			w.WriteHeader(http.StatusAccepted)
		default:
			answer(w, b)
		}
	})
}
