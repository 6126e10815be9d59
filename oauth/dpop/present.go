package dpop

import (
	"net/http"
	"strings"
)

// Present sets req's credentials to an access token of type tokenType: a
// DPoP-bound token (type "DPoP") with a key goes as "Authorization: DPoP
// TOKEN" with a fresh proof (Key.Sign, its ath the token's hash); any
// other as "Authorization: Bearer TOKEN", and without a DPoP header. Both
// the authorization code and the machine Authorizers present tokens so.
func Present(req *http.Request, key *Key, tokenType, accessToken string) error {
	if key != nil && strings.EqualFold(tokenType, "DPoP") {
		req.Header.Set("Authorization", "DPoP "+accessToken)
		return key.Sign(req, accessToken)
	}
	req.Header.Del("DPoP")
	req.Header.Set("Authorization", "Bearer "+accessToken)
	return nil
}

// PresentedToken returns the access token of req's Authorization header,
// of the Bearer or the DPoP scheme, or "" when it has none: what a
// refused request was sent with.
func PresentedToken(req *http.Request) string {
	scheme, tok, ok := strings.Cut(req.Header.Get("Authorization"), " ")
	if !ok || (!strings.EqualFold(scheme, "Bearer") && !strings.EqualFold(scheme, "DPoP")) {
		return ""
	}
	return strings.TrimSpace(tok)
}
