package diff

// WithoutKernels makes Compare use the Go loops only, as on a CPU without
// AVX2, until the returned function is called.
func WithoutKernels() (restore func()) { return withoutKernels() }
