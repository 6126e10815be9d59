package host

import (
	"errors"
	"testing"

	"github.com/agentwire/agentwire/mcp"
)

// resultType is read by its exact key, from the result as it lies: a
// member that differs only in case is some other member, and anything but
// a string means "complete", as an absent one does.
func TestResultTypeIsReadByItsExactKey(t *testing.T) {
	for _, c := range []struct {
		res  string
		want error
	}{
		{`{"content":[]}`, nil},
		{`{"resultType":"complete","content":[]}`, nil},
		{`{"resultType":"input_required","inputRequests":{}}`, mcp.ErrInputRequired},
		{`{"ResultType":"input_required"}`, nil},
		{`{"resultType":7}`, nil},
		{`{"resultType":null}`, nil},
		{`[]`, nil},
		{``, nil},
	} {
		if err := checkResultType([]byte(c.res)); !errors.Is(err, c.want) || (c.want == nil && err != nil) {
			t.Errorf("%s: %v, want %v", c.res, err, c.want)
		}
	}
	if err := checkResultType([]byte(`{"resultType":"later"}`)); err == nil {
		t.Error("an unknown resultType was taken for complete")
	}
}
