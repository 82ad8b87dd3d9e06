// Package torchtest writes PyTorch zip checkpoints from Go, laid out the way
// torch.save (torch 1.13, pickle protocol 2) lays them out: STORED entries
// whose data starts on a 64-byte boundary (an "FB" padding extra field), data
// descriptors, a ZIP64 end record, and a data.pkl that is an OrderedDict (or
// dict) of torch._utils._rebuild_tensor_v2 tensors; and legacy (non-zip)
// checkpoints of the same tensors ([WriteLegacy]). It exists so tests and
// benchmarks can build big or odd checkpoints without Python.
package torchtest

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"os"
	"sort"
	"strconv"
)

// Tensor describes one entry of the checkpoint.
type Tensor struct {
	Name  string
	DType string  // F32 F16 BF16 F64 I8 U8 I16 I32 I64 BOOL C64 (v2, typed storage); U16 U32 U64 F8_E4M3 F8_E5M2 (v3, UntypedStorage)
	Shape []int64 // sizes

	// Data is the storage: contiguous little-endian bytes. For a view of a
	// storage written by an earlier tensor, leave Data nil and set Storage.
	Data []byte
	// DataSize with a nil Data writes a storage of DataSize bytes produced by
	// Fill (for checkpoints too big to hold in memory).
	DataSize int64
	Fill     func(w io.Writer) error

	Storage      string  // storage group; tensors with the same non-empty group share one record
	Offset       int64   // storage offset in elements
	Stride       []int64 // nil: C-contiguous
	RequiresGrad bool
	Parameter    bool   // wrap in torch._utils._rebuild_parameter
	SameAs       string // write a memo reference to this earlier entry (tied weights) instead
	Location     string // default "cpu"
}

// Options controls the archive layout.
type Options struct {
	Prefix    string // folder inside the archive; default "archive"
	Version   string // version record; default "3"
	ByteOrder string // if set, a byteorder record ("little" or "big")
	PlainDict bool   // root is a plain dict instead of collections.OrderedDict
}

var storageTypes = map[string]struct {
	name     string
	itemSize int
}{
	"F32": {"FloatStorage", 4}, "F16": {"HalfStorage", 2}, "BF16": {"BFloat16Storage", 2},
	"F64": {"DoubleStorage", 8}, "I8": {"CharStorage", 1}, "U8": {"ByteStorage", 1},
	"I16": {"ShortStorage", 2}, "I32": {"IntStorage", 4}, "I64": {"LongStorage", 8},
	"BOOL": {"BoolStorage", 1}, "C64": {"ComplexFloatStorage", 8},
}

var v3Types = map[string]struct {
	name     string
	itemSize int
}{
	"U16": {"uint16", 2}, "U32": {"uint32", 4}, "U64": {"uint64", 8},
	"F8_E4M3": {"float8_e4m3fn", 1}, "F8_E5M2": {"float8_e5m2", 1},
}

// ItemSize returns the element size of a dtype, or 0 if unknown.
func ItemSize(dtype string) int {
	if s, ok := storageTypes[dtype]; ok {
		return s.itemSize
	}
	return v3Types[dtype].itemSize
}

type storage struct {
	key   string
	size  int64
	data  []byte
	fill  func(io.Writer) error
	numel int64
}

// pickler emits protocol-2 opcodes the way CPython's pickle module does.
type pickler struct {
	b      []byte
	memo   int
	refs   map[string]int // memo index of interned strings/globals by identity key
	legacy bool           // persistent ids as torch's legacy format writes them
}

func (p *pickler) put() int {
	i := p.memo
	if i < 256 {
		p.b = append(p.b, 'q', byte(i))
	} else {
		p.b = append(p.b, 'r')
		p.b = binary.LittleEndian.AppendUint32(p.b, uint32(i))
	}
	p.memo++
	return i
}

func (p *pickler) get(i int) {
	if i < 256 {
		p.b = append(p.b, 'h', byte(i))
	} else {
		p.b = append(p.b, 'j')
		p.b = binary.LittleEndian.AppendUint32(p.b, uint32(i))
	}
}

// shared writes v once and memo references afterwards (same Python object).
func (p *pickler) shared(id string, write func()) {
	if i, ok := p.refs[id]; ok {
		p.get(i)
		return
	}
	write()
	p.refs[id] = p.put()
}

func (p *pickler) str(s string) {
	p.b = append(p.b, 'X')
	p.b = binary.LittleEndian.AppendUint32(p.b, uint32(len(s)))
	p.b = append(p.b, s...)
}

