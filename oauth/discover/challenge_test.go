package discover_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/agentwire/agentwire/oauth/discover"
)

func TestChallengesAreParsedAsServersSendThem(t *testing.T) {
	cs, err := discover.ParseChallenges([]string{
		`Bearer error="insufficient_scope", scope="mcp:write mcp:basic", resource_metadata="http://localhost:3000/.well-known/oauth-protected-resource/mcp"`,
		`DPoP algs="ES256 EdDSA", Basic realm="a, b \"c\""`,
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(cs) != 3 {
		t.Fatalf("%d challenges: %+v", len(cs), cs)
	}
	b, ok := discover.Find(cs, "bearer")
	if !ok || b.Param("error") != "insufficient_scope" || strings.Join(b.Scopes(), ",") != "mcp:write,mcp:basic" ||
		b.Param("Resource_Metadata") != "http://localhost:3000/.well-known/oauth-protected-resource/mcp" {
		t.Errorf("bearer %+v", b)
	}
	if d, _ := discover.Find(cs, "DPoP"); d.Param("algs") != "ES256 EdDSA" {
		t.Errorf("dpop %+v", d)
	}
	if basic, _ := discover.Find(cs, "basic"); basic.Param("realm") != `a, b "c"` {
		t.Errorf("basic %+v", basic)
	}
}

func TestTokenValuesSchemesAloneAndToken68(t *testing.T) {
	cs, err := discover.ParseChallenges([]string{`Bearer realm=mcp, Negotiate, Other abc123==`})
	if err != nil {
		t.Fatal(err)
	}
	if len(cs) != 3 || cs[0].Param("realm") != "mcp" || cs[1].Scheme != "Negotiate" || cs[2].Param("") != "abc123==" {
		t.Fatalf("%+v", cs)
	}
}

func TestMalformedChallengesAreRefused(t *testing.T) {
	for _, v := range []string{
		`Bearer scope="unterminated`,
		`Bearer error="a", error="b"`,
		`="x"`,
		`Bearer realm="a" junk`,
		"Bearer realm=\"a\x01\"",
		strings.Repeat("a", 20<<10),
	} {
		if cs, err := discover.ParseChallenges([]string{v}); err == nil {
			t.Errorf("%.40q parsed: %+v", v, cs)
		}
	}
}

// FuzzParseChallenges: any input is parsed or refused, never a panic; and
// a quoted value of any content comes back as it went in.
func FuzzParseChallenges(f *testing.F) {
	for _, s := range []string{`Bearer realm="mcp"`, `Bearer error="invalid_token", resource_metadata="x"`, `a b=c, d`, `x y==, z`, `Bearer realm="\"\\"`} {
		f.Add(s, "v")
	}
	f.Fuzz(func(t *testing.T, header, value string) {
		discover.ParseChallenges([]string{header})
		if strings.ContainsFunc(value, func(r rune) bool { return r < 0x20 && r != '\t' || r == 0x7f }) {
			return
		}
		quoted := `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(value) + `"`
		cs, err := discover.ParseChallenges([]string{`Bearer a=` + quoted + `, scope=` + quoted})
		if err != nil || len(cs) != 1 || cs[0].Param("a") != value || cs[0].Param("scope") != value {
			t.Fatalf("value %q: %+v %v", value, cs, err)
		}
	})
}

func TestTheChallengeActedOnIsBearerElseDPoP(t *testing.T) {
	for _, tc := range []struct {
		headers []string
		scheme  string
	}{
		{[]string{`DPoP algs="ES256"`, `Bearer scope="a"`}, "Bearer"},
		{[]string{`DPoP resource_metadata="x"`}, "DPoP"},
		{[]string{`Basic realm="x"`}, ""},
		{[]string{`Bearer scope="unterminated`}, ""},
		{nil, ""},
	} {
		resp := &http.Response{Header: http.Header{"Www-Authenticate": tc.headers}}
		if got := discover.ChallengeOf(resp).Scheme; got != tc.scheme {
			t.Errorf("%q: scheme %q, want %q", tc.headers, got, tc.scheme)
		}
	}
}
