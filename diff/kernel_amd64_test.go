package diff

func withoutKernels() func() {
	avx2, f16c := useAVX2, useF16C
	useAVX2, useF16C = false, false
	return func() { useAVX2, useF16C = avx2, f16c }
}
