package safetensors

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"runtime"
	"runtime/debug"
	"sync"
	"unsafe"
)

// ErrBufferSize is wrapped by errors about a destination or source buffer
// whose length does not match the number of elements to convert.
var ErrBufferSize = errors.New("safetensors: buffer size does not match the element count")

// parallelMin is the element count above which a conversion is split across
// cores: below it, starting goroutines costs more than it saves.
const parallelMin = 1 << 17

// CanDecode reports whether [DecodeFloat32] and [DecodeFloat64] accept dt:
// every dtype except C64 (two values per element) and F6_E2M3 / F6_E3M2
// (the format does not define how 6-bit elements are packed into bytes).
func CanDecode(dt DType) bool {
	switch dt {
	case C64, F6_E2M3, F6_E3M2:
		return false
	}
	return dt.Valid()
}

// ElementCount returns how many elements of dtype dt the n bytes hold (two
// per byte for F4), or an error if dt cannot be decoded or n is not a whole
// number of elements.
func ElementCount(dt DType, n int) (int, error) {
	if !CanDecode(dt) {
		return 0, fmt.Errorf("safetensors: no conversion from %s to a float (%w)", dt, ErrDTypeMismatch)
	}
	if dt == F4 {
		return 2 * n, nil
	}
	size := dt.Size()
	if n%size != 0 {
		return 0, fmt.Errorf("%w: %d bytes are not a whole number of %s elements (%d bytes each)", ErrBufferSize, n, dt, size)
	}
	return n / size, nil
}

// DecodeFloat32 converts the little-endian elements of dtype dt in src into
// dst, which must hold exactly as many elements as src does. Every float
// dtype converts exactly except F64 (rounded to nearest); integers wider
// than 24 bits are rounded to nearest; BOOL is 0 or 1. F4 (E2M1) holds two
// elements per byte, the first in the low nibble, as PyTorch's
// float4_e2m1fn_x2 and the OCP MX specification pack them. Large inputs
// are converted on all cores. C64, F6_E2M3 and F6_E3M2 are refused with
// [ErrDTypeMismatch].
func DecodeFloat32(dst []float32, src []byte, dt DType) error {
	n, err := ElementCount(dt, len(src))
	if err != nil {
		return err
	}
	if n != len(dst) {
		return fmt.Errorf("%w: %d %s elements into %d float32", ErrBufferSize, n, dt, len(dst))
	}
	parallel(n, dt, func(lo, hi int) { decode32(dst[lo:hi], srcRange(src, dt, lo, hi), dt) })
	return nil
}

// DecodeFloat64 is [DecodeFloat32] into float64: every dtype it accepts
// converts exactly except I64 and U64 beyond 2^53, which are rounded.
func DecodeFloat64(dst []float64, src []byte, dt DType) error {
	n, err := ElementCount(dt, len(src))
	if err != nil {
		return err
	}
	if n != len(dst) {
		return fmt.Errorf("%w: %d %s elements into %d float64", ErrBufferSize, n, dt, len(dst))
	}
	parallel(n, dt, func(lo, hi int) { decode64(dst[lo:hi], srcRange(src, dt, lo, hi), dt) })
	return nil
}

// srcRange returns the bytes of elements [lo, hi).
func srcRange(src []byte, dt DType, lo, hi int) []byte {
	if dt == F4 {
		return src[lo/2 : hi/2]
	}
	s := dt.Size()
	return src[lo*s : hi*s]
}

// parallel runs f over [0, n) split into one part per core when n is large,
// with part boundaries on multiples of 64 elements (whole bytes for F4,
// whole cache lines for the rest). A panic or a memory fault in a part
// (a mapped file that shrank: the workers run with debug.SetPanicOnFault)
// is raised again on the calling goroutine once every part is done, where
// the caller's recover (fault.CatchIn) sees it.
func parallel(n int, dt DType, f func(lo, hi int)) {
	p := runtime.GOMAXPROCS(0)
	if n < parallelMin || p < 2 {
		f(0, n)
		return
	}
	p = min(p, n/(parallelMin/2))
	step := (n/p + 63) &^ 63
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		failed any
	)
	defer func() {
		wg.Wait()
		if failed != nil {
			panic(failed)
		}
	}()
	for lo := 0; lo < n; lo += step {
		hi := min(lo+step, n)
		if hi == n {
			f(lo, hi) // the last part on this goroutine
			break
		}
		wg.Go(func() {
			defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
			defer func() {
				if r := recover(); r != nil {
					mu.Lock()
					if failed == nil {
						failed = r
					}
					mu.Unlock()
				}
			}()
			f(lo, hi)
		})
	}
}

