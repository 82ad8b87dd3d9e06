package stats

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/gosafetensors/safetensors"
	"github.com/gosafetensors/safetensors/internal/fault"
)

// Stats summarises one tensor's values.
type Stats struct {
	Name  string
	DType safetensors.DType
	Shape []int64
	// Count is the number of elements.
	Count int64
	// Decoded is false for dtypes whose values cannot be decoded (C64,
	// F6_E2M3, F6_E3M2): then only the NaN and infinity counts of C64 are
	// meaningful and Min, Max, Mean and Std are NaN.
	Decoded bool
	// Min, Max, Mean and Std (the population standard deviation, dividing
	// by the count) are over the finite values only, in float64; NaN when
	// there are none. Values whose deviations overflow float64 (F64 near
	// ±1.8e308) are summarised again scaled down, so Std is +Inf only if
	// it exceeds float64's range itself.
	Min, Max, Mean, Std float64
	// IntMin and IntMax are Min and Max exactly, for the integer dtypes
	// (BOOL, I8 to I64, U8 to U64) when Finite > 0: float64 rounds 64-bit
	// integers beyond 2^53. For U64 they are the uint64 bits (use
	// uint64(IntMin)); see [Stats.ExactMin].
	IntMin, IntMax int64
	// Finite counts the finite values, Zeros those equal to zero (either
	// sign).
	Finite, Zeros int64
	NonFinite
}

// IsInteger reports whether the dtype's values are integers, so that
// IntMin and IntMax hold the exact extremes.
func (s Stats) IsInteger() bool { return isInteger(s.DType) }

// ExactMin returns the exact minimum of an integer tensor in decimal
// ("-9223372036854775808", "18446744073709551615"), and false for a
// float tensor or one without values.
func (s Stats) ExactMin() (string, bool) { return s.exact(s.IntMin) }

// ExactMax is ExactMin for the maximum.
func (s Stats) ExactMax() (string, bool) { return s.exact(s.IntMax) }

func (s Stats) exact(v int64) (string, bool) {
	if !s.IsInteger() || s.Finite == 0 {
		return "", false
	}
	if s.DType == safetensors.U64 {
		return strconv.FormatUint(uint64(v), 10), true
	}
	return strconv.FormatInt(v, 10), true
}

func isInteger(dt safetensors.DType) bool {
	switch dt {
	case safetensors.BOOL, safetensors.U8, safetensors.I8, safetensors.I16, safetensors.U16,
		safetensors.I32, safetensors.U32, safetensors.I64, safetensors.U64:
		return true
	}
	return false
}

// Tensor summarises one tensor; see [Compute].
func Tensor(ctx context.Context, t *safetensors.Tensor, opts ...Option) (Stats, error) {
	out, err := compute(ctx, []*safetensors.Tensor{t}, opts)
	if err != nil {
		return Stats{}, err
	}
	return out[0], nil
}

// Compute summarises the named tensors of src (every tensor, in Names
// order, when names is empty) in one pass over their bytes, chunk by
// chunk on several workers, and returns the results in the same order. A
// missing name is src's error (wrapping safetensors.ErrTensorNotFound); a
// read error stops the work and is returned as it is.
func Compute(ctx context.Context, src safetensors.Source, names []string, opts ...Option) ([]Stats, error) {
	if len(names) == 0 {
		names = src.Names()
	}
	tensors := make([]*safetensors.Tensor, len(names))
	for i, name := range names {
		t, err := src.Tensor(name)
		if err != nil {
			return nil, err
		}
		tensors[i] = t
	}
	return compute(ctx, tensors, opts)
}

type job struct {
	ti, ci   int
	off, end int64
}

