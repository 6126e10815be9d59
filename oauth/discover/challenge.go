package discover

import (
	"errors"
	"net/http"
	"strings"
)

// A Challenge is one challenge of a WWW-Authenticate header (RFC 9110
// §11.6.1): its scheme, and its parameters by lowercased name (a token68
// value, rare in MCP, is the parameter "").
type Challenge struct {
	Scheme string
	Params map[string]string
}

// Param returns the value of the parameter name (case-insensitive).
func (c Challenge) Param(name string) string { return c.Params[strings.ToLower(name)] }

// Scopes returns the space-separated scope parameter as a list.
func (c Challenge) Scopes() []string { return strings.Fields(c.Param("scope")) }

// ErrMalformedChallenge is returned for a WWW-Authenticate value that does
// not parse.
var ErrMalformedChallenge = errors.New("discover: malformed WWW-Authenticate challenge")

// maxChallengeBytes bounds what is parsed of a server's challenges.
const maxChallengeBytes = 16 << 10

// ParseChallenges parses the values of WWW-Authenticate headers into their
// challenges, in order. A value may hold several challenges separated by
// commas, and parameters' quoted strings may hold commas and escapes.
func ParseChallenges(values []string) ([]Challenge, error) {
	var out []Challenge
	total := 0
	for _, v := range values {
		if total += len(v); total > maxChallengeBytes {
			return nil, ErrMalformedChallenge
		}
		p := challengeParser{s: v}
		cs, err := p.all()
		if err != nil {
			return nil, err
		}
		out = append(out, cs...)
	}
	return out, nil
}

// Find returns the first challenge of scheme (case-insensitive).
func Find(challenges []Challenge, scheme string) (Challenge, bool) {
	for _, c := range challenges {
		if strings.EqualFold(c.Scheme, scheme) {
			return c, true
		}
	}
	return Challenge{}, false
}

type challengeParser struct {
	s string
	i int
}

func (p *challengeParser) all() ([]Challenge, error) {
	var out []Challenge
	for {
		p.skipListSeparators()
		if p.i >= len(p.s) {
			return out, nil
		}
		scheme := p.token()
		if scheme == "" {
			return nil, ErrMalformedChallenge
		}
		c := Challenge{Scheme: scheme, Params: map[string]string{}}
		p.spaces()
		// A token68, or parameters, or nothing.
		if t68, ok := p.token68(); ok {
			c.Params[""] = t68
			out = append(out, c)
			continue
		}
		for {
			save := p.i
			p.spaces()
			name := p.token()
			p.spaces()
			if name == "" || p.i >= len(p.s) || p.s[p.i] != '=' {
				// Not a parameter: the next challenge begins here (or
				// the value ends).
				p.i = save
				break
			}
			p.i++ // '='
			p.spaces()
			var value string
			if p.i < len(p.s) && p.s[p.i] == '"' {
				v, ok := p.quoted()
				if !ok {
					return nil, ErrMalformedChallenge
				}
				value = v
			} else if value = p.token(); value == "" {
				return nil, ErrMalformedChallenge
			}
			key := strings.ToLower(name)
			if _, dup := c.Params[key]; dup {
				return nil, ErrMalformedChallenge // "each parameter name MUST only occur once"
			}
			c.Params[key] = value
			p.spaces()
			if p.i >= len(p.s) {
				break
			}
			if p.s[p.i] != ',' {
				return nil, ErrMalformedChallenge
			}
			p.i++
		}
		out = append(out, c)
	}
}

func (p *challengeParser) spaces() {
	for p.i < len(p.s) && (p.s[p.i] == ' ' || p.s[p.i] == '\t') {
		p.i++
	}
}

func (p *challengeParser) skipListSeparators() {
	for p.i < len(p.s) && (p.s[p.i] == ' ' || p.s[p.i] == '\t' || p.s[p.i] == ',') {
		p.i++
	}
}

func isTokenChar(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	}
	return strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
}

func (p *challengeParser) token() string {
	start := p.i
	for p.i < len(p.s) && isTokenChar(p.s[p.i]) {
		p.i++
	}
	return p.s[start:p.i]
}

// token68 reads a token68 (RFC 9110 §11.2) that stands alone: followed by
// the end of the value or a comma, and not the name of a parameter.
func (p *challengeParser) token68() (string, bool) {
	start := p.i
	j := p.i
	for j < len(p.s) && (isAlnum(p.s[j]) || strings.IndexByte("-._~+/", p.s[j]) >= 0) {
		j++
	}
	if j == start {
		return "", false
	}
	for j < len(p.s) && p.s[j] == '=' {
		j++
	}
	k := j
	for k < len(p.s) && (p.s[k] == ' ' || p.s[k] == '\t') {
		k++
	}
	if k < len(p.s) && p.s[k] != ',' {
		return "", false
	}
	// "abc=" before a comma or the end reads as a token68 (its padding),
	// as RFC 9110's grammar has it, not as a parameter without a value.
	p.i = j
	return p.s[start:j], true
}

func isAlnum(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
}

// quoted reads a quoted-string, unescaping quoted-pairs.
func (p *challengeParser) quoted() (string, bool) {
	p.i++ // opening quote
	var b strings.Builder
	for p.i < len(p.s) {
		c := p.s[p.i]
		switch {
		case c == '"':
			p.i++
			return b.String(), true
		case c == '\\':
			if p.i+1 >= len(p.s) {
				return "", false
			}
			b.WriteByte(p.s[p.i+1])
			p.i += 2
		case c < 0x20 && c != '\t' || c == 0x7f:
			return "", false
		default:
			b.WriteByte(c)
			p.i++
		}
	}
	return "", false
}

// ChallengeOf returns the challenge of a refusal (a 401 or 403) that an
// OAuth client acts on: the Bearer one, else the DPoP one (a server that
// takes DPoP-bound tokens only); the zero Challenge when there is neither,
// or the header does not parse.
func ChallengeOf(resp *http.Response) Challenge {
	cs, err := ParseChallenges(resp.Header.Values("WWW-Authenticate"))
	if err != nil {
		return Challenge{}
	}
	if c, ok := Find(cs, "Bearer"); ok {
		return c
	}
	c, _ := Find(cs, "DPoP")
	return c
}
