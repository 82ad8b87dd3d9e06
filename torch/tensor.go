package torch

import (
	"github.com/gosafetensors/safetensors"
	"hash/crc32"
	"io"
	"slices"
	"sync/atomic"
)

// Tensor is a dense, strided view of a storage, as torch's
// _rebuild_tensor_v2 describes it. Its fields are validated when the
// checkpoint is opened: the view lies inside the storage.
type Tensor struct {
	Name         string            // dotted entry name
	DType        safetensors.DType // element type (torch has no dtype that safetensors lacks here: the rest are refused)
	Shape        []int64           // sizes
	Stride       []int64           // in elements
	Offset       int64             // storage offset in elements
	Storage      *Storage          // shared by every view of the same storage key
	RequiresGrad bool
	IsParameter  bool // wrapped in torch._utils._rebuild_parameter*

	itemSize  int
	maxBuffer int64
	expand    *expansion // what the checkpoint reads beyond its storages, for a charged view (Tensor.CheckView)
}

// Storage is one storage record: the raw bytes of data/<key> in a zip
// checkpoint, or one storage of a legacy stream. The bytes stay in the file.
type Storage struct {
	Key      string            // storage key from the persistent id
	DType    safetensors.DType // element dtype of the storage type (U8 for torch.UntypedStorage)
	ItemSize int               // bytes per element
	Numel    int64             // elements, from the persistent id
	Location string            // device tag ("cpu", "cuda:0", ...), informational

	sec      *io.SectionReader // exactly Numel*ItemSize bytes
	path     string            // file name for errors
	entry    string            // zip member or "legacy storage <key>"
	r        io.ReaderAt       // the whole record, for CRC checks
	recOff   int64
	recLen   int64
	crc      uint32
	hasCRC   bool
	verified atomic.Int32 // 0 not yet, 1 CRC ok, 2 CRC bad
	at       int64        // where the record is in the file, for file order
	lazy     *lazyRecord  // the record's checks deferred to the first read (nil: checked at open)
}

// NBytes is the storage size in bytes (Numel*ItemSize).
func (s *Storage) NBytes() int64 { return s.sec.Size() }

// Section returns the storage bytes as stored in the file (native byte order,
// which this package only accepts when it is little-endian). Reading through
// it does not verify the zip CRC; use Verify or Tensor.WriteTo for that. Its
// first read runs the record's deferred checks (see Check): a record that
// fails them fails the read.
func (s *Storage) Section() *io.SectionReader {
	return io.NewSectionReader(s.public(), 0, s.sec.Size())
}

// Verify reads the whole record once and checks its CRC-32 (zip
// checkpoints); the result is remembered. Legacy storages have no checksum.
func (s *Storage) Verify() error {
	if err := s.Check(); err != nil {
		return err
	}
	if !s.needsVerify() {
		return s.verifyErr()
	}
	_, err := s.copyVerifying(io.Discard, 0, 0)
	return err
}

func (s *Storage) needsVerify() bool { return s.hasCRC && s.verified.Load() == 0 }

func (s *Storage) verifyErr() error {
	if s.verified.Load() == 2 {
		return &Error{Path: s.path, Entry: s.entry, Offset: -1, Kind: ErrCorrupt, Msg: "CRC-32 mismatch"}
	}
	return nil
}

// copyVerifying streams the whole record through CRC-32, writing the bytes
// in [start, start+n) to w.
func (s *Storage) copyVerifying(w io.Writer, start, n int64) (int64, error) {
	buf := make([]byte, min(s.recLen, 1<<20))
	crc := uint32(0)
	var written int64
	for pos := int64(0); pos < s.recLen; {
		k := min(int64(len(buf)), s.recLen-pos)
		if err := readFull(s.r, buf[:k], s.recOff+pos); err != nil {
			return written, withPath(stampEntry(err, s.entry), s.path)
		}
		crc = crc32.Update(crc, crc32.IEEETable, buf[:k])
		lo, hi := max(pos, start), min(pos+k, start+n)
		if lo < hi {
			m, err := w.Write(buf[lo-pos : hi-pos])
			written += int64(m)
			if err != nil {
				return written, err
			}
		}
		pos += k
	}
	if crc != s.crc {
		s.verified.Store(2)
		return written, &Error{Path: s.path, Entry: s.entry, Offset: -1, Kind: ErrCorrupt,
			Msg: "CRC-32 mismatch (stored " + hex32(s.crc) + ", computed " + hex32(crc) + ")"}
	}
	s.verified.Store(1)
	return written, nil
}

