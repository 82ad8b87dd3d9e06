package torch

import (
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"sync"

	"github.com/gosafetensors/safetensors"
)

// viewCacheMax (a variable for tests) is the largest storage span a strided View keeps in memory
// to serve reads; larger views are read element run by element run.
var viewCacheMax int64 = 16 << 20

// verifyMax is the largest zip storage whose CRC-32 a View checks before
// serving a partial read: checking reads the whole record. Larger storages
// are checked by full reads (Stream, Tensor.WriteTo) only.
const verifyMax = 256 << 20

// View is random access to a tensor's elements in C-contiguous
// little-endian order — the bytes its safetensors form holds — without
// materialising the view: a read touches only the storage bytes it needs. A
// zero-stride view of four floats standing for 2^28 elements costs 16 bytes
// of memory, whatever is read from it; but reading such an expanded view
// ([Tensor.Expanded]) at all is refused unless the checkpoint allows it
// ([WithExpandedViews]).
//
// A View is an io.ReaderAt over [0, NBytes) and a safetensors.Streamer, so
// safetensors.NewTensor(info, view, name) serves it like a tensor of a
// safetensors file. It is safe for concurrent use.
type View struct {
	t *Tensor

	once  sync.Once
	cache []byte // the storage span [lo, hi] elements, when small enough
	err   error
}

// View returns random access to the tensor's bytes.
func (t *Tensor) View() *View { return &View{t: t} }

// Size is the size of the tensor's contiguous form in bytes.
func (v *View) Size() int64 { return v.t.NBytes() }

// Stream writes every byte in order, gathering strided views through a
// bounded buffer; see Tensor.WriteTo.
func (v *View) Stream(w io.Writer) (int64, error) { return v.t.WriteTo(w) }

// ReadAt reads len(p) bytes of the tensor's contiguous form at off.
func (v *View) ReadAt(p []byte, off int64) (int, error) {
	t := v.t
	size := t.NBytes()
	if off < 0 {
		return 0, fmt.Errorf("torch: tensor %q: negative offset %d", t.Name, off)
	}
	if off >= size {
		if len(p) == 0 {
			return 0, nil
		}
		return 0, io.EOF
	}
	want := p[:min(int64(len(p)), size-off)]
	if err := v.check(); err != nil {
		return 0, err
	}
	var err error
	if t.Contiguous() {
		err = readFull(t.Storage.sec, want, t.Offset*int64(t.itemSize)+off)
	} else {
		err = v.gatherAt(want, off)
	}
	if err != nil {
		return 0, withPath(stampEntry(err, t.Storage.entry), t.Storage.path)
	}
	if t.DType == safetensors.BOOL {
		normalizeBools(want) // as WriteTo: torch reads a non-zero byte as True
	}
	if len(want) < len(p) {
		return len(want), io.EOF
	}
	return len(p), nil
}

// check verifies the storage's CRC once when that costs little, and loads
// the span of a small strided view.
func (v *View) check() error {
	v.once.Do(func() {
		t := v.t
		s := t.Storage
		if err := t.checkExpansion(); err != nil {
			v.err = err
			return
		}
		if err := s.Check(); err != nil {
			v.err = err
			return
		}
		if s.needsVerify() && s.recLen <= verifyMax {
			if err := s.Verify(); err != nil {
				v.err = err
				return
			}
		}
		if err := s.verifyErr(); err != nil {
			v.err = err
			return
		}
		if t.Contiguous() || t.Numel() == 0 {
			return
		}
		is := int64(t.itemSize)
		lo, hi := t.span()
		if (hi-lo+1)*is <= viewCacheMax {
			buf := make([]byte, (hi-lo+1)*is)
			if err := readFull(s.sec, buf, lo*is); err != nil {
				v.err = withPath(stampEntry(err, s.entry), s.path)
				return
			}
			v.cache = buf
		}
	})
	return v.err
}

