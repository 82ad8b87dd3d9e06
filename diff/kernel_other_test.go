//go:build !amd64

package diff

func withoutKernels() func() { return func() {} }
