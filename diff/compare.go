package diff

import (
	"bytes"
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/gosafetensors/safetensors"
	"github.com/gosafetensors/safetensors/internal/fault"
)

// block is the number of elements decoded and compared at a time.
const block = 4096

// Compare compares sources a and b. Tensors are read chunk by chunk on
// several workers: memory is bounded by the options, not by the tensors.
// A read error stops the work and is returned as it is.
func Compare(ctx context.Context, a, b safetensors.Source, opts ...Option) (*Result, error) {
	o, err := buildOptions(opts)
	if err != nil {
		return nil, err
	}
	metaA, metaB := a.Meta(), b.Meta()
	res := &Result{Meta: compareMeta(metaA, metaB)}
	namesA, namesB := a.Names(), b.Names()
	inB := make(map[string]bool, len(namesB))
	for _, n := range namesB {
		inB[n] = true
	}
	inA := make(map[string]bool, len(namesA))
	for _, n := range namesA {
		inA[n] = true
	}
	both := func(n, na, nb string) {
		ia, _ := a.Info(na)
		ib, _ := b.Info(nb)
		t := Tensor{Name: n, DTypeA: ia.DType, DTypeB: ib.DType,
			ShapeA: append([]int64{}, ia.Shape...), ShapeB: append([]int64{}, ib.Shape...)}
		if na != n {
			t.AliasA = na
		}
		if nb != n {
			t.AliasB = nb
		}
		res.Tensors = append(res.Tensors, t)
	}
	// A name one side lacks may be a tied weight its converter removed and
	// recorded in __metadata__ as removed -> kept: compare it with the kept
	// tensor, and drop that metadata entry from the differences.
	alias := func(meta map[string]string, has map[string]bool, n string) (string, bool) {
		k, ok := meta[n]
		return k, ok && k != n && has[k]
	}
	for _, n := range namesA {
		if inB[n] {
			both(n, n, n)
		} else if k, ok := alias(metaB, inB, n); ok {
			both(n, n, k)
			delete(res.Meta.OnlyB, n)
		} else {
			res.OnlyA = append(res.OnlyA, n)
		}
	}
	for _, n := range namesB {
		if inA[n] {
			continue
		}
		if k, ok := alias(metaA, inA, n); ok {
			both(n, k, n)
			delete(res.Meta.OnlyA, n)
		} else {
			res.OnlyB = append(res.OnlyB, n)
		}
	}
	slices.SortFunc(res.Tensors, func(x, y Tensor) int { return strings.Compare(x.Name, y.Name) })
	if o.namesOnly {
		return res, nil
	}
	var pairs []*pair
	for i := range res.Tensors {
		t := &res.Tensors[i]
		if t.ShapeDiffers() || !comparable(t.DTypeA, t.DTypeB) {
			continue
		}
		ta, err := a.Tensor(cmp.Or(t.AliasA, t.Name))
		if err != nil {
			return nil, err
		}
		tb, err := b.Tensor(cmp.Or(t.AliasB, t.Name))
		if err != nil {
			return nil, err
		}
		pairs = append(pairs, &pair{t: t, a: ta, b: tb, identical: !t.DTypeDiffers()})
	}
	if err := run(ctx, pairs, o); err != nil {
		return nil, err
	}
	return res, nil
}

// comparable reports whether values of dtypes x and y can be compared:
// equal dtypes always (by bytes at least), different ones if both decode.
func comparable(x, y safetensors.DType) bool {
	return x == y || safetensors.CanDecode(x) && safetensors.CanDecode(y)
}

func compareMeta(a, b map[string]string) Meta {
	m := Meta{OnlyA: map[string]string{}, OnlyB: map[string]string{}, Changed: map[string][2]string{}}
	for k, va := range a {
		vb, ok := b[k]
		switch {
		case !ok:
			m.OnlyA[k] = va
		case va != vb:
			m.Changed[k] = [2]string{va, vb}
		}
	}
	for k, vb := range b {
		if _, ok := a[k]; !ok {
			m.OnlyB[k] = vb
		}
	}
	return m
}