// gatherAt fills p with the contiguous-form bytes at off of a strided view,
// walking the elements it covers in C order.
func (v *View) gatherAt(p []byte, off int64) error {
	t := v.t
	is := int64(t.itemSize)
	nd := len(t.Shape)
	e := off / is            // first element
	skip := off - e*is       // bytes of it before off
	idx := make([]int64, nd) // multi-index of element e
	rem := e
	for d := nd - 1; d >= 0; d-- {
		idx[d] = rem % t.Shape[d]
		rem /= t.Shape[d]
	}
	inner, innerStride := int64(1), int64(1)
	if nd > 0 {
		inner, innerStride = t.Shape[nd-1], t.Stride[nd-1]
	}
	lo, _ := t.span()
	var elem [16]byte
	for len(p) > 0 {
		base := t.Offset
		for d := range nd {
			base += idx[d] * t.Stride[d]
		}
		// the rest of this innermost row, from the current element
		col := int64(0)
		if nd > 0 {
			col = idx[nd-1]
		}
		left := inner - col // elements left in the row
		switch {
		case v.cache != nil:
			for k := int64(0); k < left && len(p) > 0; k++ {
				at := (base + k*innerStride - lo) * is
				n := copy(p, v.cache[at+skip:at+is])
				p, skip = p[n:], 0
			}
		case innerStride == 1:
			n := min(left*is-skip, int64(len(p)))
			if err := readFull(t.Storage.sec, p[:n], base*is+skip); err != nil {
				return err
			}
			p, skip = p[n:], 0
		default:
			for k := int64(0); k < left && len(p) > 0; k++ {
				if err := readFull(t.Storage.sec, elem[:is], (base+k*innerStride)*is); err != nil {
					return err
				}
				n := copy(p, elem[skip:is])
				p, skip = p[n:], 0
			}
		}
		// advance to the next row
		if nd == 0 {
			return nil
		}
		idx[nd-1] = 0
		d := nd - 2
		for ; d >= 0; d-- {
			idx[d]++
			if idx[d] < t.Shape[d] {
				break
			}
			idx[d] = 0
		}
		if d < 0 {
			return nil
		}
	}
	return nil
}

// ErrExpandedView is wrapped, with [ErrLimit], by the error of reading a
// view that makes a checkpoint read its stored bytes more times than it
// allows: an [*ExpandedViewError] (a view larger than its storage) or an
// [*OverlappingViewError] (one of many views of a storage that together
// are larger than it).
var ErrExpandedView = errors.New("expanded view")

// ExpandedViewError is the refusal to materialise an expanded view: a
// tensor whose contiguous form is larger than its storage, so that stored
// elements stand for many (torch's expand, a zero or overlapping stride).
// torch loads such a view as a view and spends no memory on it; its
// safetensors form, which every command reads, repeats the elements: a
// 518-byte file can stand for 256 GiB. See [Tensor.CheckView] for what a
// checkpoint may read beyond what it stores.
type ExpandedViewError struct {
	Path         string  // the checkpoint
	Tensor       string  // the entry name
	Shape        []int64 // the view
	Stride       []int64
	Storage      string // the storage's key
	StorageBytes int64  // what the storage holds
	Bytes        int64  // the view's contiguous form
	// Total is what the checkpoint's views come to beyond the bytes their
	// storages hold (see Tensor.CheckView); Allowed what may be read: the
	// checkpoint's size, or what WithExpandedViews allowed (OptIn).
	Total, Allowed int64
	OptIn          bool
}

// Factor is how many times its storage's bytes the view's contiguous form
// is.
func (e *ExpandedViewError) Factor() float64 {
	return float64(e.Bytes) / float64(max(e.StorageBytes, 1))
}

func (e *ExpandedViewError) Error() string {
	return fmt.Sprintf("%s: tensor %q: an expanded view (shape %v, stride %v): %d bytes of storage %q stand for %d bytes, %.4g times as many; %s",
		e.Path, e.Tensor, e.Shape, e.Stride, e.StorageBytes, e.Storage, e.Bytes, e.Factor(), beyond(e.Total, e.Allowed, e.OptIn))
}

