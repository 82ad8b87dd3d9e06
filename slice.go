package safetensors

import (
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/gosafetensors/safetensors/internal/fault"
)

// Selector selects along one dimension, like one item of a Python subscript:
// a range start:stop:step, or a single index, which drops the dimension.
// Negative positions count from the end. Unlike Python, positions outside
// the dimension are errors rather than silently clamped.
type Selector struct {
	Start, Stop, Step int64
	HasStart, HasStop bool // false means "from the beginning" / "to the end"
	Single            bool // select the one position Start; the dimension is dropped
	// Rest is Python's Ellipsis ("..."): as many whole dimensions as the
	// other selectors leave; at most one per subscript.
	Rest bool
}

// All selects a whole dimension (":").
func All() Selector { return Selector{} }

// At selects position i and drops the dimension.
func At(i int64) Selector { return Selector{Start: i, HasStart: true, Single: true} }

// Ellipsis stands for every dimension the other selectors do not name
// ("..."), as in x[..., 0].
func Ellipsis() Selector { return Selector{Rest: true} }

// Range selects positions start up to (not including) stop.
func Range(start, stop int64) Selector {
	return Selector{Start: start, Stop: stop, HasStart: true, HasStop: true}
}

// Every returns the range x with step step, like x[::step].
func (x Selector) Every(step int64) Selector { x.Step = step; return x }

func (x Selector) String() string {
	if x.Rest {
		return "..."
	}
	if x.Single {
		return strconv.FormatInt(x.Start, 10)
	}
	var b strings.Builder
	if x.HasStart {
		b.WriteString(strconv.FormatInt(x.Start, 10))
	}
	b.WriteByte(':')
	if x.HasStop {
		b.WriteString(strconv.FormatInt(x.Stop, 10))
	}
	if x.Step != 0 && x.Step != 1 {
		b.WriteByte(':')
		b.WriteString(strconv.FormatInt(x.Step, 10))
	}
	return b.String()
}

// ParseSlice parses a subscript such as "0:2,:,-1", "::2, 3" or
// "..., -1" into one Selector per item, as Python reads what is between
// the brackets of x[...]; the brackets themselves may be given too
// ("[0:3]"). "..." is the Ellipsis, at most once. The empty string (or
// "[]") selects everything.
func ParseSlice(spec string) ([]Selector, error) {
	inner := strings.TrimSpace(spec)
	if strings.HasPrefix(inner, "[") && strings.HasSuffix(inner, "]") {
		inner = strings.TrimSpace(inner[1 : len(inner)-1])
	}
	if inner == "" {
		return nil, nil
	}
	parts := strings.Split(inner, ",")
	if strings.TrimSpace(parts[len(parts)-1]) == "" && len(parts) > 1 {
		parts = parts[:len(parts)-1] // a trailing comma, as in x[0,]
	}
	out := make([]Selector, 0, len(parts))
	rest := false
	for i, p := range parts {
		x, err := parseIndex(strings.TrimSpace(p))
		if err == nil && x.Rest {
			if rest {
				err = fmt.Errorf("an index can only have a single ellipsis")
			}
			rest = true
		}
		if err != nil {
			return nil, fmt.Errorf("slice %q, item %d %q: %v (%w)", spec, i, strings.TrimSpace(p), err, ErrInvalidSlice)
		}
		out = append(out, x)
	}
	return out, nil
}

func parseIndex(s string) (Selector, error) {
	if s == "..." {
		return Ellipsis(), nil
	}
	fields := strings.Split(s, ":")
	if len(fields) > 3 {
		return Selector{}, fmt.Errorf("too many colons")
	}
	num := func(f string) (int64, bool, error) {
		f = strings.TrimSpace(f)
		if f == "" {
			return 0, false, nil
		}
		v, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			return 0, false, fmt.Errorf("%q is not an integer", f)
		}
		return v, true, nil
	}
	if len(fields) == 1 {
		v, ok, err := num(fields[0])
		if err != nil {
			return Selector{}, err
		}
		if !ok {
			return Selector{}, fmt.Errorf("empty index")
		}
		return At(v), nil
	}
	var x Selector
	var err error
	if x.Start, x.HasStart, err = num(fields[0]); err != nil {
		return x, err
	}
	if x.Stop, x.HasStop, err = num(fields[1]); err != nil {
		return x, err
	}
	if len(fields) == 3 {
		var ok bool
		if x.Step, ok, err = num(fields[2]); err != nil {
			return x, err
		}
		if ok && x.Step <= 0 {
			return x, fmt.Errorf("step must be positive")
		}
	}
	return x, nil
}

// dimSel is a Selector resolved against a dimension: count positions from
// start, step apart.
type dimSel struct {
	start, step, count int64
	keep               bool // the dimension stays in the result
}

