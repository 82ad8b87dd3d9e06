package safetensors

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
	"maps"
	"path/filepath"
	"slices"
	"strconv"

	"github.com/gosafetensors/safetensors/internal/atomicfile"
)

// TensorData is a tensor to write: its description and its little-endian bytes.
type TensorData struct {
	Name  string
	DType DType
	Shape []int64
	Data  []byte
}

// ErrWrite is wrapped by errors about what a caller asked a Writer to write.
var ErrWrite = errors.New("safetensors: invalid write")

// Layout sorts tensors into the reference writer's order (dtype in
// descending table order, then name bytewise), assigns their data offsets and
// encodes the header. It refuses the name "__metadata__", duplicate names,
// negative dimensions, sizes that overflow, sub-byte tensors that do not fill
// whole bytes, and headers over [DefaultMaxHeaderSize]. A nil metadata map
// writes no "__metadata__" entry; an empty non-nil one writes {}.
func Layout(tensors []TensorInfo, metadata map[string]string) (*Header, []byte, error) {
	infos := slices.Clone(tensors)
	slices.SortFunc(infos, func(a, b TensorInfo) int {
		if c := cmp.Compare(b.DType, a.DType); c != 0 {
			return c
		}
		return cmp.Compare(a.Name, b.Name)
	})
	var off int64
	for i := range infos {
		t := &infos[i]
		if i > 0 && infos[i-1].Name == t.Name {
			return nil, nil, fmt.Errorf("%w: tensor %q appears twice", ErrWrite, t.Name)
		}
		if t.Name == metadataKey {
			return nil, nil, fmt.Errorf("%w: %q is reserved for metadata and cannot name a tensor", ErrWrite, t.Name)
		}
		size, err := byteSize(t.DType, t.Shape)
		if err != nil {
			return nil, nil, fmt.Errorf("%w: tensor %q: %v", ErrWrite, t.Name, err)
		}
		end, over := add64(uint64(off), uint64(size))
		if over || end > 1<<62 {
			return nil, nil, fmt.Errorf("%w: tensor %q: data section overflows", ErrWrite, t.Name)
		}
		t.Shape = slices.Clone(t.Shape)
		t.DataOffsets = [2]int64{off, int64(end)}
		off = int64(end)
	}
	// Duplicates are adjacent only when dtypes are equal; check the rest.
	seen := make(map[string]struct{}, len(infos))
	for _, t := range infos {
		if _, dup := seen[t.Name]; dup {
			return nil, nil, fmt.Errorf("%w: tensor %q appears twice", ErrWrite, t.Name)
		}
		seen[t.Name] = struct{}{}
	}
	hdr := encodeHeader(infos, metadata)
	if len(hdr)-8 > DefaultMaxHeaderSize {
		return nil, nil, newError(ErrHeaderTooLarge, -1, "header of %d bytes exceeds the limit of %d", len(hdr)-8, DefaultMaxHeaderSize)
	}
	h := &Header{Metadata: maps.Clone(metadata), Tensors: infos, Size: int64(len(hdr) - 8)}
	h.buildIndex()
	return h, hdr, nil
}

// byteSize returns the size of a tensor's data, overflow-checked.
func byteSize(d DType, shape []int64) (int64, error) {
	if !d.Valid() {
		return 0, fmt.Errorf("invalid dtype %d", uint8(d))
	}
	n := uint64(1)
	for _, s := range shape {
		if s < 0 {
			return 0, fmt.Errorf("negative dimension in shape %v", shape)
		}
		over, p := mul64(n, uint64(s))
		if over {
			return 0, fmt.Errorf("element count of shape %v overflows (ValidationOverflow)", shape)
		}
		n = p
	}
	over, bits := mul64(n, dtypeBits[d])
	if over || bits/8 > 1<<62 {
		return 0, fmt.Errorf("size of shape %v of %s overflows (ValidationOverflow)", shape, d)
	}
	if bits%8 != 0 {
		return 0, fmt.Errorf("%d %s elements do not fill whole bytes (MisalignedSlice)", n, d)
	}
	return int64(bits / 8), nil
}

// encodeHeader writes the 8-byte prefix and the header JSON exactly as the
// reference does: compact, "__metadata__" first with sorted keys, tensors in
// offset order, padded with spaces to a multiple of 8.
func encodeHeader(infos []TensorInfo, metadata map[string]string) []byte {
	b := make([]byte, 8, 8+64*len(infos)+16)
	b = append(b, '{')
	if metadata != nil {
		b = appendJSONString(b, metadataKey)
		b = append(b, ":{"...)
		for i, k := range slices.Sorted(maps.Keys(metadata)) {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendJSONString(b, k)
			b = append(b, ':')
			b = appendJSONString(b, metadata[k])
		}
		b = append(b, '}')
		if len(infos) > 0 {
			b = append(b, ',')
		}
	}
	for i, t := range infos {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendJSONString(b, t.Name)
		b = append(b, `:{"dtype":"`...)
		b = append(b, t.DType.String()...)
		b = append(b, `","shape":[`...)
		for j, d := range t.Shape {
			if j > 0 {
				b = append(b, ',')
			}
			b = strconv.AppendInt(b, d, 10)
		}
		b = append(b, `],"data_offsets":[`...)
		b = strconv.AppendInt(b, t.DataOffsets[0], 10)
		b = append(b, ',')
		b = strconv.AppendInt(b, t.DataOffsets[1], 10)
		b = append(b, "]}"...)
	}
	b = append(b, '}')
	for (len(b)-8)%8 != 0 {
		b = append(b, ' ')
	}
	n := uint64(len(b) - 8)
	for i := range 8 {
		b[i] = byte(n >> (8 * i))
	}
	return b
}