func compute(ctx context.Context, tensors []*safetensors.Tensor, opts []Option) ([]Stats, error) {
	o, err := buildOptions(opts)
	if err != nil {
		return nil, err
	}
	// Chunks end on element boundaries: every element size divides 4096.
	chunk := o.chunk &^ 4095
	parts := make([][]acc, len(tensors))
	var total int64
	for i, t := range tensors {
		parts[i] = make([]acc, (t.Size()+chunk-1)/chunk)
		total += t.Size()
	}
	if ctx == nil {
		ctx = context.Background()
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	jobs := make(chan job)
	var (
		wg     sync.WaitGroup
		done   atomic.Int64
		progMu sync.Mutex
	)
	for range min(o.workers, max(1, int(total/chunk)+1)) {
		wg.Go(func() {
			buf := make([]byte, min(chunk, total))
			bl := &blocks{f32: make([]float32, block), f64: make([]float64, block)}
			for j := range jobs {
				t := tensors[j.ti]
				var a acc
				err := fault.Catch(func() (err error) {
					a, err = summarise(t, buf, bl, j.off, j.end)
					return err
				})
				if errors.Is(err, fault.ErrFault) {
					err = fmt.Errorf("tensor %q, bytes %d-%d: %w", t.Name, j.off, j.end, err)
				}
				if err != nil {
					cancel(err)
					continue
				}
				parts[j.ti][j.ci] = a
				n := done.Add(j.end - j.off)
				if o.progress != nil {
					progMu.Lock()
					o.progress(n, total)
					progMu.Unlock()
				}
			}
		})
	}
send:
	for ti, t := range tensors {
		for ci := range parts[ti] {
			off := int64(ci) * chunk
			select {
			case jobs <- job{ti, ci, off, min(off+chunk, t.Size())}:
			case <-ctx.Done():
				break send
			}
		}
	}
	close(jobs)
	wg.Wait()
	if err := context.Cause(ctx); err != nil {
		return nil, err
	}
	out := make([]Stats, len(tensors))
	for i, t := range tensors {
		a := newAcc()
		for _, p := range parts[i] {
			a.merge(p)
		}
		out[i] = finish(t, a)
		switch {
		case a.n > 0 && (math.IsInf(a.m2, 0) || math.IsNaN(a.m2) || math.IsInf(a.mean, 0)):
			// Deviations too large for float64 (F64 values near
			// ±1.8e308): summarise again with every value scaled down.
			if err := rescaled(ctx, t, &out[i], chunk, hugeScale); err != nil {
				return nil, err
			}
		case a.n > 1 && a.max > a.min && a.m2 < tinyM2:
			// Deviations so small their squares lose bits or vanish
			// (F64 values below ~1e-154 square to subnormals or 0):
			// summarise again scaled up.
			if err := rescaled(ctx, t, &out[i], chunk, tinyScale); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}

// summarise reads bytes [off, end) of t and folds them into a new acc.
func summarise(t *safetensors.Tensor, buf []byte, bl *blocks, off, end int64) (acc, error) {
	a := newAcc()
	for off < end {
		b, err := t.ChunkAt(buf[:min(int64(len(buf)), end-off)], off)
		if err != nil {
			return a, err
		}
		off += int64(len(b))
		if err := bl.add(&a, t.DType, b); err != nil {
			return a, err
		}
	}
	return a, nil
}

// blocks holds one worker's decode buffers.
type blocks struct {
	f32   []float32
	f64   []float64
	scale float64 // 0, or the factor every value is multiplied by
}

// hugeScale brings float64 values near the top of the range down far
// enough that squares of their differences fit, keeping the significant
// ones normal.
const hugeScale = 0x1p-600

// tinyScale brings float64 values whose deviations are below 2^-450 up
// far enough that their squares are normal: such deviations only exist
// between values below ~2^-398, which stay below 2^202 scaled, their
// squares finite. tinyM2 is the sum of squares below which it is used.
const (
	tinyScale = 0x1p+600
	tinyM2    = 0x1p-900
)

// rescaled recomputes s's mean and standard deviation from t's values
// times scale, on one worker, and scales them back: the standard
// deviation is then +Inf only if it truly exceeds float64's range.
func rescaled(ctx context.Context, t *safetensors.Tensor, s *Stats, chunk int64, scale float64) error {
	bl := &blocks{f32: make([]float32, block), f64: make([]float64, block), scale: scale}
	buf := make([]byte, min(chunk, max(t.Size(), 1)))
	b, err := summarise(t, buf, bl, 0, t.Size())
	if err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	s.Mean = b.mean / scale
	s.Std = math.Sqrt(b.m2/float64(b.n)) / scale
	return nil
}

// narrow lists the dtypes whose values float32 holds exactly: they are
// decoded to float32, half the memory traffic of float64.
func narrow(dt safetensors.DType) bool {
	switch dt {
	case safetensors.I32, safetensors.U32, safetensors.I64, safetensors.U64, safetensors.F64, safetensors.F32:
		return false
	}
	return true
}

// add folds the whole elements in b into a.
func (bl *blocks) add(a *acc, dt safetensors.DType, b []byte) error {
	if !safetensors.CanDecode(dt) {
		nf, err := CountNonFinite(dt, b)
		a.nf.Add(nf)
		return err
	}
	if bl.scale != 0 {
		return bl.addScaled(a, dt, b)
	}
	addExact(a, dt, b)
	if v, ok := view[float32](dt == safetensors.F32, b); ok {
		for len(v) > 0 {
			n := min(block, len(v))
			addBlockF32(a, v[:n])
			v = v[n:]
		}
		return nil
	}
	if v, ok := view[float64](dt == safetensors.F64, b); ok {
		for len(v) > 0 {
			n := min(block, len(v))
			addBlock(a, v[:n])
			v = v[n:]
		}
		return nil
	}
	return eachBlock(dt, b, func(p []byte, n int) error {
		if narrow(dt) {
			v := bl.f32[:n]
			if err := safetensors.DecodeFloat32(v, p, dt); err != nil {
				return err
			}
			addBlockF32(a, v)
			return nil
		}
		v := bl.f64[:n]
		if err := safetensors.DecodeFloat64(v, p, dt); err != nil {
			return err
		}
		addBlock(a, v)
		return nil
	})
}

// addExact keeps the exact extremes of I64 and U64 values in a.
func addExact(a *acc, dt safetensors.DType, b []byte) {
	switch dt {
	case safetensors.I64, safetensors.U64:
		a.exact = true
	}
	switch dt {
	case safetensors.I64:
		for i := 0; i+8 <= len(b); i += 8 {
			v := int64(binary.LittleEndian.Uint64(b[i:]))
			a.imin, a.imax = min(a.imin, v), max(a.imax, v)
		}
	case safetensors.U64:
		for i := 0; i+8 <= len(b); i += 8 {
			v := binary.LittleEndian.Uint64(b[i:])
			a.umin, a.umax = min(a.umin, v), max(a.umax, v)
		}
	}
}

// addScaled is add with every value multiplied by bl.scale first.
func (bl *blocks) addScaled(a *acc, dt safetensors.DType, b []byte) error {
	return eachBlock(dt, b, func(p []byte, n int) error {
		v := bl.f64[:n]
		if err := safetensors.DecodeFloat64(v, p, dt); err != nil {
			return err
		}
		for i := range v {
			v[i] *= bl.scale
		}
		addBlock(a, v)
		return nil
	})
}

// eachBlock calls fn with the bytes of each block of values in b and the
// number of values they hold (F4 packs two values per byte).
func eachBlock(dt safetensors.DType, b []byte, fn func(p []byte, n int) error) error {
	per := dt.Size()
	step := block * per
	if per == 0 {
		step = block / 2
	}
	for len(b) > 0 {
		p := b[:min(step, len(b))]
		b = b[len(p):]
		n, err := safetensors.ElementCount(dt, len(p))
		if err != nil {
			return err
		}
		if err := fn(p, n); err != nil {
			return err
		}
	}
	return nil
}

// view returns b as a []F without copying when ok says the dtype is F and
// the host and alignment allow it.
func view[F float32 | float64](ok bool, b []byte) ([]F, bool) {
	if !ok {
		return nil, false
	}
	return safetensors.View[F](b)
}

func finish(t *safetensors.Tensor, a acc) Stats {
	s := Stats{
		Name: t.Name, DType: t.DType, Shape: append([]int64{}, t.Shape...), Count: t.NumElements(),
		Decoded: safetensors.CanDecode(t.DType), Finite: a.n, Zeros: a.zeros, NonFinite: a.nf,
		Min: math.NaN(), Max: math.NaN(), Mean: math.NaN(), Std: math.NaN(),
	}
	if a.n > 0 {
		s.Min, s.Max, s.Mean = a.min, a.max, a.mean
		s.Std = math.Sqrt(a.m2 / float64(a.n))
		switch {
		case t.DType == safetensors.I64:
			s.IntMin, s.IntMax = a.imin, a.imax
		case t.DType == safetensors.U64:
			s.IntMin, s.IntMax = int64(a.umin), int64(a.umax)
		case isInteger(t.DType): // float64 holds these exactly
			s.IntMin, s.IntMax = int64(a.min), int64(a.max)
		}
	}
	return s
}