func (p *pickler) global(module, name string) {
	p.shared("g:"+module+"."+name, func() {
		p.b = append(p.b, 'c')
		p.b = append(p.b, module+"\n"+name+"\n"...)
	})
}

func (p *pickler) int(v int64) {
	switch {
	case v >= 0 && v < 256:
		p.b = append(p.b, 'K', byte(v))
	case v >= 0 && v <= 0xffff:
		p.b = append(p.b, 'M', byte(v), byte(v>>8))
	case v >= math.MinInt32 && v <= math.MaxInt32:
		p.b = append(p.b, 'J')
		p.b = binary.LittleEndian.AppendUint32(p.b, uint32(int32(v)))
	default:
		var le []byte
		for x := v; ; x >>= 8 {
			le = append(le, byte(x))
			if (x >= -128 && x < 128) && (x < 0) == (byte(x)&0x80 != 0) {
				break
			}
		}
		p.b = append(p.b, 0x8a, byte(len(le)))
		p.b = append(p.b, le...)
	}
}

func (p *pickler) intTuple(v []int64) {
	if len(v) == 0 {
		p.b = append(p.b, ')')
		return
	}
	if len(v) > 3 {
		p.b = append(p.b, '(')
	}
	for _, x := range v {
		p.int(x)
	}
	if len(v) > 3 {
		p.b = append(p.b, 't')
	} else {
		p.b = append(p.b, 0x84+byte(len(v)))
	}
	p.put()
}

func (p *pickler) bool(v bool) {
	if v {
		p.b = append(p.b, 0x88)
	} else {
		p.b = append(p.b, 0x89)
	}
}

// emptyOrderedDict writes collections.OrderedDict() (a new object each time).
func (p *pickler) emptyOrderedDict() {
	p.global("collections", "OrderedDict")
	p.b = append(p.b, ')', 'R')
	p.put()
}

func contiguousStride(shape []int64) []int64 {
	st := make([]int64, len(shape))
	acc := int64(1)
	for i := len(shape) - 1; i >= 0; i-- {
		st[i] = acc
		acc *= shape[i]
	}
	return st
}

// DataPickle returns the data.pkl bytes for tensors and the storages they
// use (in first-use order).
func DataPickle(tensors []Tensor, opts Options) ([]byte, []*storage, error) {
	return dataPickle(tensors, opts, false)
}

func dataPickle(tensors []Tensor, opts Options, legacy bool) ([]byte, []*storage, error) {
	p := &pickler{refs: map[string]int{}, legacy: legacy}
	p.b = append(p.b, 0x80, 2)
	if opts.PlainDict {
		p.b = append(p.b, '}')
		p.put()
	} else {
		p.global("collections", "OrderedDict")
		p.b = append(p.b, ')', 'R')
		p.put()
	}
	var stores []*storage
	byGroup := map[string]*storage{}
	objs := map[string]int{}
	// CPython's _batch_setitems: batches of 1000, a batch of one uses SETITEM
	for start := 0; start < len(tensors); start += 1000 {
		batch := tensors[start:min(start+1000, len(tensors))]
		if len(batch) > 1 {
			p.b = append(p.b, '(')
		}
		for _, t := range batch {
			p.str(t.Name)
			p.put()
			if t.SameAs != "" {
				idx, ok := objs[t.SameAs]
				if !ok {
					return nil, nil, fmt.Errorf("torchtest: %q: SameAs %q is not an earlier entry", t.Name, t.SameAs)
				}
				p.get(idx)
				continue
			}
			st, err := storageFor(t, byGroup, &stores)
			if err != nil {
				return nil, nil, err
			}
			if err := p.tensor(t, st); err != nil {
				return nil, nil, err
			}
			objs[t.Name] = p.memo - 1
		}
		if len(batch) > 1 {
			p.b = append(p.b, 'u')
		} else {
			p.b = append(p.b, 's')
		}
	}
	p.b = append(p.b, '.')
	return p.b, stores, nil
}

func storageFor(t Tensor, byGroup map[string]*storage, stores *[]*storage) (*storage, error) {
	is := ItemSize(t.DType)
	if is == 0 {
		return nil, fmt.Errorf("torchtest: %q: unknown dtype %q", t.Name, t.DType)
	}
	if t.Storage != "" {
		if st, ok := byGroup[t.Storage]; ok {
			if t.Data != nil || t.Fill != nil {
				return nil, fmt.Errorf("torchtest: %q: storage %q already has data", t.Name, t.Storage)
			}
			return st, nil
		}
	}
	st := &storage{key: strconv.Itoa(len(*stores)), data: t.Data, size: int64(len(t.Data)), fill: t.Fill}
	if t.Data == nil {
		st.size = t.DataSize
		if t.Fill == nil && t.DataSize == 0 {
			// an empty storage is fine for zero-element tensors
			st.size = 0
		}
	}
	if st.size%int64(is) != 0 {
		return nil, fmt.Errorf("torchtest: %q: %d bytes is not a multiple of the %d-byte element", t.Name, st.size, is)
	}
	st.numel = st.size / int64(is)
	if _, v3 := v3Types[t.DType]; v3 {
		st.numel = st.size
	}
	*stores = append(*stores, st)
	if t.Storage != "" {
		byGroup[t.Storage] = st
	}
	return st, nil
}