// appendJSONString escapes like serde_json: only '"', '\\' and bytes below
// 0x20, with the short forms \b \t \n \f \r and lowercase \u00XX otherwise.
func appendJSONString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		b = append(b, s[start:i]...)
		switch c {
		case '"':
			b = append(b, `\"`...)
		case '\\':
			b = append(b, `\\`...)
		case '\b':
			b = append(b, `\b`...)
		case '\t':
			b = append(b, `\t`...)
		case '\n':
			b = append(b, `\n`...)
		case '\f':
			b = append(b, `\f`...)
		case '\r':
			b = append(b, `\r`...)
		default:
			b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&15])
		}
		start = i + 1
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// Writer streams a safetensors file: the header is written first, then each
// tensor's bytes in file order (see [Writer.Tensors]). Memory use does not
// depend on the size of the data.
type Writer struct {
	dst    io.Writer
	header *Header
	next   int // index of the next tensor to write
	err    error
}

// NewWriter writes the header for the given tensors and metadata to w; the
// DataOffsets of the infos are ignored and recomputed. The tensor data must
// then be written with WriteTensor or CopyTensor in the order Tensors gives.
func NewWriter(w io.Writer, tensors []TensorInfo, metadata map[string]string) (*Writer, error) {
	h, hdr, err := Layout(tensors, metadata)
	if err != nil {
		return nil, err
	}
	if _, err := w.Write(hdr); err != nil {
		return nil, err
	}
	return &Writer{dst: w, header: h}, nil
}

// Header returns the header being written, with data offsets.
func (w *Writer) Header() *Header { return w.header }

// Tensors returns the tensors in the order their data must be written.
func (w *Writer) Tensors() []TensorInfo { return w.header.Tensors }

// Next returns the tensor whose data is expected next, and false when all
// tensors have been written.
func (w *Writer) Next() (TensorInfo, bool) {
	if w.next >= len(w.header.Tensors) {
		return TensorInfo{}, false
	}
	return w.header.Tensors[w.next], true
}

func (w *Writer) expect(name string) (TensorInfo, error) {
	if w.err != nil {
		return TensorInfo{}, w.err
	}
	t, ok := w.Next()
	if !ok {
		return t, fmt.Errorf("%w: tensor %q: every tensor has already been written", ErrWrite, name)
	}
	if t.Name != name {
		return t, fmt.Errorf("%w: tensor %q written out of order: %q comes next (order is dtype, then name)", ErrWrite, name, t.Name)
	}
	return t, nil
}

// WriteTensor writes the bytes of the named tensor, which must be the next
// one and have exactly the size its dtype and shape require.
func (w *Writer) WriteTensor(name string, data []byte) error {
	t, err := w.expect(name)
	if err != nil {
		return err
	}
	if int64(len(data)) != t.Size() {
		return fmt.Errorf("%w: tensor %q: got %d bytes, its dtype and shape need %d", ErrWrite, name, len(data), t.Size())
	}
	if _, err := w.dst.Write(data); err != nil {
		w.err = err
		return err
	}
	w.next++
	return nil
}

// CopyTensor copies the named tensor's bytes from r, which must hold exactly
// the tensor's size: a shorter or longer r is an error.
func (w *Writer) CopyTensor(name string, r io.Reader) error {
	t, err := w.expect(name)
	if err != nil {
		return err
	}
	n, err := io.CopyN(w.dst, r, t.Size())
	if err != nil {
		if errors.Is(err, io.EOF) {
			err = fmt.Errorf("%w: tensor %q: source ended after %d of %d bytes", ErrWrite, name, n, t.Size())
		}
		w.err = err
		return err
	}
	var one [1]byte
	if m, _ := io.ReadFull(r, one[:]); m > 0 {
		w.err = fmt.Errorf("%w: tensor %q: source holds more than the %d bytes its dtype and shape need", ErrWrite, name, t.Size())
		return w.err
	}
	w.next++
	return nil
}

// WriteTensorFrom writes the named tensor's bytes by calling src.WriteTo,
// which must produce exactly the tensor's size; producing more is stopped
// with an error at the first excess byte. It lets a producer such as a
// strided gather push its bytes straight into the file without a pipe.
func (w *Writer) WriteTensorFrom(name string, src io.WriterTo) error {
	t, err := w.expect(name)
	if err != nil {
		return err
	}
	lw := &limitWriter{w: w.dst, left: t.Size()}
	n, err := src.WriteTo(lw)
	switch {
	case lw.err != nil:
		err = lw.err
	case err == nil && n != t.Size():
		err = fmt.Errorf("%w: tensor %q: source wrote %d bytes, its dtype and shape need %d", ErrWrite, name, n, t.Size())
	case err == nil && lw.left != 0:
		err = fmt.Errorf("%w: tensor %q: source ended %d bytes short", ErrWrite, name, lw.left)
	}
	if err != nil {
		w.err = err
		return err
	}
	w.next++
	return nil
}

