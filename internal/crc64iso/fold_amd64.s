#include "textflag.h"

// FOLD moves block X (16 bytes) forward by the distance whose keys are in K
// and adds the block at M: X = clmul(X.lo, K.lo) ^ clmul(X.hi, K.hi) ^ M.
#define FOLD(X, K, T, M) \
	MOVOA X, T; \
	PCLMULQDQ $0x00, K, X; \
	PCLMULQDQ $0x11, K, T; \
	PXOR T, X; \
	PXOR M, X

// func foldCLMUL(r uint64, p []byte, keys *[4]uint64, out *[16]byte)
TEXT ·foldCLMUL(SB), NOSPLIT, $0-48
	MOVQ r+0(FP), AX
	MOVQ p_base+8(FP), SI
	MOVQ p_len+16(FP), CX
	MOVQ keys+32(FP), DX
	MOVQ out+40(FP), DI

	MOVOU 0(DX), X4  // 64-byte distance
	MOVOU 16(DX), X5 // 16-byte distance

	MOVOU 0(SI), X0
	MOVOU 16(SI), X1
	MOVOU 32(SI), X2
	MOVOU 48(SI), X3
	MOVQ  AX, X6
	PXOR  X6, X0
	ADDQ  $64, SI
	SUBQ  $64, CX

loop64:
	CMPQ CX, $64
	JB   fold4
	MOVOU 0(SI), X10
	MOVOU 16(SI), X11
	MOVOU 32(SI), X12
	MOVOU 48(SI), X13
	FOLD(X0, X4, X6, X10)
	FOLD(X1, X4, X7, X11)
	FOLD(X2, X4, X8, X12)
	FOLD(X3, X4, X9, X13)
	ADDQ $64, SI
	SUBQ $64, CX
	JMP  loop64

fold4:
	FOLD(X0, X5, X6, X1)
	FOLD(X0, X5, X6, X2)
	FOLD(X0, X5, X6, X3)

loop16:
	CMPQ CX, $16
	JB   done
	MOVOU 0(SI), X10
	FOLD(X0, X5, X6, X10)
	ADDQ $16, SI
	SUBQ $16, CX
	JMP  loop16

done:
	MOVOU X0, 0(DI)
	RET