func (p *pickler) tensor(t Tensor, st *storage) error {
	_, v3 := v3Types[t.DType]
	if v3 && p.legacy {
		return fmt.Errorf("torchtest: %q: %s has no legacy storage type", t.Name, t.DType)
	}
	if t.Parameter {
		p.global("torch._utils", "_rebuild_parameter")
	}
	if v3 {
		p.global("torch._utils", "_rebuild_tensor_v3")
	} else {
		p.global("torch._utils", "_rebuild_tensor_v2")
	}
	p.b = append(p.b, '(') // args
	p.b = append(p.b, '(') // persistent id
	p.shared("s:storage", func() { p.str("storage") })
	if v3 {
		p.global("torch", "UntypedStorage")
	} else {
		p.global("torch", storageTypes[t.DType].name)
	}
	p.shared("k:"+st.key, func() { p.str(st.key) })
	loc := t.Location
	if loc == "" {
		loc = "cpu"
	}
	p.shared("l:"+loc, func() { p.str(loc) })
	p.int(st.numel)
	if p.legacy {
		p.b = append(p.b, 'N') // view_metadata
	}
	p.b = append(p.b, 't')
	p.put()
	p.b = append(p.b, 'Q')
	p.int(t.Offset)
	p.intTuple(t.Shape)
	stride := t.Stride
	if stride == nil {
		stride = contiguousStride(t.Shape)
	}
	p.intTuple(stride)
	p.bool(t.RequiresGrad && !t.Parameter)
	p.emptyOrderedDict()
	if v3 {
		p.global("torch", v3Types[t.DType].name)
	}
	p.b = append(p.b, 't')
	p.put()
	p.b = append(p.b, 'R')
	p.put()
	if t.Parameter {
		p.bool(t.RequiresGrad)
		p.emptyOrderedDict()
		p.b = append(p.b, 0x87, 'R')
		p.put()
	}
	return nil
}

// zipWriter writes torch-style STORED entries.
type zipWriter struct {
	w   *bufio.Writer
	pos int64
	cd  []cdEntry
	err error
}

type cdEntry struct {
	name        string
	crc         uint32
	size, local int64
}

func (z *zipWriter) write(b []byte) {
	if z.err != nil {
		return
	}
	n, err := z.w.Write(b)
	z.pos += int64(n)
	z.err = err
}

type countingCRC struct {
	z   *zipWriter
	crc uint32
	n   int64
}

func (c *countingCRC) Write(b []byte) (int, error) {
	c.crc = crc32.Update(c.crc, crc32.IEEETable, b)
	c.n += int64(len(b))
	c.z.write(b)
	return len(b), c.z.err
}

