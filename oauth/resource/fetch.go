package resource

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/agentwire/agentwire/mcp/auth"
)

// MaxResponseBytes bounds every document this package reads from an
// authorization server: metadata, key sets, introspection answers.
const MaxResponseBytes = 1 << 20

// DefaultLeeway is the clock skew allowed when a verifier is not told
// otherwise.
const DefaultLeeway = time.Minute

// DefaultTimeout bounds one request to an authorization server when a
// verifier is not told otherwise.
const DefaultTimeout = 10 * time.Second

// refuse returns an error wrapping auth.ErrInvalidToken, saying why.
func refuse(format string, args ...any) error {
	return fmt.Errorf("%w: %s", auth.ErrInvalidToken, fmt.Sprintf(format, args...))
}

// statusError is an authorization server's answer other than 200, with
// the OAuth error code of its body when it has one (RFC 6749 §5.2).
type statusError struct {
	url    string
	status int
	code   string
}

func (e *statusError) Error() string {
	msg := fmt.Sprintf("resource: %s answered %d %s", e.url, e.status, http.StatusText(e.status))
	if e.code != "" {
		msg += " (" + e.code + ")"
	}
	return msg
}

// doJSON sends req and decodes a 200 answer's JSON body into each of
// dst, reading at most MaxResponseBytes. Any other status is a
// *statusError.
func doJSON(client *http.Client, req *http.Request, dst ...any) error {
	req.Header.Set("Accept", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("resource: %s: %w", req.URL.Redacted(), err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, MaxResponseBytes+1))
	if err != nil {
		return fmt.Errorf("resource: reading %s: %w", req.URL.Redacted(), err)
	}
	if resp.StatusCode != http.StatusOK {
		se := &statusError{url: req.URL.Redacted(), status: resp.StatusCode}
		var oauthErr struct {
			Error string `json:"error"`
		}
		if json.Unmarshal(body, &oauthErr) == nil && len(oauthErr.Error) <= 64 {
			se.code = oauthErr.Error
		}
		return se
	}
	if len(body) > MaxResponseBytes {
		return fmt.Errorf("resource: %s: answer larger than %d bytes", req.URL.Redacted(), MaxResponseBytes)
	}
	for _, d := range dst {
		if err := json.Unmarshal(body, d); err != nil {
			return fmt.Errorf("resource: %s: %w", req.URL.Redacted(), err)
		}
	}
	return nil
}

// getJSON fetches url and decodes its JSON body into dst.
func getJSON(ctx context.Context, client *http.Client, url string, dst any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return fmt.Errorf("resource: %w", err)
	}
	return doJSON(client, req, dst)
}

// scopesOf reads the granted scopes of a token's claims: "scope", a
// space-separated string (RFC 8693 §4.2, RFC 9068 §2.2.3), or, when it
// is absent, "scp", an array of strings (or one string), as some
// servers write it.
func scopesOf(claims map[string]any) []string {
	if s, ok := claims["scope"].(string); ok {
		return strings.Fields(s)
	}
	switch scp := claims["scp"].(type) {
	case string:
		return strings.Fields(scp)
	case []any:
		var out []string
		for _, v := range scp {
			if s, ok := v.(string); ok && s != "" {
				out = append(out, s)
			}
		}
		return out
	}
	return nil
}

// clientIDOf is "client_id" or, failing it, "azp".
func clientIDOf(claims map[string]any) string {
	if s, ok := claims["client_id"].(string); ok && s != "" {
		return s
	}
	s, _ := claims["azp"].(string)
	return s
}

func orDefault[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}
