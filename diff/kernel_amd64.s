#include "textflag.h"

// The comparison of four float64 lanes a (A) and b (B), with D, M as
// temporaries; MAXABS, MAXREL and Y4 (counts) accumulate. Constants: Y15
// clears the sign, Y14 is the epsilon, Y13 the smallest positive float64.
//
//	d = |a-b|; maxAbs = max(d, maxAbs)   (a NaN d leaves maxAbs as it is)
//	m = max(|a|, |b|)
//	count -= (isNaN(a) != isNaN(b)) | (d > eps)   (masks are -1)
//	B = (d >= max(maxRel*m, smallest)): lanes that may raise maxRel
//
// VMAXPD X, Y, Z sets Z = Y if Y > X else X: when Y is NaN, X is kept.
#define LANES(A, B, D, M, MAXABS, MAXREL) \
	VSUBPD B, A, D; \
	VANDPD Y15, D, D; \
	VMAXPD MAXABS, D, MAXABS; \
	VANDPD Y15, A, M; \
	VANDPD Y15, B, B; \
	VCMPPD $3, A, A, A; \
	VMAXPD B, M, M; \
	VCMPPD $3, B, B, B; \
	VXORPD B, A, A; \
	VCMPPD $0x1E, Y14, D, B; \
	VORPD B, A, A; \
	VPSUBQ A, Y4, Y4; \
	VMULPD MAXREL, M, B; \
	VMAXPD Y13, B, B; \
	VCMPPD $0x1D, B, D, B

// REDUCE stores the lanes' maxima and the counts' sum at DX.
#define REDUCE \
	VMAXPD Y1, Y0, Y0; \
	VEXTRACTF128 $1, Y0, X1; \
	VMAXPD X1, X0, X0; \
	VPERMILPD $1, X0, X1; \
	VMAXPD X1, X0, X0; \
	MOVSD X0, 0(DX); \
	VMAXPD Y3, Y2, Y2; \
	VEXTRACTF128 $1, Y2, X3; \
	VMAXPD X3, X2, X2; \
	VPERMILPD $1, X2, X3; \
	VMAXPD X3, X2, X2; \
	MOVSD X2, 8(DX); \
	VEXTRACTI128 $1, Y4, X5; \
	VPADDQ X5, X4, X4; \
	VPSHUFD $0x4E, X4, X5; \
	VPADDQ X5, X4, X4; \
	MOVQ X4, 16(DX); \
	VZEROUPPER

// INIT loads the arguments and clears the accumulators: Y0, Y1 the
// largest |a-b|, Y2, Y3 the largest quotients (two sets of lanes, to
// shorten the dependency chains), Y4 the counts.
#define INIT \
	MOVQ x+0(FP), SI; \
	MOVQ y+8(FP), DI; \
	MOVQ n+16(FP), CX; \
	MOVQ out+32(FP), DX; \
	VBROADCASTSD eps+24(FP), Y14; \
	VPCMPEQQ Y15, Y15, Y15; \
	VPSRLQ $1, Y15, Y15; \
	MOVQ $1, AX; \
	MOVQ AX, X13; \
	VBROADCASTSD X13, Y13; \
	VXORPD Y0, Y0, Y0; \
	VXORPD Y1, Y1, Y1; \
	VXORPD Y2, Y2, Y2; \
	VXORPD Y3, Y3, Y3; \
	VPXOR Y4, Y4, Y4

// STEP compares the eight pairs loaded as float64 into Y5, Y6 (the first
// four) and Y9, Y10 (the last four), advances SI and DI by SIZE bytes and
// counts CX down; where a lane may raise its largest quotient, it divides
// (for all eight lanes: quotients that are not larger change nothing, NaN
// ones are ignored).
#define STEP(SIZE, LOOP) \
	LANES(Y5, Y6, Y7, Y8, Y0, Y2); \
	LANES(Y9, Y10, Y11, Y12, Y1, Y3); \
	VORPD Y6, Y10, Y10; \
	VMOVMSKPD Y10, AX; \
	ADDQ $SIZE, SI; \
	ADDQ $SIZE, DI; \
	SUBQ $8, CX; \
	TESTL AX, AX; \
	JZ LOOP; \
	VDIVPD Y8, Y7, Y7; \
	VMAXPD Y2, Y7, Y2; \
	VDIVPD Y12, Y11, Y11; \
	VMAXPD Y3, Y11, Y3; \
	JMP LOOP

// WIDEN converts the eight float32 in Y (from a 16-bit dtype) to float64
// in Y (the first four) and Y2 (the last four).
#define WIDEN(Y, X, Y2, X2) \
	VEXTRACTF128 $1, Y, X2; \
	VCVTPS2PD X, Y; \
	VCVTPS2PD X2, Y2

// func cmpF32AVX2(x, y *float32, n int, eps float64, out *kernelOut)
TEXT ·cmpF32AVX2(SB), NOSPLIT, $0-40
	INIT

loop32:
	CMPQ CX, $8
	JLT  done32
	VCVTPS2PD (SI), Y5
	VCVTPS2PD (DI), Y6
	VCVTPS2PD 16(SI), Y9
	VCVTPS2PD 16(DI), Y10
	STEP(32, loop32)

done32:
	REDUCE
	RET

// func cmpF64AVX2(x, y *float64, n int, eps float64, out *kernelOut)
TEXT ·cmpF64AVX2(SB), NOSPLIT, $0-40
	INIT

loop64:
	CMPQ CX, $8
	JLT  done64
	VMOVUPD (SI), Y5
	VMOVUPD (DI), Y6
	VMOVUPD 32(SI), Y9
	VMOVUPD 32(DI), Y10
	STEP(64, loop64)

done64:
	REDUCE
	RET

// func cmpBF16AVX2(x, y *uint16, n int, eps float64, out *kernelOut)
TEXT ·cmpBF16AVX2(SB), NOSPLIT, $0-40
	INIT

loopbf:
	CMPQ CX, $8
	JLT  donebf
	VPMOVZXWD (SI), Y5
	VPMOVZXWD (DI), Y6
	VPSLLD $16, Y5, Y5
	VPSLLD $16, Y6, Y6
	WIDEN(Y5, X5, Y9, X9)
	WIDEN(Y6, X6, Y10, X10)
	STEP(16, loopbf)

donebf:
	REDUCE
	RET

// func cmpF16F16C(x, y *uint16, n int, eps float64, out *kernelOut)
TEXT ·cmpF16F16C(SB), NOSPLIT, $0-40
	INIT

loopf16:
	CMPQ CX, $8
	JLT  donef16
	VCVTPH2PS (SI), Y5
	VCVTPH2PS (DI), Y6
	WIDEN(Y5, X5, Y9, X9)
	WIDEN(Y6, X6, Y10, X10)
	STEP(16, loopf16)

donef16:
	REDUCE
	RET
