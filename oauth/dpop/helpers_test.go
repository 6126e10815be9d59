package dpop_test

import (
	"crypto"
	"encoding/base64"
)

const cryptoSHA256 = crypto.SHA256

func b64(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }

func b64dec(s string) ([]byte, error) { return base64.RawURLEncoding.DecodeString(s) }
