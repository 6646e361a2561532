//go:build !amd64

package crc64iso

const hasFold = false

func fold(r uint64, p []byte, out *[16]byte) { panic("crc64iso: no folding on this architecture") }
