package chain_test

import (
	"testing"

	"github.com/agentwire/agentwire/internal/chain"
)

type step func(string) string
type wrap func(step) step

func tag(name string) wrap {
	return func(next step) step { return func(s string) string { return name + "(" + next(s) + ")" } }
}

func TestComposeRunsTheFirstOutermostAndSkipsNil(t *testing.T) {
	base := step(func(s string) string { return s })
	h, ok := chain.Compose(base, []wrap{tag("a"), nil, tag("b")})
	if !ok || h("x") != "a(b(x))" {
		t.Fatalf("Compose = %q, %v; want a(b(x)), true", h("x"), ok)
	}
	if _, ok := chain.Compose(base, []wrap{nil, nil}); ok {
		t.Fatal("a list of nil middleware composed something")
	}
	if _, ok := chain.Compose[step, wrap](base, nil); ok {
		t.Fatal("no middleware composed something")
	}
}
