package safetensors

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"iter"

	"github.com/gosafetensors/safetensors/internal/fault"
)

// Reader gives access to the tensors of a safetensors file. A Reader made by
// [NewReader] reads the header once and each tensor's bytes on demand; one
// made by [Open] serves zero-copy views of a memory mapping. A Reader is safe
// for concurrent use by multiple goroutines.
type Reader struct {
	Header

	name string      // for error messages
	src  io.ReaderAt // where tensor bytes come from
	size int64       // total size of src
	mem  []byte      // the whole file when mapped, else nil
}

// WithName sets the file name that error messages start with.
func WithName(name string) Option {
	return func(o *options) error { o.name = name; return nil }
}

// NewReader reads and validates the header of the safetensors file held by r,
// which is size bytes long. Tensor data is read only when asked for, so r may
// be a file, an HTTP range reader or anything else that can read at offsets.
func NewReader(r io.ReaderAt, size int64, opts ...Option) (*Reader, error) {
	o, err := buildOptions(opts)
	if err != nil {
		return nil, err
	}
	if r, size, _, err = decompressed(r, size, o); err != nil {
		return nil, err
	}
	h, err := readHeaderAt(r, size, o)
	if err != nil {
		return nil, withFile(err, o.name)
	}
	return &Reader{Header: *h, name: o.name, src: r, size: size}, nil
}

// readHeaderAt reads the prefix and header JSON from r and validates them
// against size, in the reference's order.
func readHeaderAt(r io.ReaderAt, size int64, o options) (*Header, error) {
	if size < 0 {
		return nil, fmt.Errorf("safetensors: negative size %d", size)
	}
	var prefix [8]byte
	n, err := r.ReadAt(prefix[:min(size, 8)], 0)
	if err != nil && !(errors.Is(err, io.EOF) && int64(n) == min(size, 8)) {
		return nil, err
	}
	hlen, err := checkPrefix(prefix[:n], size, o)
	if err != nil {
		return nil, err
	}
	if mem, ok := r.(bytesReaderAt); ok { // mapped: parse in place
		var h *Header
		ferr := fault.CatchIn(mem, func() (err error) { h, err = parseHeader(mem[8:8+hlen], hlen, size); return err })
		if errors.Is(ferr, fault.ErrFault) {
			return nil, fmt.Errorf("reading the %d-byte header through the mapping (the file shrank?): %w", hlen, ferr)
		}
		return h, ferr
	}
	// hlen is at most the limit and fits inside size: allocation is justified.
	buf := make([]byte, hlen)
	if m, err := r.ReadAt(buf, 8); err != nil && !(errors.Is(err, io.EOF) && m == len(buf)) {
		return nil, err
	}
	return parseHeader(buf, hlen, size)
}

// parseHeader parses and validates header JSON b (length hlen from the
// prefix); fileSize < 0 skips the check that the data fills the file.
func parseHeader(b []byte, hlen uint64, fileSize int64) (*Header, error) {
	raw, index, meta, warnings, err := parseHeaderJSON(b, 8, false)
	var dup *duplicateKeyError
	if errors.As(err, &dup) {
		fe := dup.FormatError
		if _, lerr := parseHeader1(b, hlen, fileSize, true); lerr == nil {
			fe.Msg += "; the reference keeps the last entry and accepts the file)"
		} else {
			var le *FormatError
			if errors.As(lerr, &le) {
				fe.Msg += "; the reference keeps the last entry and reports " + le.Variant() + ")"
			} else {
				fe.Msg += ")"
			}
		}
		return nil, fe
	}
	if err != nil {
		return nil, err
	}
	return finishHeader(raw, index, meta, warnings, hlen, fileSize)
}

// parseHeader1 parses without the duplicate-key explanation.
func parseHeader1(b []byte, hlen uint64, fileSize int64, lenient bool) (*Header, error) {
	raw, index, meta, warnings, err := parseHeaderJSON(b, 8, lenient)
	if err != nil {
		return nil, err
	}
	return finishHeader(raw, index, meta, warnings, hlen, fileSize)
}

// finishHeader validates parsed entries and builds the Header.
func finishHeader(raw []rawTensor, index map[string]int, meta map[string]string, warnings []string, hlen uint64, fileSize int64) (*Header, error) {
	end, err := validate(raw)
	if err != nil {
		return nil, err
	}
	if fileSize >= 0 {
		total, over := add64(end, 8+hlen)
		if over || total != uint64(fileSize) {
			if over || total > uint64(fileSize) {
				return nil, newError(ErrMetadataIncompleteBuffer, fileSize, "file is %d bytes but the header describes %s", fileSize, describeSize(end, hlen, over))
			}
			return nil, newError(ErrMetadataIncompleteBuffer, int64(total), "file is %d bytes but the header describes only %d: %d bytes after the last tensor", fileSize, total, uint64(fileSize)-total)
		}
	}
	infos, err := toInfos(raw)
	if err != nil {
		return nil, err
	}
	return &Header{Metadata: meta, Tensors: infos, Size: int64(hlen), Warnings: warnings, index: index}, nil
}

