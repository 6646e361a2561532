package jsonapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
)

// requestKeys are the keys of a request object and of a batch's statements.
var requestKeys = []string{"sql", "params", "batch"}

// strictKeys refuses what encoding/json would read ambiguously: a key given
// twice in one object (it keeps the last, so a proxy or audit log reading the
// first sees another statement than the one that runs) and, outside named
// params, a key spelled in another case ("SQL"), which it matches anyway.
func strictKeys(b []byte) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if err := walkValue(dec, false, 0); err != errMalformed {
		return err
	}
	return nil // the decoder that follows words the error
}

// errMalformed stops the walk at JSON that does not parse.
var errMalformed = errors.New("malformed")

// maxDepth stops the walk where nesting serves no request (the decoder that
// follows refuses deep nesting itself); it bounds the walk's recursion.
const maxDepth = 64

// walkValue reads one value; inParams says it is a named params object,
// whose keys are the client's own.
func walkValue(dec *json.Decoder, inParams bool, depth int) error {
	if depth > maxDepth {
		return errMalformed
	}
	tok, err := dec.Token()
	if err != nil {
		return errMalformed
	}
	switch tok {
	case json.Delim('['):
		for dec.More() {
			if err := walkValue(dec, false, depth+1); err != nil {
				return err
			}
		}
		if _, err := dec.Token(); err != nil {
			return errMalformed
		}
	case json.Delim('{'):
		seen := map[string]bool{}
		for dec.More() {
			t, err := dec.Token()
			if err != nil {
				return errMalformed
			}
			key, _ := t.(string)
			if seen[key] {
				return badRequest(fmt.Sprintf("malformed JSON request: key %q appears twice in one object", key))
			}
			seen[key] = true
			if !inParams && !slices.Contains(requestKeys, key) {
				for _, k := range requestKeys {
					if bytes.EqualFold([]byte(k), []byte(key)) {
						return badRequest(fmt.Sprintf("malformed JSON request: key %q: keys are lower case (%q)", key, k))
					}
				}
			}
			if err := walkValue(dec, !inParams && key == "params", depth+1); err != nil {
				return err
			}
		}
		if _, err := dec.Token(); err != nil {
			return errMalformed
		}
	}
	return nil
}