// entry writes one record; body writes exactly size bytes.
func (z *zipWriter) entry(name string, size int64, body func(io.Writer) error) {
	local := z.pos
	start := local + 30 + int64(len(name)) + 4
	big := size >= math.MaxUint32 || local >= math.MaxUint32
	if big {
		start += 4
		if size >= math.MaxUint32 {
			start += 16
		}
		if local >= math.MaxUint32 {
			start += 8
		}
	}
	pad := (64 - start%64) % 64
	var extra []byte
	if big {
		var z64 []byte
		if size >= math.MaxUint32 {
			z64 = binary.LittleEndian.AppendUint64(z64, 0)
			z64 = binary.LittleEndian.AppendUint64(z64, 0)
		}
		if local >= math.MaxUint32 {
			z64 = binary.LittleEndian.AppendUint64(z64, uint64(local))
		}
		extra = append(extra, 1, 0, byte(len(z64)), 0)
		extra = append(extra, z64...)
	}
	extra = append(extra, 'F', 'B', byte(pad), byte(pad>>8))
	for i := int64(0); i < pad; i++ {
		extra = append(extra, 'Z')
	}
	h := make([]byte, 0, 30+len(name)+len(extra))
	h = binary.LittleEndian.AppendUint32(h, 0x04034b50)
	h = binary.LittleEndian.AppendUint16(h, 0)      // version needed
	h = binary.LittleEndian.AppendUint16(h, 0x0808) // data descriptor, UTF-8
	h = append(h, make([]byte, 2+4+4+4+4)...)       // method, time/date, crc, sizes (in the descriptor)
	h = binary.LittleEndian.AppendUint16(h, uint16(len(name)))
	h = binary.LittleEndian.AppendUint16(h, uint16(len(extra)))
	h = append(h, name...)
	h = append(h, extra...)
	z.write(h)
	c := &countingCRC{z: z}
	if err := body(c); err != nil && z.err == nil {
		z.err = err
	}
	if z.err == nil && c.n != size {
		z.err = fmt.Errorf("torchtest: %s: wrote %d bytes, want %d", name, c.n, size)
	}
	d := binary.LittleEndian.AppendUint32(nil, 0x08074b50)
	d = binary.LittleEndian.AppendUint32(d, c.crc)
	if size >= math.MaxUint32 {
		d = binary.LittleEndian.AppendUint64(d, uint64(size))
		d = binary.LittleEndian.AppendUint64(d, uint64(size))
	} else {
		d = binary.LittleEndian.AppendUint32(d, uint32(size))
		d = binary.LittleEndian.AppendUint32(d, uint32(size))
	}
	z.write(d)
	z.cd = append(z.cd, cdEntry{name: name, crc: c.crc, size: size, local: local})
}

func (z *zipWriter) bytesEntry(name string, b []byte) {
	z.entry(name, int64(len(b)), func(w io.Writer) error { _, err := w.Write(b); return err })
}

func (z *zipWriter) finish() error {
	cdStart := z.pos
	for _, e := range z.cd {
		var z64 []byte
		size32, local32 := uint32(e.size), uint32(e.local)
		if e.size >= math.MaxUint32 {
			z64 = binary.LittleEndian.AppendUint64(z64, uint64(e.size))
			z64 = binary.LittleEndian.AppendUint64(z64, uint64(e.size))
			size32 = math.MaxUint32
		}
		if e.local >= math.MaxUint32 {
			z64 = binary.LittleEndian.AppendUint64(z64, uint64(e.local))
			local32 = math.MaxUint32
		}
		h := binary.LittleEndian.AppendUint32(nil, 0x02014b50)
		h = binary.LittleEndian.AppendUint16(h, 0)
		h = binary.LittleEndian.AppendUint16(h, 0)
		h = binary.LittleEndian.AppendUint16(h, 0x0808)
		h = append(h, 0, 0, 0, 0, 0, 0) // method, time, date
		h = binary.LittleEndian.AppendUint32(h, e.crc)
		h = binary.LittleEndian.AppendUint32(h, size32)
		h = binary.LittleEndian.AppendUint32(h, size32)
		h = binary.LittleEndian.AppendUint16(h, uint16(len(e.name)))
		xl := 0
		if len(z64) > 0 {
			xl = 4 + len(z64)
		}
		h = binary.LittleEndian.AppendUint16(h, uint16(xl))
		h = append(h, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0) // comment, disk, attrs
		h = binary.LittleEndian.AppendUint32(h, local32)
		h = append(h, e.name...)
		if len(z64) > 0 {
			h = append(h, 1, 0, byte(len(z64)), 0)
			h = append(h, z64...)
		}
		z.write(h)
	}
	cdSize := z.pos - cdStart
	n := uint64(len(z.cd))
	end64 := z.pos
	h := binary.LittleEndian.AppendUint32(nil, 0x06064b50)
	h = binary.LittleEndian.AppendUint64(h, 44)
	h = binary.LittleEndian.AppendUint16(h, 0x031e)
	h = binary.LittleEndian.AppendUint16(h, 0x2d)
	h = append(h, 0, 0, 0, 0, 0, 0, 0, 0)
	h = binary.LittleEndian.AppendUint64(h, n)
	h = binary.LittleEndian.AppendUint64(h, n)
	h = binary.LittleEndian.AppendUint64(h, uint64(cdSize))
	h = binary.LittleEndian.AppendUint64(h, uint64(cdStart))
	h = binary.LittleEndian.AppendUint32(h, 0x07064b50)
	h = binary.LittleEndian.AppendUint32(h, 0)
	h = binary.LittleEndian.AppendUint64(h, uint64(end64))
	h = binary.LittleEndian.AppendUint32(h, 1)
	h = binary.LittleEndian.AppendUint32(h, 0x06054b50)
	h = append(h, 0, 0, 0, 0)
	n16 := uint16(min(n, 0xffff))
	h = binary.LittleEndian.AppendUint16(h, n16)
	h = binary.LittleEndian.AppendUint16(h, n16)
	h = binary.LittleEndian.AppendUint32(h, uint32(min(cdSize, math.MaxUint32)))
	h = binary.LittleEndian.AppendUint32(h, uint32(min(cdStart, math.MaxUint32)))
	h = append(h, 0, 0)
	z.write(h)
	if z.err != nil {
		return z.err
	}
	return z.w.Flush()
}