// beyond says what a checkpoint's views come to beyond its stored bytes
// against what is allowed.
func beyond(total, allowed int64, optIn bool) string {
	msg := fmt.Sprintf("the checkpoint's expanded and overlapping views read %d bytes beyond what their storages hold, ", total)
	if optIn {
		return msg + fmt.Sprintf("more than the %d allowed", allowed)
	}
	return msg + fmt.Sprintf("more than its own size (%d bytes), so materialising them is refused unless allowed (torch.WithExpandedViews)", allowed)
}

// Unwrap returns ErrExpandedView and ErrLimit.
func (e *ExpandedViewError) Unwrap() []error { return []error{ErrExpandedView, ErrLimit} }

// OverlappingViewError is the refusal to read a view, no larger than its
// storage, of a storage whose distinct views together are larger than it:
// torch.save writes a storage once however many views of it a checkpoint
// holds, so a 36 KB file of 256 offset slices of one 16 KiB storage stands
// for 3.9 MB, and 1000 slices of a 4 MB storage for 4 GiB, which every
// command reading the checkpoint would read. It counts against the same
// allowance as expanded views ([Tensor.CheckView]).
type OverlappingViewError struct {
	Path         string  // the checkpoint
	Tensor       string  // the entry name
	Shape        []int64 // the view
	Stride       []int64
	Offset       int64  // in elements
	Storage      string // the storage's key
	StorageBytes int64  // what the storage holds
	Bytes        int64  // the view's contiguous form
	// Views is how many distinct views of the storage the checkpoint
	// holds (a name tied to another's view counts once), ViewBytes what
	// they come to together.
	Views     int
	ViewBytes int64
	// Total, Allowed and OptIn are as in ExpandedViewError.
	Total, Allowed int64
	OptIn          bool
}

func (e *OverlappingViewError) Error() string {
	return fmt.Sprintf("%s: tensor %q: a view (shape %v, stride %v, offset %d, %d bytes) of storage %q (%d bytes), one of %d distinct views of it that come to %d bytes; %s",
		e.Path, e.Tensor, e.Shape, e.Stride, e.Offset, e.Bytes, e.Storage, e.StorageBytes, e.Views, e.ViewBytes, beyond(e.Total, e.Allowed, e.OptIn))
}

// Unwrap returns ErrExpandedView and ErrLimit.
func (e *OverlappingViewError) Unwrap() []error { return []error{ErrExpandedView, ErrLimit} }

// Expanded reports whether the tensor is an expanded view: its contiguous
// form (NBytes) is larger than its storage (Storage.NBytes), which only
// overlapping strides make possible (expand, a stride of 0, as_strided).
// Reading one counts against what the checkpoint allows: see
// [Tensor.CheckView] and [WithExpandedViews]. A view that overlaps itself
// but is no larger than its storage reads as any other.
func (t *Tensor) Expanded() bool { return t.NBytes() > t.Storage.NBytes() }

// expansion is what a checkpoint's views come to beyond the bytes their
// storages hold, and what may be read of them.
type expansion struct {
	total, allowed int64
	optIn          bool
	views          map[*Storage]storageViews
}

// storageViews is what the distinct views of one storage come to.
type storageViews struct {
	n     int
	bytes int64
}

// Expansion allowances, see WithExpandedViews.
const (
	// ExpandedViewsProportional, given to WithExpandedViews, allows a
	// checkpoint's views to read 64 times the checkpoint's size, or
	// 64 MiB, whichever is more, beyond what their storages hold.
	ExpandedViewsProportional = -1
	expansionRatio            = 64
	minExpansion              = 64 << 20
)

// viewKey identifies a distinct view: names tied to one view share it.
type viewKey struct {
	s             *Storage
	dtype         safetensors.DType
	offset        int64
	shape, stride string
}

