package streamable_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/agentwire/agentwire/mcp"
	"github.com/agentwire/agentwire/mcp/host"
	"github.com/agentwire/agentwire/mcp/streamable"
)

// The defect: a legacy server asked something on a call's event stream
// (elicitation/create here) and answered 400 to the POST that carried the
// client's answer, as a stateless mcp-go server does (it has no session
// to route the answer to). The client dropped that status, and the call
// waited for a result that would never come until its deadline. It now
// fails at once with an *AnswerRefusedError carrying the 400, whether the
// answer came from OnInput or was the client's own -32601, and is not
// sent again.
func TestRegressionHTTPRefusedAnswerFailsTheCall(t *testing.T) {
	for _, withInput := range []bool{true, false} {
		t.Run(fmt.Sprintf("OnInput %v", withInput), func(t *testing.T) {
			calls := make(chan struct{}, 10)
			answers := make(chan rcMsg, 10)
			srv := rcLegacyServer(t, func(w http.ResponseWriter, r *http.Request, id json.RawMessage) {
				fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"tools":[]}}`, id)
			}, func(w http.ResponseWriter, r *http.Request, m rcMsg) {
				switch {
				case m.Method == "tools/call":
					calls <- struct{}{}
					w.Header().Set("Content-Type", "text/event-stream")
					io.WriteString(w, `data: {"jsonrpc":"2.0","id":7,"method":"elicitation/create","params":{"mode":"form","message":"name?","requestedSchema":{"type":"object","properties":{}}}}`+"\n\n")
					w.(http.Flusher).Flush()
					select { // the result never comes
					case <-r.Context().Done():
					case <-time.After(30 * time.Second):
					}
				case m.Method == "" && (m.Result != nil || m.Error != nil):
					answers <- m
					w.Header().Set("Content-Type", "application/json")
					w.WriteHeader(http.StatusBadRequest)
					io.WriteString(w, `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"no session to deliver the response to"}}`)
				default:
					w.WriteHeader(http.StatusAccepted)
				}
			})
			defer srv.Close()
			opts := &host.Options{Eras: mcp.LegacyOnly}
			if withInput {
				opts.OnInput = func(context.Context, mcp.InputRequest) (any, error) {
					return map[string]any{"action": "accept", "content": map[string]any{}}, nil
				}
			}
			sess, err := streamable.Connect(t.Context(), srv.URL, opts, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer sess.Close()
			ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
			defer cancel()
			start := time.Now()
			_, err = sess.CallTool(ctx, "ask", nil, host.Retryable())
			var refused *streamable.AnswerRefusedError
			var status *streamable.HTTPStatusError
			if !errors.As(err, &refused) || refused.Method != "elicitation/create" ||
				!errors.As(err, &status) || status.StatusCode != http.StatusBadRequest {
				t.Fatalf("err = %v (%T)", err, err)
			}
			if d := time.Since(start); d > 5*time.Second {
				t.Errorf("the call failed after %v", d)
			}
			if !strings.Contains(err.Error(), "400") {
				t.Errorf("the error does not say the status: %v", err)
			}
			if m := <-answers; (m.Result != nil) != withInput || string(m.ID) != "7" {
				t.Errorf("the answer posted: id %s result %s error %s", m.ID, m.Result, m.Error)
			}
			if n := len(calls); n != 1 {
				t.Errorf("the call was sent %d times", n)
			}
		})
	}
}
