//go:build unix

package bridge_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/agentwire/agentwire/mcp"
	"github.com/agentwire/agentwire/mcp/bridge"
	"github.com/agentwire/agentwire/mcp/host"
	"github.com/agentwire/agentwire/mcp/internal/mcptest"
	"github.com/agentwire/agentwire/mcp/streamable"
)

// Regression: the bridge sent a request without arguments
// (tools/list, prompts/list, resources/list, ping, or one whose params
// held only the _meta keys the bridge removes for a legacy server) to the
// stdio server as "params":null: joinParams returned a nil RawMessage.
// TypeScript SDK servers drop such a request, and the HTTP client waited
// for its timeout. The recording shows every line the bridge wrote: none
// has params null, and every request was answered.
func TestRegressionBridgeForwardsParamsNull(t *testing.T) {
	for _, era := range []mcp.Eras{mcp.LegacyOnly, mcp.BothEras} {
		t.Run(fmt.Sprint(era)+" server", func(t *testing.T) {
			child, rec := mcptest.RecordedSession(t, era, nil)
			h := streamable.NewHandler(bridge.New(child), nil)
			srv := httptest.NewServer(h)
			defer func() {
				h.Shutdown(context.Background())
				srv.Close()
			}()
			url := srv.URL + "/mcp"
			ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
			defer cancel()

			// agentwire's own clients, both eras.
			for _, mode := range []mcp.Eras{mcp.LegacyOnly, mcp.ModernOnly} {
				sess, err := streamable.Connect(ctx, url, &host.Options{Eras: mode}, nil)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := sess.ListTools(ctx); err != nil {
					t.Errorf("%s ListTools: %v", mode, err)
				}
				if _, err := sess.ListPrompts(ctx); err != nil {
					t.Errorf("%s ListPrompts: %v", mode, err)
				}
				if _, err := sess.ListResources(ctx); err != nil {
					t.Errorf("%s ListResources: %v", mode, err)
				}
				sess.Close()
			}
			// Raw POSTs as other clients write them: no params at all,
			// params {}, params null, and params holding only _meta.
			meta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"raw","version":"1"},"io.modelcontextprotocol/clientCapabilities":{}}`
			for _, tc := range []struct{ version, body string }{
				{"2025-11-25", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`},
				{"2025-11-25", `{"jsonrpc":"2.0","id":2,"method":"prompts/list","params":{}}`},
				{"2025-11-25", `{"jsonrpc":"2.0","id":3,"method":"resources/list","params":{"_meta":{}}}`},
				{"2025-11-25", `{"jsonrpc":"2.0","id":4,"method":"ping"}`},
				{"2025-11-25", `{"jsonrpc":"2.0","id":7,"method":"tools/list","params":null}`}, // read as absent
				{"2026-07-28", `{"jsonrpc":"2.0","id":5,"method":"tools/list","params":{` + meta + `}}`},
				{"2026-07-28", `{"jsonrpc":"2.0","id":6,"method":"resources/templates/list","params":{` + meta + `}}`},
			} {
				req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(tc.body))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Accept", "application/json, text/event-stream")
				req.Header.Set(mcp.HeaderProtocolVersion, tc.version)
				if tc.version == "2026-07-28" {
					var m struct{ Method string }
					json.Unmarshal([]byte(tc.body), &m)
					req.Header.Set(mcp.HeaderMethod, m.Method)
				}
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatalf("%s: %v", tc.body, err)
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK || !bytes.Contains(b, []byte(`"result"`)) {
					t.Errorf("%s: %d %s", tc.body, resp.StatusCode, b)
				}
			}
			lines := rec.Received()
			mcptest.NoParamsNull(t, lines)
			forwarded := 0
			for _, l := range lines {
				for _, m := range []string{"tools/list", "prompts/list", "resources/list", "resources/templates/list"} {
					if strings.Contains(l, fmt.Sprintf(`"method":%q`, m)) {
						forwarded++
					}
				}
			}
			if forwarded < 7 {
				t.Errorf("only %d list requests reached the server:\n%s", forwarded, strings.Join(lines, "\n"))
			}
		})
	}
}
