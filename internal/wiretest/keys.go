package wiretest

import (
	"bytes"
	"encoding/json"
)

// RepeatsAKey reports JSON that repeats a key in some object, at any depth,
// or that is not one valid value: what rpc's decoder refuses, so that a fuzz
// target holding a fast params reader to encoding/json can skip input the
// reader never sees (the two may read a repeated key differently).
func RepeatsAKey(b []byte) bool {
	dec := json.NewDecoder(bytes.NewReader(b))
	var walk func() bool
	walk = func() bool {
		tok, err := dec.Token()
		if err != nil {
			return true
		}
		switch tok {
		case json.Delim('{'):
			seen := map[string]bool{}
			for dec.More() {
				k, err := dec.Token()
				if err != nil {
					return true
				}
				ks, _ := k.(string)
				if seen[ks] || walk() {
					return true
				}
				seen[ks] = true
			}
		case json.Delim('['):
			for dec.More() {
				if walk() {
					return true
				}
			}
		default:
			return false
		}
		_, err = dec.Token()
		return err != nil
	}
	return walk()
}