// f16Table maps every half-precision bit pattern to its float32 value. It
// is built on first use (256 KiB) so programs that never decode F16 do not
// pay for it.
var f16Table = sync.OnceValue(func() *[1 << 16]float32 {
	var t [1 << 16]float32
	for i := range t {
		t[i] = F16ToFloat32(uint16(i))
	}
	return &t
})

// byteTables maps each byte to its value for the one-byte dtypes.
var byteTables = sync.OnceValue(func() *[numDTypes]*[256]float32 {
	var all [numDTypes]*[256]float32
	fill := func(d DType, f func(b uint8) float32) {
		var t [256]float32
		for i := range t {
			t[i] = f(uint8(i))
		}
		all[d] = &t
	}
	fill(BOOL, func(b uint8) float32 {
		if b != 0 {
			return 1
		}
		return 0
	})
	fill(U8, func(b uint8) float32 { return float32(b) })
	fill(I8, func(b uint8) float32 { return float32(int8(b)) })
	fill(F8_E5M2, F8E5M2ToFloat32)
	fill(F8_E4M3, F8E4M3ToFloat32)
	fill(F8_E8M0, F8E8M0ToFloat32)
	fill(F8_E4M3FNUZ, F8E4M3FNUZToFloat32)
	fill(F8_E5M2FNUZ, F8E5M2FNUZToFloat32)
	return &all
})

// f4Values are the sixteen F4 (E2M1) values: 2 exponent bits with bias 1,
// one mantissa bit, no infinities or NaN.
var f4Values = [16]float32{0, 0.5, 1, 1.5, 2, 3, 4, 6, float32(math.Copysign(0, -1)), -0.5, -1, -1.5, -2, -3, -4, -6}

// F4ToFloat32 converts the low four bits of b, an F4 (E2M1) value, to
// float32, exactly.
func F4ToFloat32(b uint8) float32 { return f4Values[b&0xF] }

// F8E8M0ToFloat32 converts an F8_E8M0 scale byte to float32: 2^(b-127),
// exactly, with 0xFF as NaN. There is no zero, sign or infinity.
func F8E8M0ToFloat32(b uint8) float32 {
	if b == 0xFF {
		return float32(math.NaN())
	}
	if b == 0 {
		return math.Float32frombits(1 << 22) // 2^-127, subnormal
	}
	return math.Float32frombits(uint32(b) << 23)
}

// F8E4M3FNUZToFloat32 converts an F8_E4M3FNUZ byte to float32, exactly: 4
// exponent bits with bias 8, 3 mantissa bits, no infinities, no negative
// zero, and 0x80 as the only NaN. The largest finite value is 240.
func F8E4M3FNUZToFloat32(b uint8) float32 { return fnuz(b, 3, 8) }

// F8E5M2FNUZToFloat32 converts an F8_E5M2FNUZ byte to float32, exactly: 5
// exponent bits with bias 16, 2 mantissa bits, no infinities, no negative
// zero, and 0x80 as the only NaN. The largest finite value is 57344.
func F8E5M2FNUZToFloat32(b uint8) float32 { return fnuz(b, 2, 16) }

func fnuz(b uint8, manBits uint, bias int) float32 {
	if b == 0x80 {
		return float32(math.NaN())
	}
	exp := int(b&0x7F) >> manBits
	man := float64(b & (1<<manBits - 1))
	var v float64
	if exp == 0 {
		v = math.Ldexp(man, 1-bias-int(manBits))
	} else {
		v = math.Ldexp(1+man/float64(uint(1)<<manBits), exp-bias)
	}
	if b&0x80 != 0 {
		v = -v
	}
	return float32(v)
}

