package jsonstr

import "unsafe"

// unsafeString views b as a string without copying; Append only reads it
// and keeps no reference.
func unsafeString(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(&b[0], len(b))
}