// resolve checks idx against shape and returns one selection per dimension.
func resolve(shape []int64, idx []Selector) ([]dimSel, error) {
	idx, err := expandRest(idx, len(shape))
	if err != nil {
		return nil, err
	}
	if len(idx) > len(shape) {
		return nil, fmt.Errorf("%d indices for a tensor of %d dimensions (%w)", len(idx), len(shape), ErrSliceOutOfRange)
	}
	sel := make([]dimSel, len(shape))
	for d, n := range shape {
		if d >= len(idx) {
			sel[d] = dimSel{start: 0, step: 1, count: n, keep: true}
			continue
		}
		x := idx[d]
		norm := func(v int64) int64 {
			if v < 0 {
				return v + n
			}
			return v
		}
		if x.Single {
			i := norm(x.Start)
			if i < 0 || i >= n {
				return nil, fmt.Errorf("index %d is out of range for dimension %d of size %d (%w)", x.Start, d, n, ErrSliceOutOfRange)
			}
			sel[d] = dimSel{start: i, step: 1, count: 1}
			continue
		}
		step := x.Step
		if step == 0 {
			step = 1
		}
		if step < 0 {
			return nil, fmt.Errorf("dimension %d: step %d must be positive (%w)", d, step, ErrInvalidSlice)
		}
		start, stop := int64(0), n
		if x.HasStart {
			start = norm(x.Start)
		}
		if x.HasStop {
			stop = norm(x.Stop)
		}
		if start < 0 || start > n || stop < 0 || stop > n {
			return nil, fmt.Errorf("range %s is out of range for dimension %d of size %d (%w)", x, d, n, ErrSliceOutOfRange)
		}
		if start > stop {
			return nil, fmt.Errorf("range %s starts after it stops in dimension %d (%w)", x, d, ErrInvalidSlice)
		}
		count := int64(0)
		if stop > start {
			count = 1 + (stop-start-1)/step // no overflow, whatever the step
		}
		sel[d] = dimSel{start: start, step: step, count: count, keep: true}
	}
	return sel, nil
}

// expandRest replaces an Ellipsis by as many whole dimensions as the other
// selectors leave of ndim.
func expandRest(idx []Selector, ndim int) ([]Selector, error) {
	at := -1
	for i, x := range idx {
		if x.Rest {
			if at >= 0 {
				return nil, fmt.Errorf("an index can only have a single ellipsis (%w)", ErrInvalidSlice)
			}
			at = i
		}
	}
	if at < 0 {
		return idx, nil
	}
	named := len(idx) - 1
	if named > ndim {
		return nil, fmt.Errorf("%d indices for a tensor of %d dimensions (%w)", named, ndim, ErrSliceOutOfRange)
	}
	out := make([]Selector, 0, ndim)
	out = append(out, idx[:at]...)
	for range ndim - named {
		out = append(out, All())
	}
	return append(out, idx[at+1:]...), nil
}

// run is a contiguous byte range of the source: [off, off+n).
type run struct{ off, n int64 }

// slicePlan lists the byte runs a selection needs, in output order.
type slicePlan struct {
	shape       []int64 // result shape
	size        int64   // result bytes
	outer       []dimSel
	outerStride []int64 // bytes per step of each outer dimension
	base        int64   // byte offset of the first run
	runN        int64   // bytes per run
}

// plan turns a selection into runs. The innermost dimensions that are
// selected whole (and the last partial one with step 1) form each run; the
// remaining outer dimensions are iterated. Sub-byte dtypes must start and
// end every run on a byte boundary.
func plan(info TensorInfo, sel []dimSel) (*slicePlan, error) {
	bits := uint64(info.DType.Bits())
	p := &slicePlan{}
	total := int64(1)
	for _, s := range sel {
		if s.keep {
			p.shape = append(p.shape, s.count)
		}
		total *= s.count
	}
	if p.shape == nil {
		p.shape = []int64{}
	}
	// stride in elements of each dimension
	strides := make([]int64, len(sel))
	acc := int64(1)
	for d := len(sel) - 1; d >= 0; d-- {
		strides[d] = acc
		acc *= info.Shape[d]
	}
	// Find the split: dims [k:] make one contiguous run per outer position.
	k := len(sel)
	runElems := int64(1)
	for k > 0 {
		s := sel[k-1]
		full := s.start == 0 && s.step == 1 && s.count == info.Shape[k-1]
		if full {
			runElems *= s.count
			k--
			continue
		}
		if s.step == 1 {
			runElems *= s.count
			k--
		}
		break
	}
	var startElem int64
	for d, s := range sel {
		startElem += s.start * strides[d]
	}
	if total == 0 {
		return p, nil
	}
	check := func(elems int64) error {
		if (uint64(elems)*bits)%8 != 0 {
			return fmt.Errorf("slice does not fall on byte boundaries for %s (%w)", info.DType, ErrMisalignedSlice)
		}
		return nil
	}
	if err := check(startElem); err != nil {
		return nil, err
	}
	if err := check(runElems); err != nil {
		return nil, err
	}
	p.outer = sel[:k]
	p.outerStride = make([]int64, k)
	for d := range k {
		step := sel[d].step * strides[d]
		if err := check(step); err != nil {
			return nil, err
		}
		p.outerStride[d] = int64(uint64(step) * bits / 8)
	}
	p.base = int64(uint64(startElem) * bits / 8)
	p.runN = int64(uint64(runElems) * bits / 8)
	p.size = int64(uint64(total) * bits / 8)
	return p, nil
}

