package crc64iso

import "golang.org/x/sys/cpu"

var hasFold = cpu.X86.HasPCLMULQDQ && cpu.X86.HasSSE41

// foldKeys are the multipliers for moving a 16-byte block 64 bytes ahead
// (x^575, x^511 mod P) and 16 bytes ahead (x^191, x^127 mod P): a block's
// first half holds its higher-order coefficients. One degree less than the
// distance, because a carry-less product of two reflected 64-bit values
// comes out one bit short of the 128-bit block's alignment.
var foldKeys = [4]uint64{xPowMod(575), xPowMod(511), xPowMod(191), xPowMod(127)}

// foldCLMUL is implemented in fold_amd64.s.
//
//go:noescape
func foldCLMUL(r uint64, p []byte, keys *[4]uint64, out *[16]byte)

// fold XORs the register r into p's first 8 bytes and folds p (a multiple of
// 16 bytes, at least 64) into one 16-byte block congruent to it: a block
// whose CRC from a zero register equals the register after all of p.
func fold(r uint64, p []byte, out *[16]byte) { foldCLMUL(r, p, &foldKeys, out) }
