#include "textflag.h"

// func joinRot2SSE2(dst, p0, p1 *byte, n int)
//
// Joins n elements (n a multiple of 16) of two byte planes into 16-bit
// little-endian elements and rotates each right by one bit: the inverse of
// the BF16/F16 split. SSE2 is part of the amd64 baseline.
TEXT ·joinRot2SSE2(SB), NOSPLIT, $0-32
	MOVQ dst+0(FP), DI
	MOVQ p0+8(FP), SI
	MOVQ p1+16(FP), DX
	MOVQ n+24(FP), CX
	SHRQ $4, CX
	JZ   done2

loop2:
	MOVOU     (SI), X0
	MOVOU     (DX), X1
	MOVO      X0, X2
	PUNPCKLBW X1, X0 // elements 0-7: p0[i] | p1[i]<<8
	PUNPCKHBW X1, X2 // elements 8-15
	MOVO      X0, X3
	PSRLW     $1, X0
	PSLLW     $15, X3
	POR       X3, X0
	MOVO      X2, X4
	PSRLW     $1, X2
	PSLLW     $15, X4
	POR       X4, X2
	MOVOU     X0, (DI)
	MOVOU     X2, 16(DI)
	ADDQ      $16, SI
	ADDQ      $16, DX
	ADDQ      $32, DI
	DECQ      CX
	JNZ       loop2

done2:
	RET

// func joinRot4SSE2(dst, p0, p1, p2, p3 *byte, n int)
//
// Joins n elements (n a multiple of 16) of four byte planes into 32-bit
// little-endian elements and rotates each right by one bit: the inverse of
// the F32 split.
TEXT ·joinRot4SSE2(SB), NOSPLIT, $0-48
	MOVQ dst+0(FP), DI
	MOVQ p0+8(FP), SI
	MOVQ p1+16(FP), DX
	MOVQ p2+24(FP), R8
	MOVQ p3+32(FP), R9
	MOVQ n+40(FP), CX
	SHRQ $4, CX
	JZ   done4

loop4:
	MOVOU     (SI), X0
	MOVOU     (DX), X1
	MOVOU     (R8), X2
	MOVOU     (R9), X3
	MOVO      X0, X4
	PUNPCKLBW X1, X0 // low halves of elements 0-7
	PUNPCKHBW X1, X4 // low halves of elements 8-15
	MOVO      X2, X5
	PUNPCKLBW X3, X2 // high halves of elements 0-7
	PUNPCKHBW X3, X5 // high halves of elements 8-15
	MOVO      X0, X6
	PUNPCKLWL X2, X0 // elements 0-3
	PUNPCKHWL X2, X6 // elements 4-7
	MOVO      X4, X7
	PUNPCKLWL X5, X4 // elements 8-11
	PUNPCKHWL X5, X7 // elements 12-15
	MOVO      X0, X8
	PSRLL     $1, X0
	PSLLL     $31, X8
	POR       X8, X0
	MOVO      X6, X9
	PSRLL     $1, X6
	PSLLL     $31, X9
	POR       X9, X6
	MOVO      X4, X10
	PSRLL     $1, X4
	PSLLL     $31, X10
	POR       X10, X4
	MOVO      X7, X11
	PSRLL     $1, X7
	PSLLL     $31, X11
	POR       X11, X7
	MOVOU     X0, (DI)
	MOVOU     X6, 16(DI)
	MOVOU     X4, 32(DI)
	MOVOU     X7, 48(DI)
	ADDQ      $16, SI
	ADDQ      $16, DX
	ADDQ      $16, R8
	ADDQ      $16, R9
	ADDQ      $64, DI
	DECQ      CX
	JNZ       loop4

done4:
	RET