// decode32 converts whole elements; the lengths are already checked.
func decode32(dst []float32, src []byte, dt DType) {
	switch dt {
	case F32:
		copy(unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(dst))), 4*len(dst)), src)
		if !littleEndianHost {
			swapToHost(unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(dst))), 4*len(dst)), 4)
		}
	case BF16:
		bf16To32(dst, src)
	case F16:
		t := f16Table()
		for i := range dst {
			dst[i] = t[uint16(src[2*i])|uint16(src[2*i+1])<<8]
		}
	case F4:
		for i := range src {
			b := src[i]
			dst[2*i] = f4Values[b&0xF]
			dst[2*i+1] = f4Values[b>>4]
		}
	case F64:
		for i := range dst {
			dst[i] = float32(math.Float64frombits(le64(src[8*i:])))
		}
	case I16:
		for i := range dst {
			dst[i] = float32(int16(le16(src[2*i:])))
		}
	case U16:
		for i := range dst {
			dst[i] = float32(le16(src[2*i:]))
		}
	case I32:
		for i := range dst {
			dst[i] = float32(int32(le32(src[4*i:])))
		}
	case U32:
		for i := range dst {
			dst[i] = float32(le32(src[4*i:]))
		}
	case I64:
		for i := range dst {
			dst[i] = float32(int64(le64(src[8*i:])))
		}
	case U64:
		for i := range dst {
			dst[i] = float32(le64(src[8*i:]))
		}
	default: // one-byte dtypes
		t := byteTables()[dt]
		src = src[:len(dst)]
		for i, b := range src {
			dst[i] = t[b]
		}
	}
}

// bf16To32 widens bfloat16 to float32: each is the upper half of a float32.
// On a little-endian host with 8-byte aligned input it moves four elements
// per 64-bit load (the mapped data section of a file is 8-byte aligned).
func bf16To32(dst []float32, src []byte) {
	i := 0
	if littleEndianHost && len(dst) >= 4 && uintptr(unsafe.Pointer(unsafe.SliceData(src)))%8 == 0 &&
		uintptr(unsafe.Pointer(unsafe.SliceData(dst)))%8 == 0 {
		n4 := len(dst) / 4
		in := unsafe.Slice((*uint64)(unsafe.Pointer(unsafe.SliceData(src))), n4)
		out := unsafe.Slice((*[2]uint64)(unsafe.Pointer(unsafe.SliceData(dst))), n4)
		for j, x := range in {
			out[j] = [2]uint64{(x&0xFFFF)<<16 | (x&0xFFFF0000)<<32, (x>>32&0xFFFF)<<16 | (x>>32&0xFFFF0000)<<32}
		}
		i = 4 * n4
	}
	for ; i < len(dst); i++ {
		dst[i] = math.Float32frombits(uint32(le16(src[2*i:])) << 16)
	}
}

// decode64 is decode32 into float64.
func decode64(dst []float64, src []byte, dt DType) {
	switch dt {
	case F64:
		for i := range dst {
			dst[i] = math.Float64frombits(le64(src[8*i:]))
		}
	case F32:
		for i := range dst {
			dst[i] = float64(math.Float32frombits(le32(src[4*i:])))
		}
	case BF16:
		for i := range dst {
			dst[i] = float64(math.Float32frombits(uint32(le16(src[2*i:])) << 16))
		}
	case F16:
		t := f16Table()
		for i := range dst {
			dst[i] = float64(t[uint16(src[2*i])|uint16(src[2*i+1])<<8])
		}
	case F4:
		for i := range src {
			b := src[i]
			dst[2*i] = float64(f4Values[b&0xF])
			dst[2*i+1] = float64(f4Values[b>>4])
		}
	case I16:
		for i := range dst {
			dst[i] = float64(int16(le16(src[2*i:])))
		}
	case U16:
		for i := range dst {
			dst[i] = float64(le16(src[2*i:]))
		}
	case I32:
		for i := range dst {
			dst[i] = float64(int32(le32(src[4*i:])))
		}
	case U32:
		for i := range dst {
			dst[i] = float64(le32(src[4*i:]))
		}
	case I64:
		for i := range dst {
			dst[i] = float64(int64(le64(src[8*i:])))
		}
	case U64:
		for i := range dst {
			dst[i] = float64(le64(src[8*i:]))
		}
	default: // one-byte dtypes
		t := byteTables()[dt]
		src = src[:len(dst)]
		for i, b := range src {
			dst[i] = float64(t[b])
		}
	}
}

func le16(b []byte) uint16 { return binary.LittleEndian.Uint16(b) }
func le32(b []byte) uint32 { return binary.LittleEndian.Uint32(b) }
func le64(b []byte) uint64 { return binary.LittleEndian.Uint64(b) }