func describeSize(end, hlen uint64, over bool) string {
	if over {
		return "more than 2^64 bytes"
	}
	return fmt.Sprintf("%d bytes", end+8+hlen)
}

func add64(a, b uint64) (uint64, bool) {
	s := a + b
	return s, s < a
}

func (h *Header) buildIndex() {
	h.index = make(map[string]int, len(h.Tensors))
	for i, t := range h.Tensors {
		h.index[t.Name] = i
	}
}

// ReadHeader reads the header at the start of r and validates it, without
// reading tensor data; like png.DecodeConfig. It cannot check that the data
// section is complete, since it does not know the file's size. Memory grows
// only as header bytes actually arrive.
func ReadHeader(r io.Reader, opts ...Option) (*Header, error) {
	o, err := buildOptions(opts)
	if err != nil {
		return nil, err
	}
	var prefix [8]byte
	n, err := io.ReadFull(r, prefix[:])
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		return nil, err
	}
	hlen, err := checkPrefix(prefix[:n], -1, o)
	if err != nil {
		return nil, withFile(err, o.name)
	}
	var buf bytes.Buffer
	m, err := io.Copy(&buf, io.LimitReader(r, int64(hlen)))
	if err != nil {
		return nil, err
	}
	if uint64(m) < hlen {
		return nil, withFile(newError(ErrInvalidHeaderLength, 0, "header length %d runs past the end of the input (%d bytes)", hlen, 8+m), o.name)
	}
	h, err := parseHeader(buf.Bytes(), hlen, -1)
	return h, withFile(err, o.name)
}

// Name returns the file name used in error messages.
func (r *Reader) Name() string { return r.name }

// Tensor returns the named tensor.
func (r *Reader) Tensor(name string) (*Tensor, error) {
	i, ok := r.lookup(name)
	if !ok {
		return nil, MissingTensor(r.name, name)
	}
	return r.tensorAt(i)
}

func (r *Reader) tensorAt(i int) (*Tensor, error) {
	if r.src == nil && r.mem == nil {
		return nil, ErrClosed
	}
	info := r.Tensors[i]
	off := r.DataOffset() + info.DataOffsets[0]
	t := &Tensor{TensorInfo: info, file: r.name, src: r.src, off: off}
	if r.mem != nil {
		t.data = r.mem[off : off+info.Size() : off+info.Size()]
		t.mapped = true
	}
	return t, nil
}

// All iterates over the tensors in file order. Iteration stops early if the
// reader has been closed, yielding the error.
func (r *Reader) All() iter.Seq2[*Tensor, error] {
	return func(yield func(*Tensor, error) bool) {
		for i := range r.Tensors {
			t, err := r.tensorAt(i)
			if !yield(t, err) || err != nil {
				return
			}
		}
	}
}

// lookup finds a tensor index; it works on Headers built by hand too.
func (h *Header) lookup(name string) (int, bool) {
	if h.index != nil {
		i, ok := h.index[name]
		return i, ok
	}
	for i, t := range h.Tensors {
		if t.Name == name {
			return i, true
		}
	}
	return 0, false
}

// ReadAll reads the whole data section into one newly allocated buffer and
// returns every tensor, in file order, backed by its own part of it: the
// fastest way to load a file into memory (one read, one allocation), like
// the reference's load_file. The tensors stay valid after the file is closed.
func (r *Reader) ReadAll() ([]*Tensor, error) {
	if r.src == nil && r.mem == nil {
		return nil, ErrClosed
	}
	size := r.DataSize()
	buf := make([]byte, size)
	if size > 0 {
		n, err := r.src.ReadAt(buf, r.DataOffset())
		if err != nil && !(errors.Is(err, io.EOF) && int64(n) == size) {
			// an I/O failure, not a format error: keep the cause
			return nil, fmt.Errorf("%s: reading the %d-byte data section at byte %d: %w", r.name, size, r.DataOffset()+int64(n), err)
		}
	}
	out := make([]*Tensor, len(r.Tensors))
	for i, info := range r.Tensors {
		b, e := info.DataOffsets[0], info.DataOffsets[1]
		out[i] = &Tensor{TensorInfo: info, file: r.name, data: buf[b:e:e]}
	}
	return out, nil
}
