package server

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/agentwire/agentwire/jsonrpc"
)

type fuzzLevel string

type fuzzInner struct {
	Name  string   `json:"name"`
	Count *int     `json:"count"`
	Tags  []string `json:"tags"`
}

// fuzzArgs has a field of every kind argCodec decodes.
type fuzzArgs struct {
	Text    string      `json:"text"`
	Opt     *string     `json:"opt,omitempty"`
	N       int         `json:"n"`
	Small   int8        `json:"small"`
	U16     uint16      `json:"u16"`
	U       uint64      `json:"u"`
	F32     float32     `json:"f32"`
	F       float64     `json:"f"`
	On      bool        `json:"on"`
	List    []string    `json:"list"`
	Ptrs    []*int      `json:"ptrs"`
	Inner   fuzzInner   `json:"inner"`
	Next    *fuzzInner  `json:"next"`
	Many    []fuzzInner `json:"many"`
	Level   fuzzLevel   `json:"level"`
	Untaged string      // its Go name, matched case-insensitively
	Skipped string      `json:"-"`
	Dash    string      `json:"-,"`
	hidden  string      //nolint:unused // unexported: never decoded
	Nested  [][]int     `json:"nested"`
}

// The shapes argCodec must leave to encoding/json.
func TestArgCodecRefusesWhatEncodingJSONDecidesAlone(t *testing.T) {
	type embedded struct{ A string }
	for name, typ := range map[string]reflect.Type{
		"map":         reflect.TypeFor[map[string]any](),
		"interface":   reflect.TypeFor[struct{ A any }](),
		"raw message": reflect.TypeFor[struct{ A json.RawMessage }](),
		"bytes":       reflect.TypeFor[struct{ A []byte }](),
		"array":       reflect.TypeFor[struct{ A [2]int }](),
		"embedded":    reflect.TypeFor[struct{ embedded }](),
		"string option": reflect.TypeFor[struct {
			A int `json:"a,string"`
		}](),
		"folded twins": reflect.TypeFor[struct {
			A string `json:"name"`
			B string `json:"NAME"`
		}](),
		"invalid tag name": reflect.TypeFor[struct {
			A string `json:"a\"b"`
		}](),
		"text unmarshaler": reflect.TypeFor[struct{ T time.Time }](),
		"non-ASCII name":   reflect.TypeFor[struct{ Ä string }](),
		"recursive":        reflect.TypeFor[fuzzList](),
	} {
		if newArgCodec(typ) != nil {
			t.Errorf("%s: %v got a codec", name, typ)
		}
	}
	if newArgCodec(reflect.TypeFor[fuzzArgs]()) == nil {
		t.Fatal("fuzzArgs got no codec")
	}
}

type fuzzList struct {
	Next *fuzzList
}

// FuzzArgDecode holds argCodec to encoding/json: whatever it decodes, it
// decodes to what json.Unmarshal makes of the same bytes, and only where
// json.Unmarshal succeeds.
func FuzzArgDecode(f *testing.F) {
	for _, seed := range []string{
		`{"text":"hello, world"}`,
		`{"TEXT":"a","text":"b"}`,
		`{"text":"\u00e9\ud800x","opt":null,"n":-9223372036854775808,"small":127,"u16":65535,"u":18446744073709551615}`,
		`{"n":9223372036854775808}`, `{"small":128}`, `{"n":1.0}`, `{"n":1e2}`, `{"u":-1}`,
		`{"f32":3.4e39}`, `{"f":1e400}`, `{"f":-0.0,"f32":1.5e-46}`,
		`{"on":true,"list":["a",null,"b"],"ptrs":[1,null,-2]}`,
		`{"inner":{"name":"x","count":3,"tags":[]},"next":{"count":null},"many":[{},{"name":"y"}]}`,
		`{"next":null,"list":null,"inner":null}`,
		`{"level":"debug","untaged":"u","Untaged":"v","skipped":"s","-":"d","Bad":"b","hidden":"h"}`,
		`{"ſtate":1,"teXt":"k","K":2}`, `{"text":1}`, `{"on":"true"}`, `{"list":"x"}`, `{"inner":[]}`,
		`{"nested":[[1,2],[],null,[3]]}`, `[]`, `null`, `"x"`, `{}`,
	} {
		f.Add(seed)
	}
	codec := newArgCodec(reflect.TypeFor[fuzzArgs]())
	f.Fuzz(func(t *testing.T, args string) {
		// What reaches a tool has passed the decoder: valid JSON, UTF-8,
		// no key repeated at any depth.
		if _, err := jsonrpc.Decode([]byte(`{"jsonrpc":"2.0","method":"m","params":{"x":`+args+`}}`), nil); err != nil {
			return
		}
		raw := []byte(strings.TrimSpace(args))
		var fast fuzzArgs
		if !codec.decode(reflect.ValueOf(&fast).Elem(), raw) {
			return // encoding/json decides
		}
		var want fuzzArgs
		if err := json.Unmarshal(raw, &want); err != nil {
			t.Fatalf("argCodec decoded %s, which encoding/json refuses: %v", raw, err)
		}
		if !reflect.DeepEqual(fast, want) {
			t.Fatalf("%s:\nargCodec      %+v\nencoding/json %+v", raw, fast, want)
		}
	})
}

// The fast path is taken for what tools are sent, and left for what only
// encoding/json can answer exactly.
func TestArgCodecTakesTheFastPathOnlyWhereItMatches(t *testing.T) {
	codec := newArgCodec(reflect.TypeFor[fuzzArgs]())
	for args, fast := range map[string]bool{
		`{"text":"hello, world","n":-3,"f":1.5,"on":true,"list":["a"],"inner":{"name":"x","count":3}}`: true,
		`{"TEXT":"a","Opt":"b","untaged":"c","unknown":{"deep":[1,2]}}`:                                true,
		`{"next":null,"list":null,"inner":null,"ptrs":[1,null],"nested":[[1],[]]}`:                     true,
		`{"text":"\u00e9\ud800"}`: true,
		`{"TEXT":"a","text":"b"}`: false, // a repeat under folding: merged by encoding/json
		`{"ſtate":1}`:             false, // Unicode folding could match
		`{"text":1}`:              false, // encoding/json's error message counts
		`{"n":1.0}`:               false,
		`{"small":128}`:           false,
		`{"f32":3.4e39}`:          false,
		`[]`:                      false,
	} {
		var v fuzzArgs
		if got := codec.decode(reflect.ValueOf(&v).Elem(), []byte(args)); got != fast {
			t.Errorf("decode(%s) = %v, want %v", args, got, fast)
		}
	}
}