func stampEntry(err error, entry string) error {
	if e, ok := err.(*Error); ok && e.Entry == "" {
		e.Entry = entry
	}
	return err
}

func hex32(v uint32) string {
	const digits = "0123456789abcdef"
	b := make([]byte, 8)
	for i := 7; i >= 0; i-- {
		b[i] = digits[v&0xf]
		v >>= 4
	}
	return string(b)
}

// Numel is the number of elements (1 for a 0-dim tensor).
func (t *Tensor) Numel() int64 {
	n := int64(1)
	for _, s := range t.Shape {
		n *= s // validated at open: no overflow
	}
	return n
}

// NumElements is the number of elements, as safetensors.TensorInfo names
// it (the same as Numel).
func (t *Tensor) NumElements() int64 { return t.Numel() }

// Size is the size of the tensor's contiguous form in bytes, as
// safetensors.TensorInfo names it (the same as NBytes).
func (t *Tensor) Size() int64 { return t.NBytes() }

// ItemSize is the size of one element in bytes.
func (t *Tensor) ItemSize() int { return t.itemSize }

// NBytes is the size of the tensor's contiguous form in bytes.
func (t *Tensor) NBytes() int64 { return t.Numel() * int64(t.itemSize) }

// Contiguous reports whether the view is C-contiguous: strides match the
// shape (strides of size-1 dimensions are ignored; empty tensors are
// contiguous).
func (t *Tensor) Contiguous() bool {
	if t.Numel() == 0 {
		return true
	}
	exp := int64(1)
	for i := len(t.Shape) - 1; i >= 0; i-- {
		if t.Shape[i] != 1 && t.Stride[i] != exp {
			return false
		}
		exp *= t.Shape[i]
	}
	return true
}

// SameView reports whether t and u are the identical view: same storage,
// dtype, offset, shape and stride.
func (t *Tensor) SameView(u *Tensor) bool {
	if t == nil || u == nil {
		return t == u
	}
	return t.Storage == u.Storage && t.DType == u.DType && t.Offset == u.Offset &&
		slices.Equal(t.Shape, u.Shape) && slices.Equal(t.Stride, u.Stride)
}

// ContiguousSection returns the tensor's bytes as a section of the file when
// the view is C-contiguous (ok false otherwise, and for BOOL tensors, whose
// stored bytes torch reads as 0 or 1: see WriteTo). Like Storage.Section it
// does not verify the CRC.
func (t *Tensor) ContiguousSection() (sec *io.SectionReader, ok bool) {
	if !t.Contiguous() || t.DType == safetensors.BOOL {
		return nil, false
	}
	return io.NewSectionReader(t.Storage.public(), t.Offset*int64(t.itemSize), t.NBytes()), true
}

// WriteTo writes the tensor's elements in C-contiguous little-endian order
// (the safetensors bytes); a view that would read the checkpoint's stored
// bytes more times than it allows is an [*ExpandedViewError] or an
// [*OverlappingViewError], before anything is written (see
// [Tensor.CheckView]). Contiguous views are one copy from the file;
// strided views (transposes, channels_last, expand, as_strided) are gathered
// through a buffer of at most the span of storage they touch, capped by
// Limits.MaxViewBuffer (beyond that, a few-MiB sliding window is used). The
// first read of a zip storage also verifies its CRC-32, and the first read
// of a storage runs the checks of its record that opening deferred (see
// Storage.Check); a CRC mismatch, or a record whose data descriptor does
// not end it where the next record starts, is reported after the bytes
// were written, so treat any error as fatal.
//
// A BOOL element is written as 0 or 1, the value torch computes with,
// whatever byte the storage holds (torch reads any non-zero byte as True).
func (t *Tensor) WriteTo(w io.Writer) (int64, error) {
	return t.WriteToBuffer(w, t.maxBuffer)
}