// limitWriter passes at most left bytes through and fails beyond.
type limitWriter struct {
	w    io.Writer
	left int64
	err  error
}

func (l *limitWriter) Write(p []byte) (int, error) {
	if int64(len(p)) > l.left {
		l.err = fmt.Errorf("%w: source holds more bytes than the tensor's dtype and shape need", ErrWrite)
		return 0, l.err
	}
	n, err := l.w.Write(p)
	l.left -= int64(n)
	return n, err
}

// Close checks that every tensor was written. It does not close the
// underlying writer.
func (w *Writer) Close() error {
	if w.err != nil {
		return w.err
	}
	if t, ok := w.Next(); ok {
		return fmt.Errorf("%w: closed before tensor %q (and %d more) was written", ErrWrite, t.Name, len(w.header.Tensors)-w.next-1)
	}
	return nil
}

// FileWriter writes a safetensors file atomically: the data goes to a
// temporary file in the destination's directory, which Close syncs and
// renames over the destination. Until then the destination is untouched.
type FileWriter struct {
	*Writer
	f *atomicfile.File
}

// Create starts writing the safetensors file at path. Write every tensor,
// then Close to commit; call Abort (or Close after an error) to discard.
func Create(path string, tensors []TensorInfo, metadata map[string]string) (*FileWriter, error) {
	h, hdr, err := Layout(tensors, metadata)
	if err != nil {
		return nil, err
	}
	f, err := atomicfile.Create(path)
	if err != nil {
		return nil, err
	}
	if !f.Direct() {
		if err := atomicfile.CheckSpace(filepath.Dir(path), int64(len(hdr))+h.DataSize()); err != nil {
			f.Abort()
			return nil, err
		}
	}
	if _, err := f.Write(hdr); err != nil {
		f.Abort()
		return nil, err
	}
	return &FileWriter{Writer: &Writer{dst: f, header: h}, f: f}, nil
}

// Close commits the file if every tensor was written without error, and
// otherwise discards it and returns the error.
func (fw *FileWriter) Close() error {
	if err := fw.Writer.Close(); err != nil {
		fw.f.Abort()
		return err
	}
	return fw.f.Commit()
}

// CloseVerified is Close with a check before the file appears: once every
// tensor is written, verify reads the new file back through a [Reader]
// while it is being synced to disk, and the file is renamed into place only
// if verify returns nil. The Reader is valid only during the call.
func (fw *FileWriter) CloseVerified(verify func(*Reader) error) error {
	if err := fw.Writer.Close(); err != nil {
		fw.f.Abort()
		return err
	}
	return fw.f.CommitAfter(func() error {
		size := fw.header.FileSize()
		r, err := NewReader(fw.f.File, size, WithName(fw.f.Path()))
		if err != nil {
			return fmt.Errorf("safetensors: re-reading %s: %w", fw.f.Path(), err)
		}
		// Read with pread, not through a mapping: mapped pages would count
		// as resident memory of the process for the whole file.
		return verify(r)
	})
}

// Abort discards the file; the destination is left as it was.
func (fw *FileWriter) Abort() error { return fw.f.Abort() }

func infosOf(tensors []TensorData) ([]TensorInfo, map[string][]byte) {
	infos := make([]TensorInfo, len(tensors))
	data := make(map[string][]byte, len(tensors))
	for i, t := range tensors {
		infos[i] = TensorInfo{Name: t.Name, DType: t.DType, Shape: t.Shape}
		data[t.Name] = t.Data
	}
	return infos, data
}

// WriteFile writes tensors and metadata to path atomically.
func WriteFile(path string, tensors []TensorData, metadata map[string]string) error {
	infos, data := infosOf(tensors)
	fw, err := Create(path, infos, metadata)
	if err != nil {
		return err
	}
	for _, t := range fw.Tensors() {
		if err := fw.WriteTensor(t.Name, data[t.Name]); err != nil {
			fw.Abort()
			return err
		}
	}
	return fw.Close()
}

// Marshal returns the bytes of a safetensors file holding tensors and
// metadata, identical to what the reference writer produces.
func Marshal(tensors []TensorData, metadata map[string]string) ([]byte, error) {
	infos, data := infosOf(tensors)
	h, hdr, err := Layout(infos, metadata)
	if err != nil {
		return nil, err
	}
	buf := bytes.NewBuffer(make([]byte, 0, int64(len(hdr))+h.DataSize()))
	w := &Writer{dst: buf, header: h}
	buf.Write(hdr)
	for _, t := range h.Tensors {
		if err := w.WriteTensor(t.Name, data[t.Name]); err != nil {
			return nil, err
		}
	}
	return buf.Bytes(), nil
}