// runs calls f for each run in output order, merging adjacent ones.
func (p *slicePlan) runs(f func(run) error) error {
	if p.size == 0 {
		return nil
	}
	pos := make([]int64, len(p.outer))
	cur := run{off: p.base, n: 0}
	for {
		off := p.base
		for d, i := range pos {
			off += i * p.outerStride[d]
		}
		if cur.n > 0 && cur.off+cur.n == off {
			cur.n += p.runN
		} else {
			if cur.n > 0 {
				if err := f(cur); err != nil {
					return err
				}
			}
			cur = run{off: off, n: p.runN}
		}
		d := len(pos) - 1
		for ; d >= 0; d-- {
			pos[d]++
			if pos[d] < p.outer[d].count {
				break
			}
			pos[d] = 0
		}
		if d < 0 {
			return f(cur)
		}
	}
}

// Slice returns the part of the tensor that idx selects, as a new tensor
// whose bytes are in memory. Only the byte runs the selection covers are
// read. Fewer indices than dimensions select the remaining dimensions whole.
func (t *Tensor) Slice(idx ...Selector) (*Tensor, error) {
	sel, err := resolve(t.Shape, idx)
	if err == nil {
		var p *slicePlan
		if p, err = plan(t.TensorInfo, sel); err == nil {
			return t.readPlan(p)
		}
	}
	return nil, t.wrapSliceError(err)
}

func (t *Tensor) wrapSliceError(err error) error {
	e := tensorError(nil, t.Name, -1, "%v", err)
	e.File = t.file
	for _, s := range []error{ErrSliceOutOfRange, ErrInvalidSlice, ErrMisalignedSlice} {
		if errors.Is(err, s) {
			e.Err = s
			e.Msg = strings.TrimSuffix(e.Msg, " ("+s.Error()+")")
		}
	}
	return e
}

func (t *Tensor) readPlan(p *slicePlan) (*Tensor, error) {
	out := make([]byte, 0, p.size)
	rr, batched := t.src.(RunReader)
	batched = batched && t.data == nil
	var bufs [][]byte
	var offs []int64
	flush := func() error {
		if len(bufs) == 0 {
			return nil
		}
		err := rr.ReadRuns(bufs, offs)
		if err != nil {
			err = fmt.Errorf("reading %d byte runs from byte %d: %w", len(bufs), offs[0], err)
		}
		bufs, offs = bufs[:0], offs[:0]
		return err
	}
	if t.mapped {
		// one fault guard for every run (see Tensor): a file that shrank
		// under the mapping is an error, not a SIGBUS
		err := fault.CatchIn(t.data, func() error {
			return p.runs(func(r run) error { out = append(out, t.data[r.off:r.off+r.n]...); return nil })
		})
		if err != nil {
			return nil, t.mappedErr(err)
		}
		return p.tensor(t, out), nil
	}
	err := p.runs(func(r run) error {
		if t.data != nil || t.src == nil {
			out = append(out, t.data[r.off:r.off+r.n]...)
			return nil
		}
		start := len(out)
		out = out[:start+int(r.n)]
		if batched {
			bufs = append(bufs, out[start:])
			offs = append(offs, t.off+r.off)
			if len(bufs) == runBatch {
				return flush()
			}
			return nil
		}
		n, err := t.src.ReadAt(out[start:], t.off+r.off)
		if err != nil && !(err == io.EOF && int64(n) == r.n) {
			return fmt.Errorf("reading %d bytes at byte %d: %w", r.n, t.off+r.off, err)
		}
		return nil
	})
	if err == nil && batched {
		err = flush()
	}
	if err != nil {
		return nil, t.errorf("%w", err)
	}
	return p.tensor(t, out), nil
}

// tensor returns the slice of t p describes, made of its bytes out.
func (p *slicePlan) tensor(t *Tensor, out []byte) *Tensor {
	info := TensorInfo{Name: t.Name, DType: t.DType, Shape: p.shape, DataOffsets: [2]int64{0, p.size}}
	return &Tensor{TensorInfo: info, file: t.file, data: out}
}

// runBatch is how many byte runs a slice hands a RunReader at once.
const runBatch = 4096