// setExpansion records, in every view of c (a size-byte file) that reads
// beyond its storage's bytes, what such views come to and what may be
// read: optIn is WithExpandedViews' argument (0: without it, the file's
// size). The distinct views of each storage are taken in checkpoint
// order: a view that is not expanded and fits, with the views of the
// storage before it, in the storage's bytes is free; every other one is
// charged its whole contiguous size.
func (c *Checkpoint) setExpansion(size, optIn int64) {
	e := &expansion{allowed: max(size, 0), optIn: optIn != 0, views: map[*Storage]storageViews{}}
	switch {
	case optIn == ExpandedViewsProportional && size > math.MaxInt64/expansionRatio:
		e.allowed = math.MaxInt64
	case optIn == ExpandedViewsProportional:
		e.allowed = max(expansionRatio*size, minExpansion)
	case optIn > 0:
		e.allowed = optIn
	}
	charged := map[viewKey]bool{}
	free := map[*Storage]int64{} // bytes of the storage's free views
	for _, t := range c.tensors {
		k := viewKey{t.Storage, t.DType, t.Offset, fmt.Sprint(t.Shape), fmt.Sprint(t.Stride)}
		ch, seen := charged[k]
		if !seen {
			n := t.NBytes()
			sv := e.views[t.Storage]
			sv.n++
			sv.bytes = satAdd(sv.bytes, n)
			e.views[t.Storage] = sv
			ch = t.Expanded() || satAdd(free[t.Storage], n) > t.Storage.NBytes()
			if ch {
				e.total = satAdd(e.total, n)
			} else {
				free[t.Storage] += n
			}
			charged[k] = ch
		}
		if ch {
			t.expand = e
		}
	}
}

func satAdd(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

// CheckView returns the error reading the tensor's bytes would give
// because the checkpoint's views read more than it allows beyond the bytes
// their storages hold, and nil when it may be read: a writer checks every
// tensor before it writes anything.
//
// The rule: of the distinct views of a storage (names tied to one view
// count once), those that are not expanded and together fit in the
// storage's bytes are free, taken in checkpoint order; every other view
// (an expanded one, or one of many views of a storage that together
// exceed it) is charged its contiguous size. While the charges come, all
// together, to at most the checkpoint's own size, or what
// [WithExpandedViews] allows, every view reads; beyond, each charged view
// is refused (an [*ExpandedViewError] or an [*OverlappingViewError]) and
// the free ones read as ever. What a checkpoint can make a reader read is
// so at most its stored bytes and the allowance.
func (t *Tensor) CheckView() error { return t.checkExpansion() }

// checkExpansion refuses to materialise a charged view beyond what the
// checkpoint allows (nil for any other tensor). An expanded tensor that is
// not part of an opened checkpoint allows none.
func (t *Tensor) checkExpansion() error {
	e := t.expand
	if e == nil {
		if !t.Expanded() {
			return nil
		}
		e = &expansion{total: t.NBytes()}
	}
	if e.total <= e.allowed {
		return nil
	}
	if t.Expanded() {
		return &ExpandedViewError{Path: t.Storage.path, Tensor: t.Name, Shape: slices.Clone(t.Shape), Stride: slices.Clone(t.Stride),
			Storage: t.Storage.Key, StorageBytes: t.Storage.NBytes(), Bytes: t.NBytes(), Total: e.total, Allowed: e.allowed, OptIn: e.optIn}
	}
	sv := e.views[t.Storage]
	return &OverlappingViewError{Path: t.Storage.path, Tensor: t.Name, Shape: slices.Clone(t.Shape), Stride: slices.Clone(t.Stride), Offset: t.Offset,
		Storage: t.Storage.Key, StorageBytes: t.Storage.NBytes(), Bytes: t.NBytes(), Views: sv.n, ViewBytes: sv.bytes,
		Total: e.total, Allowed: e.allowed, OptIn: e.optIn}
}
