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

// func cmpF32AVX2(x, y *float32, n int, eps float64, out *kernelOut)
TEXT ·cmpF32AVX2(SB), NOSPLIT, $0-40
	MOVQ x+0(FP), SI
	MOVQ y+8(FP), DI
	MOVQ n+16(FP), CX
	MOVQ out+32(FP), DX
	VBROADCASTSD eps+24(FP), Y14
	VPCMPEQQ Y15, Y15, Y15
	VPSRLQ $1, Y15, Y15
	MOVQ $1, AX
	MOVQ AX, X13
	VBROADCASTSD X13, Y13
	VXORPD Y0, Y0, Y0
	VXORPD Y1, Y1, Y1
	VXORPD Y2, Y2, Y2
	VXORPD Y3, Y3, Y3
	VPXOR Y4, Y4, Y4

loop32:
	CMPQ CX, $8
	JLT  done32
	VCVTPS2PD (SI), Y5
	VCVTPS2PD (DI), Y6
	VCVTPS2PD 16(SI), Y9
	VCVTPS2PD 16(DI), Y10
	LANES(Y5, Y6, Y7, Y8, Y0, Y2)
	LANES(Y9, Y10, Y11, Y12, Y1, Y3)
	VORPD Y6, Y10, Y10
	VMOVMSKPD Y10, AX
	ADDQ $32, SI
	ADDQ $32, DI
	SUBQ $8, CX
	TESTL AX, AX
	JZ loop32
	VDIVPD Y8, Y7, Y7
	VMAXPD Y2, Y7, Y2
	VDIVPD Y12, Y11, Y11
	VMAXPD Y3, Y11, Y3
	JMP loop32

done32:
	REDUCE
	RET

// func cmpF64AVX2(x, y *float64, n int, eps float64, out *kernelOut)
TEXT ·cmpF64AVX2(SB), NOSPLIT, $0-40
	MOVQ x+0(FP), SI
	MOVQ y+8(FP), DI
	MOVQ n+16(FP), CX
	MOVQ out+32(FP), DX
	VBROADCASTSD eps+24(FP), Y14
	VPCMPEQQ Y15, Y15, Y15
	VPSRLQ $1, Y15, Y15
	MOVQ $1, AX
	MOVQ AX, X13
	VBROADCASTSD X13, Y13
	VXORPD Y0, Y0, Y0
	VXORPD Y1, Y1, Y1
	VXORPD Y2, Y2, Y2
	VXORPD Y3, Y3, Y3
	VPXOR Y4, Y4, Y4

loop64:
	CMPQ CX, $8
	JLT  done64
	VMOVUPD (SI), Y5
	VMOVUPD (DI), Y6
	VMOVUPD 32(SI), Y9
	VMOVUPD 32(DI), Y10
	LANES(Y5, Y6, Y7, Y8, Y0, Y2)
	LANES(Y9, Y10, Y11, Y12, Y1, Y3)
	VORPD Y6, Y10, Y10
	VMOVMSKPD Y10, AX
	ADDQ $64, SI
	ADDQ $64, DI
	SUBQ $8, CX
	TESTL AX, AX
	JZ loop64
	VDIVPD Y8, Y7, Y7
	VMAXPD Y2, Y7, Y2
	VDIVPD Y12, Y11, Y11
	VMAXPD Y3, Y11, Y3
	JMP loop64

done64:
	REDUCE
	RET