// pair is one tensor being compared, with the merged chunk results.
type pair struct {
	t         *Tensor
	a, b      *safetensors.Tensor
	mu        sync.Mutex
	identical bool
	count     int64
	differing int64
	maxAbs    float64
	maxRel    float64
	maxAbsInt uint64
}

// job is one chunk: bytes [a0, a1) of A against [b0, b1) of B.
type job struct {
	p              *pair
	a0, a1, b0, b1 int64
}

// unit is the chunk granularity in bytes for one dtype: whole elements,
// whole blocks of elements, and for F6 whole groups of four 6-bit values.
const unit = 3 * 8 * block

func run(ctx context.Context, pairs []*pair, o options) error {
	chunk := max(o.chunk/unit*unit, unit)
	var jobs []job
	var total int64
	for _, p := range pairs {
		total += p.a.Size() + p.b.Size()
		if p.a.DType == p.b.DType {
			for off := int64(0); off < p.a.Size(); off += chunk {
				end := min(off+chunk, p.a.Size())
				jobs = append(jobs, job{p, off, end, off, end})
			}
			continue
		}
		// Different dtypes: the same element range of each.
		per := chunk / 8
		n := p.a.NumElements()
		for e := int64(0); e < n; e += per {
			f := min(e+per, n)
			a0, a1 := byteRange(p.a.DType, e, f)
			b0, b1 := byteRange(p.b.DType, e, f)
			jobs = append(jobs, job{p, a0, a1, b0, b1})
		}
	}
	if ctx == nil {
		ctx = context.Background()
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var (
		next   atomic.Int64
		done   atomic.Int64
		progMu sync.Mutex
		wg     sync.WaitGroup
	)
	for range min(o.workers, max(1, len(jobs))) {
		wg.Go(func() {
			w := worker{bufA: make([]byte, min(chunk, total)), bufB: make([]byte, min(chunk, total)),
				va: make([]float64, 2*block), vb: make([]float64, 2*block),
				fa: make([]float32, 2*block), fb: make([]float32, 2*block), eps: o.epsilon}
			for {
				i := next.Add(1) - 1
				if i >= int64(len(jobs)) || ctx.Err() != nil {
					return
				}
				j := jobs[i]
				if err := fault.Catch(func() error { return w.do(j) }); err != nil {
					if errors.Is(err, fault.ErrFault) {
						err = fmt.Errorf("tensor %q: %w", j.p.t.Name, err)
					}
					cancel(err)
					return
				}
				n := done.Add(j.a1 - j.a0 + j.b1 - j.b0)
				if o.progress != nil {
					progMu.Lock()
					o.progress(n, total)
					progMu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	if err := context.Cause(ctx); err != nil {
		return err
	}
	for _, p := range pairs {
		t := p.t
		t.Compared, t.Identical = true, p.identical
		t.Count, t.Differing, t.MaxAbs, t.MaxRel = p.count, p.differing, p.maxAbs, p.maxRel
		if t.DTypeA == safetensors.C64 || !safetensors.CanDecode(t.DTypeA) {
			t.Count = p.a.NumElements()
		}
		if t.DTypeA == t.DTypeB && isInteger(t.DTypeA) {
			t.Integer = true
			t.MaxAbsInt = p.maxAbsInt
			if t.DTypeA != safetensors.I64 && t.DTypeA != safetensors.U64 {
				t.MaxAbsInt = uint64(p.maxAbs) // exact in float64
			}
		}
	}
	return nil
}

// byteRange returns the bytes holding elements [e, f) of dtype dt (F4 packs
// two per byte; e and f are even there).
func byteRange(dt safetensors.DType, e, f int64) (int64, int64) {
	if dt == safetensors.F4 {
		return e / 2, f / 2
	}
	s := int64(dt.Size())
	return e * s, f * s
}

// worker holds one goroutine's buffers.
type worker struct {
	bufA, bufB []byte
	va, vb     []float64
	fa, fb     []float32
	eps        float64
}

// chunkResult is what one chunk contributes.
type chunkResult struct {
	identical        bool
	count, differing int64
	maxAbs, maxRel   float64
	maxAbsInt        uint64 // I64 and U64: maxAbs exactly
}

func (w *worker) do(j job) error {
	p := j.p
	ba, err := p.a.ChunkAt(w.bufA[:j.a1-j.a0], j.a0)
	if err != nil {
		return err
	}
	bb, err := p.b.ChunkAt(w.bufB[:j.b1-j.b0], j.b0)
	if err != nil {
		return err
	}
	var r chunkResult
	dtA, dtB := p.a.DType, p.b.DType
	switch {
	case dtA == dtB && bytes.Equal(ba, bb):
		r.identical = true
		r.count, _ = elements(dtA, len(ba))
	case dtA == dtB && !safetensors.CanDecode(dtA) && dtA != safetensors.C64:
		// F6: only bytes can be compared.
		for i := range ba {
			if ba[i] != bb[i] {
				r.differing++
			}
		}
	case dtA == dtB && (dtA == safetensors.I64 || dtA == safetensors.U64):
		// Beyond 2^53 float64 would hide differences: compare exactly.
		compareInt64(&r, ba, bb, dtA == safetensors.I64, w.eps)
	case dtA == safetensors.C64: // (the same dtype: C64 compares with nothing else)
		compareComplex(&r, ba, bb, w.eps)
	default:
		if err := w.values(&r, ba, bb, dtA, dtB); err != nil {
			return err
		}
	}
	p.mu.Lock()
	p.identical = p.identical && r.identical
	p.count += r.count
	p.differing += r.differing
	p.maxAbs = max(p.maxAbs, r.maxAbs)
	p.maxRel = max(p.maxRel, r.maxRel)
	p.maxAbsInt = max(p.maxAbsInt, r.maxAbsInt)
	p.mu.Unlock()
	return nil
}

func elements(dt safetensors.DType, n int) (int64, error) {
	if dt == safetensors.C64 {
		return int64(n / 4), nil
	}
	if !safetensors.CanDecode(dt) {
		return int64(n) * 8 / int64(dt.Bits()), nil
	}
	e, err := safetensors.ElementCount(dt, n)
	return int64(e), err
}

// sub is the run of elements whose bytes are compared before decoding, when
// both sides have the same dtype: a few changed elements in a chunk cost
// decoding their runs only, not the whole chunk.
const sub = 64

// values compares both sides by value a block at a time. With the same
// dtype, only the bytes that differ are compared: F32 and F64 in place,
// block by block; other dtypes run by run, in place for BF16 and F16 where
// the CPU has the kernels, else decoded to float32 or float64. Different
// dtypes are decoded block by block.
func (w *worker) values(r *chunkResult, ba, bb []byte, dtA, dtB safetensors.DType) error {
	n, err := safetensors.ElementCount(dtA, len(ba))
	if err != nil {
		return err
	}
	r.count += int64(n)
	if dtA == dtB {
		if x, ok := view[float32](dtA == safetensors.F32, ba); ok {
			if y, ok := view[float32](true, bb); ok {
				compareBlocks(r, x, y, ba, bb, w.eps, compareF32)
				return nil
			}
		}
		if x, ok := view[float64](dtA == safetensors.F64, ba); ok {
			if y, ok := view[float64](true, bb); ok {
				compareBlocks(r, x, y, ba, bb, w.eps, compareF64)
				return nil
			}
		}
	}
	for e := 0; e < n; e += block {
		f := min(e+block, n)
		if dtA != dtB {
			if err := w.decodeRun(r, ba, bb, dtA, dtB, e, f); err != nil {
				return err
			}
			continue
		}
		// Same dtype: decode only maximal runs of differing sub-runs.
		start := -1
		for s := e; s < f; s += sub {
			t := min(s+sub, f)
			a0, a1 := byteRange(dtA, int64(s), int64(t))
			if bytes.Equal(ba[a0:a1], bb[a0:a1]) {
				if start >= 0 {
					if err := w.sameRun(r, ba, bb, dtA, start, s); err != nil {
						return err
					}
					start = -1
				}
				continue
			}
			if start < 0 {
				start = s
			}
		}
		if start >= 0 {
			if err := w.sameRun(r, ba, bb, dtA, start, f); err != nil {
				return err
			}
		}
	}
	return nil
}

// exact32 reports whether float32 holds every value of dtype dt exactly.
func exact32(dt safetensors.DType) bool {
	switch dt {
	case safetensors.F64, safetensors.I32, safetensors.U32, safetensors.I64, safetensors.U64:
		return false
	}
	return true
}

// compareBlocks compares x and y (views of the bytes ba and bb) a block at
// a time, skipping blocks whose bytes are equal: with a few changes per
// chunk, most of it costs a memory comparison only.
func compareBlocks[F float32 | float64](r *chunkResult, x, y []F, ba, bb []byte, eps float64, compare func(*chunkResult, []F, []F, float64)) {
	size := len(ba) / max(1, len(x))
	for e := 0; e < len(x); e += block {
		f := min(e+block, len(x))
		if !bytes.Equal(ba[e*size:f*size], bb[e*size:f*size]) {
			compare(r, x[e:f], y[e:f], eps)
		}
	}
}

// sameRun compares elements [e, f) of both sides, of the same dtype dt:
// in place where a kernel exists for dt, else decoded.
func (w *worker) sameRun(r *chunkResult, ba, bb []byte, dt safetensors.DType, e, f int) error {
	a0, a1 := byteRange(dt, int64(e), int64(f))
	if compare16(r, ba[a0:a1], bb[a0:a1], dt, w.eps) {
		return nil
	}
	return w.decodeRun(r, ba, bb, dt, dt, e, f)
}

// decodeRun decodes elements [e, f) of both sides (at most one block) and
// compares them: as float32 when that is exact for both dtypes (half the
// bytes to move), else as float64.
func (w *worker) decodeRun(r *chunkResult, ba, bb []byte, dtA, dtB safetensors.DType, e, f int) error {
	a0, a1 := byteRange(dtA, int64(e), int64(f))
	b0, b1 := byteRange(dtB, int64(e), int64(f))
	if exact32(dtA) && exact32(dtB) {
		fa, fb := w.fa[:f-e], w.fb[:f-e]
		if err := safetensors.DecodeFloat32(fa, ba[a0:a1], dtA); err != nil {
			return err
		}
		if err := safetensors.DecodeFloat32(fb, bb[b0:b1], dtB); err != nil {
			return err
		}
		compareF32(r, fa, fb, w.eps)
		return nil
	}
	va, vb := w.va[:f-e], w.vb[:f-e]
	if err := safetensors.DecodeFloat64(va, ba[a0:a1], dtA); err != nil {
		return err
	}
	if err := safetensors.DecodeFloat64(vb, bb[b0:b1], dtB); err != nil {
		return err
	}
	compareF64(r, va, vb, w.eps)
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

// kernelRun is the most elements one assembly call compares: a goroutine
// cannot be preempted inside one, so calls are kept to tens of
// microseconds. The results of consecutive calls merge exactly.
const kernelRun = 1 << 16

// kernelOut is what a comparison kernel finds in a run of elements: the
// largest |a-b| and |a-b| / max(|a|, |b|) and the count of differing
// elements (the assembly kernels store these three words in this order).
type kernelOut struct {
	maxAbs, maxRel float64
	differing      int64
}

// compareScalar compares va and vb element by element in float64: equal
// values (a NaN on both sides included) are skipped, a NaN on one side
// differs, otherwise d = |a-b| raises the maximum absolute difference,
// d / max(|a|, |b|) the maximum relative one (+Inf when d is infinite) and
// d > eps counts as differing. The result does not depend on the order of
// the elements, so kernels and partial results can be merged with max and
// +.
func compareScalar[F float32 | float64](r *chunkResult, va, vb []F, eps float64) {
	vb = vb[:len(va)]
	maxAbs, maxRel, differing := r.maxAbs, r.maxRel, r.differing
	for i, x := range va {
		y := vb[i]
		if x == y {
			continue
		}
		a, b := float64(x), float64(y)
		if a != a || b != b {
			if (a != a) != (b != b) {
				differing++
			}
			continue
		}
		d := math.Abs(a - b)
		if d > maxAbs {
			maxAbs = d
		}
		// Divide only when d / m may exceed maxRel: if d < maxRel*m after
		// rounding, then d / m <= maxRel exactly, and so after rounding
		// (rounding is monotonic). Testing d > maxRel*m instead could miss
		// a quotient one unit in the last place larger. An infinite d is
		// dealt with after the loop (maxRel*m may be NaN).
		if m := max(math.Abs(a), math.Abs(b)); d >= maxRel*m {
			if rel := d / m; rel > maxRel {
				maxRel = rel
			}
		}
		if d > eps {
			differing++
		}
	}
	if math.IsInf(maxAbs, 1) {
		maxRel = math.Inf(1)
	}
	r.maxAbs, r.maxRel, r.differing = maxAbs, maxRel, differing
}

// compareInt64 compares 64-bit integers exactly; the difference is exact
// as a uint64 and rounded only when converted to float64.
func compareInt64(r *chunkResult, ba, bb []byte, signed bool, eps float64) {
	n := len(ba) / 8
	for i := range n {
		x, y := binary.LittleEndian.Uint64(ba[8*i:]), binary.LittleEndian.Uint64(bb[8*i:])
		if x == y {
			continue
		}
		var d uint64
		var ax, ay float64
		if signed {
			sx, sy := int64(x), int64(y)
			if sx > sy {
				d = x - y // wraps to the exact distance
			} else {
				d = y - x
			}
			ax, ay = math.Abs(float64(sx)), math.Abs(float64(sy))
		} else {
			d = max(x, y) - min(x, y)
			ax, ay = float64(x), float64(y)
		}
		fd := float64(d)
		r.maxAbsInt = max(r.maxAbsInt, d)
		r.maxAbs = max(r.maxAbs, fd)
		r.maxRel = max(r.maxRel, fd/max(ax, ay))
		if fd > eps {
			r.differing++
		}
	}
	r.count += int64(n)
}

// compareComplex compares C64 elements (float32 real, float32 imaginary)
// as complex numbers: d = |a-b| is the modulus of the difference, each part
// equal on both sides contributing 0 (so equal infinities do not make NaN);
// an element with a NaN part on exactly one side differs; MaxRel divides
// by max(|a|, |b|).
func compareComplex(r *chunkResult, ba, bb []byte, eps float64) {
	n := len(ba) / 8
	part := func(b []byte, i int) float64 {
		return float64(math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:])))
	}
	for i := range n {
		ar, ai, br, bi := part(ba, 2*i), part(ba, 2*i+1), part(bb, 2*i), part(bb, 2*i+1)
		if ar == br && ai == bi {
			continue
		}
		nanA, nanB := ar != ar || ai != ai, br != br || bi != bi
		if nanA || nanB {
			if nanA != nanB {
				r.differing++
			}
			continue
		}
		var dr, di float64
		if ar != br {
			dr = ar - br
		}
		if ai != bi {
			di = ai - bi
		}
		d := math.Hypot(dr, di)
		r.maxAbs = max(r.maxAbs, d)
		if m := max(math.Hypot(ar, ai), math.Hypot(br, bi)); math.IsInf(d, 1) {
			r.maxRel = math.Inf(1)
		} else {
			r.maxRel = max(r.maxRel, d/m)
		}
		if d > eps {
			r.differing++
		}
	}
	r.count += int64(n)
}

// isInteger reports whether dt's values are integers.
func isInteger(dt safetensors.DType) bool {
	switch dt {
	case safetensors.BOOL, safetensors.U8, safetensors.I8, safetensors.I16, safetensors.U16,
		safetensors.I32, safetensors.U32, safetensors.I64, safetensors.U64:
		return true
	}
	return false
}