// WriteToBuffer is WriteTo with an explicit cap on the strided-view buffer;
// maxBuffer <= 0 means DefaultLimits().MaxViewBuffer.
func (t *Tensor) WriteToBuffer(w io.Writer, maxBuffer int64) (int64, error) {
	// The checks of the storage's record deferred to its first read: its
	// header before any byte is written, its end (the data descriptor,
	// which follows the data) after them, so that the record is read in
	// stream order.
	if err := t.checkExpansion(); err != nil {
		return 0, err
	}
	s := t.Storage
	if err := s.checkHead(); err != nil {
		return 0, err
	}
	n, err := t.writeTo(w, maxBuffer)
	if err == nil {
		err = s.Check()
	}
	return n, err
}

func (t *Tensor) writeTo(w io.Writer, maxBuffer int64) (int64, error) {
	if maxBuffer <= 0 {
		maxBuffer = DefaultLimits().MaxViewBuffer
	}
	n := t.NBytes()
	s := t.Storage
	if n == 0 {
		return 0, nil
	}
	if t.DType == safetensors.BOOL {
		w = &boolWriter{w: w}
	}
	is := int64(t.itemSize)
	if t.Contiguous() {
		start := t.Offset * is
		if s.needsVerify() {
			return s.copyVerifying(w, start, n)
		}
		if err := s.verifyErr(); err != nil {
			return 0, err
		}
		// A large buffer: few syscalls, and writers that hash each chunk
		// on another goroutine get work worth handing over.
		return io.CopyBuffer(onlyWriter{w}, io.NewSectionReader(s.sec, start, n), make([]byte, min(n, 1<<20)))
	}
	if err := s.Verify(); err != nil {
		return 0, err
	}
	g := newGather(t, w)
	lo, hi := t.span()
	if (hi-lo+1)*is <= maxBuffer {
		buf := make([]byte, (hi-lo+1)*is)
		if err := readFull(s.sec, buf, lo*is); err != nil {
			return 0, withPath(stampEntry(err, s.entry), s.path)
		}
		return g.fromBuffer(buf, lo)
	}
	return g.windowed()
}

// span returns the lowest and highest element index the view touches.
func (t *Tensor) span() (lo, hi int64) {
	lo, hi = t.Offset, t.Offset
	for i, s := range t.Shape {
		hi += (s - 1) * t.Stride[i]
	}
	return lo, hi
}

// boolWriter writes BOOL elements as torch reads them: a byte that is not 0
// is True, written 1.
type boolWriter struct {
	w   io.Writer
	buf []byte
}

func (b *boolWriter) Write(p []byte) (int, error) {
	if len(b.buf) < len(p) {
		b.buf = make([]byte, min(max(len(p), 64<<10), 1<<20))
	}
	done := 0
	for done < len(p) {
		chunk := p[done:min(len(p), done+len(b.buf))]
		q := b.buf[:len(chunk)]
		copy(q, chunk)
		normalizeBools(q)
		n, err := b.w.Write(q)
		done += n
		if err != nil {
			return done, err
		}
	}
	return done, nil
}

// normalizeBools turns every non-zero byte of b into 1.
func normalizeBools(b []byte) {
	for i, c := range b {
		if c > 1 {
			b[i] = 1
		}
	}
}

// onlyWriter hides a ReadFrom method so that io.CopyBuffer uses its buffer
// (os.File.ReadFrom falls back to 32 KiB copies for a section reader).
type onlyWriter struct{ w io.Writer }

func (o onlyWriter) Write(p []byte) (int, error) { return o.w.Write(p) }
