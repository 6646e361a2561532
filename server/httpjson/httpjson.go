// Package httpjson writes the server's JSON answers one way for every
// route: Content-Type application/json, the status, then the body on one
// line. Headers particular to an answer (a bookmark, Retry-After) are set
// by the caller before it calls Write.
//
// It imports only the standard library.
package httpjson

import (
	"encoding/json"
	"net/http"
)

// Write answers with status and v encoded as JSON. When v cannot be
// encoded nothing is written and the error is returned, so the caller can
// still answer in its protocol's error shape.
func Write(w http.ResponseWriter, status int, v any) error {
	body, err := json.Marshal(v)
	if err != nil {
		return err
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, err = w.Write(append(body, '\n'))
	return err
}