// WriteZip writes a torch zip checkpoint of tensors to w.
func WriteZip(w io.Writer, tensors []Tensor, opts Options) error {
	if opts.Prefix == "" {
		opts.Prefix = "archive"
	}
	if opts.Version == "" {
		opts.Version = "3"
	}
	pkl, stores, err := DataPickle(tensors, opts)
	if err != nil {
		return err
	}
	z := &zipWriter{w: bufio.NewWriterSize(w, 1<<20)}
	z.bytesEntry(opts.Prefix+"/data.pkl", pkl)
	if opts.ByteOrder != "" {
		z.bytesEntry(opts.Prefix+"/byteorder", []byte(opts.ByteOrder))
	}
	sorted := append([]*storage(nil), stores...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].key < sorted[j].key }) // as strings, like torch
	for _, st := range sorted {
		st := st
		z.entry(opts.Prefix+"/data/"+st.key, st.size, func(w io.Writer) error {
			if st.data != nil || st.fill == nil {
				_, err := w.Write(st.data)
				return err
			}
			return st.fill(w)
		})
	}
	z.bytesEntry(opts.Prefix+"/version", []byte(opts.Version+"\n"))
	return z.finish()
}

// WriteLegacy writes tensors to w as a legacy (non-zip) checkpoint, the
// format of torch < 1.6 and of torch.save(_use_new_zipfile_serialization=False):
// the magic number, protocol (1001) and system-information pickles, the
// object pickle (as in a zip's data.pkl, persistent ids with a None view
// metadata), the pickled list of storage keys (sorted as strings, like
// torch), then each storage as its int64 element count and its bytes.
// Options.Prefix, Version and ByteOrder do not apply.
func WriteLegacy(w io.Writer, tensors []Tensor, opts Options) error {
	pkl, stores, err := dataPickle(tensors, opts, true)
	if err != nil {
		return err
	}
	bw := bufio.NewWriterSize(w, 1<<20)
	bw.WriteString("\x80\x02\x8a\x0a\x6c\xfc\x9c\x46\xf9\x20\x6a\xa8\x50\x19.") // 0x1950a86a20f9469cfc6c
	bw.WriteString("\x80\x02M\xe9\x03.")                                        // 1001
	info := &pickler{refs: map[string]int{}}
	info.b = append(info.b, 0x80, 2, '}', '(')
	info.str("protocol_version")
	info.int(1001)
	info.str("little_endian")
	info.bool(true)
	info.str("type_sizes")
	info.b = append(info.b, '}', '(')
	for _, kv := range []struct {
		k string
		v int64
	}{{"short", 2}, {"int", 4}, {"long", 4}} {
		info.str(kv.k)
		info.int(kv.v)
	}
	info.b = append(info.b, 'u', 'u', '.')
	bw.Write(info.b)
	bw.Write(pkl)
	sorted := append([]*storage(nil), stores...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].key < sorted[j].key })
	keys := &pickler{refs: map[string]int{}}
	keys.b = append(keys.b, 0x80, 2, ']')
	if len(sorted) > 0 {
		keys.b = append(keys.b, '(')
		for _, st := range sorted {
			keys.str(st.key)
		}
		keys.b = append(keys.b, 'e')
	}
	keys.b = append(keys.b, '.')
	bw.Write(keys.b)
	for _, st := range sorted {
		bw.Write(binary.LittleEndian.AppendUint64(nil, uint64(st.numel)))
		if st.data != nil || st.fill == nil {
			if _, err := bw.Write(st.data); err != nil {
				return err
			}
			continue
		}
		c := &countingWriter{w: bw}
		if err := st.fill(c); err != nil {
			return err
		}
		if c.n != st.size {
			return fmt.Errorf("torchtest: storage %s: wrote %d bytes, want %d", st.key, c.n, st.size)
		}
	}
	return bw.Flush()
}

// countingWriter counts what it passes on.
type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(b []byte) (int, error) {
	n, err := c.w.Write(b)
	c.n += int64(n)
	return n, err
}

// WriteFile writes a torch zip checkpoint to path.
func WriteFile(path string, tensors []Tensor, opts Options) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := WriteZip(f, tensors, opts); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
