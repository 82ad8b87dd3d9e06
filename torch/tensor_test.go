package torch

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"io"
	"strings"
	"testing"

	"github.com/gosafetensors/safetensors/torch/torchtest"
)

func openBytes(t testing.TB, b []byte) (*Checkpoint, error) {
	t.Helper()
	return NewReader(bytes.NewReader(b), int64(len(b)), "mem.pt")
}

// openChecked is openBytes followed by the checks deferred to the first
// read of each storage (Checkpoint.Check): what converting the file finds.
func openChecked(t testing.TB, b []byte) (*Checkpoint, error) {
	t.Helper()
	c, err := openBytes(t, b)
	if err != nil {
		return nil, err
	}
	if err := c.Check(); err != nil {
		return nil, err
	}
	return c, nil
}

func writeZip(t testing.TB, tensors []torchtest.Tensor, opts torchtest.Options) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := torchtest.WriteZip(&buf, tensors, opts); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func f32s(n int) []byte {
	b := make([]byte, 4*n)
	for i := 0; i < n; i++ {
		binary.LittleEndian.PutUint32(b[4*i:], uint32(i))
	}
	return b
}

// reference gathers a strided view element by element.
func reference(storage []byte, is int, offset int64, shape, stride []int64) []byte {
	var out []byte
	n := int64(1)
	for _, s := range shape {
		n *= s
	}
	idx := make([]int64, len(shape))
	for k := int64(0); k < n; k++ {
		off := offset
		for d := range shape {
			off += idx[d] * stride[d]
		}
		out = append(out, storage[off*int64(is):(off+1)*int64(is)]...)
		for d := len(shape) - 1; d >= 0; d-- {
			idx[d]++
			if idx[d] < shape[d] {
				break
			}
			idx[d] = 0
		}
	}
	return out
}

// stridedViews is one 120-float storage seen through every kind of view:
// transposed, stepped, expanded, diagonal, permuted, scalar, empty, rows.
func stridedViews(data []byte) []torchtest.Tensor {
	return []torchtest.Tensor{
		{Name: "base", DType: "F32", Shape: []int64{120}, Data: data, Storage: "s"},
		{Name: "t", DType: "F32", Shape: []int64{10, 12}, Stride: []int64{1, 10}, Storage: "s"},
		{Name: "step", DType: "F32", Shape: []int64{5, 3}, Stride: []int64{24, 4}, Offset: 2, Storage: "s"},
		{Name: "expand", DType: "F32", Shape: []int64{4, 6}, Stride: []int64{0, 1}, Offset: 7, Storage: "s"},
		{Name: "diag", DType: "F32", Shape: []int64{10}, Stride: []int64{13}, Storage: "s"},
		{Name: "perm", DType: "F32", Shape: []int64{2, 3, 4, 5}, Stride: []int64{1, 40, 10, 2}, Storage: "s"},
		{Name: "scalar", DType: "F32", Shape: []int64{}, Stride: []int64{}, Offset: 119, Storage: "s"},
		{Name: "empty", DType: "F32", Shape: []int64{0, 5}, Stride: []int64{5, 1}, Offset: 120, Storage: "s"},
		{Name: "row", DType: "F32", Shape: []int64{1, 12}, Stride: []int64{99, 1}, Offset: 12, Storage: "s"},
		{Name: "rows", DType: "F32", Shape: []int64{3, 4}, Stride: []int64{20, 1}, Offset: 5, Storage: "s"},
	}
}

func TestStridedViews(t *testing.T) {
	data := f32s(120)
	views := stridedViews(data)
	c, err := openBytes(t, writeZip(t, views, torchtest.Options{}))
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range views {
		tn := c.Lookup(v.Name)
		stride := v.Stride
		if stride == nil {
			stride = []int64{1}
		}
		want := reference(data, 4, v.Offset, v.Shape, stride)
		for _, maxBuf := range []int64{1 << 30, 8} { // buffered and sliding-window paths
			var buf bytes.Buffer
			n, err := tn.WriteToBuffer(&buf, maxBuf)
			if err != nil {
				t.Fatalf("%s: %v", v.Name, err)
			}
			if n != int64(len(want)) || !bytes.Equal(buf.Bytes(), want) {
				t.Fatalf("%s (buffer %d): got %d bytes, mismatch", v.Name, maxBuf, n)
			}
		}
	}
	if !c.Lookup("row").Contiguous() || c.Lookup("t").Contiguous() || !c.Lookup("empty").Contiguous() {
		t.Fatal("Contiguous is wrong")
	}
	if c.Lookup("t").SameView(c.Lookup("base")) || !c.Lookup("t").SameView(c.Lookup("t")) {
		t.Fatal("SameView is wrong")
	}
}

func TestViewOutOfBounds(t *testing.T) {
	for _, v := range []torchtest.Tensor{
		{Name: "a", DType: "F32", Shape: []int64{2, 3}, Offset: 1, Data: f32s(6)},
		{Name: "a", DType: "F32", Shape: []int64{3}, Stride: []int64{3}, Data: f32s(6)},
		{Name: "a", DType: "F32", Shape: []int64{0}, Offset: 7, Data: f32s(6)},
		{Name: "a", DType: "F32", Shape: []int64{2}, Stride: []int64{-1}, Offset: 3, Data: f32s(6)},
		{Name: "a", DType: "F32", Shape: []int64{1 << 62, 4}, Stride: []int64{4, 1}, Data: f32s(6)},
	} {
		_, err := openBytes(t, writeZip(t, []torchtest.Tensor{v}, torchtest.Options{}))
		if !errors.Is(err, ErrCorrupt) {
			t.Errorf("%v %v %v: got %v", v.Shape, v.Stride, v.Offset, err)
		}
	}
}

// findMember returns the central-directory record of name.
func findMember(t testing.TB, b []byte, name string) *zipEntry {
	t.Helper()
	z, err := readZip(bytes.NewReader(b), int64(len(b)), &Limits{MaxZipEntries: 100})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range z.Entries {
		if e.Name == name {
			return e
		}
	}
	t.Fatalf("no %s", name)
	return nil
}

func TestZipHygiene(t *testing.T) {
	base := []torchtest.Tensor{{Name: "w", DType: "F32", Shape: []int64{2, 2}, Data: f32s(4)}}
	good := writeZip(t, base, torchtest.Options{})
	if _, err := openBytes(t, good); err != nil {
		t.Fatal(err)
	}
	mutate := func(f func(b []byte)) []byte {
		b := append([]byte(nil), good...)
		f(b)
		return b
	}
	pkl := findMember(t, good, "archive/data.pkl")
	st := findMember(t, good, "archive/data/0")
	cases := []struct {
		name string
		b    []byte
		kind error
		msg  string
	}{
		{"local name mismatch", mutate(func(b []byte) { b[pkl.HeaderOffset+30+int64(len("archive/"))] = 'D' }), ErrCorrupt, "local header names"},
		{"encrypted data.pkl", mutate(func(b []byte) { b[pkl.HeaderOffset+6] |= 1 }), ErrUnsupported, "encrypted"},
		{"encrypted storage", mutate(func(b []byte) { b[st.HeaderOffset+6] |= 0x40 }), ErrUnsupported, "encrypted"},
		{"storage CRC", mutate(func(b []byte) { b[st.DataOffset] ^= 1 }), ErrCorrupt, "CRC-32"},
		{"version 99", bytes.Replace(good, []byte("3\nPK\x07\x08"), []byte("9\nPK\x07\x08"), 1), ErrCorrupt, "CRC"},
		{"truncated", good[:len(good)-30], ErrCorrupt, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ck, err := openBytes(t, c.b)
			if err == nil && c.kind != nil {
				// storage CRC errors show up when the data is read
				var buf bytes.Buffer
				_, err = ck.Tensors()[0].WriteTo(&buf)
			}
			if c.kind == nil {
				return
			}
			if !errors.Is(err, c.kind) || !strings.Contains(err.Error(), c.msg) {
				t.Fatalf("got %v, want %v %q", err, c.kind, c.msg)
			}
		})
	}
	// flip one byte of data.pkl (a memo index) and fix nothing: CRC must catch it
	b := append([]byte(nil), good...)
	i := bytes.Index(b[pkl.DataOffset:], []byte("q\x01")) + int(pkl.DataOffset)
	b[i+1] = 0x09
	if _, err := openBytes(t, b); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "CRC-32") {
		t.Fatalf("data.pkl CRC: %v", err)
	}
	// byteorder big, TorchScript, bad storage keys, duplicate names
	if _, err := openBytes(t, writeZip(t, base, torchtest.Options{ByteOrder: "big"})); !errors.Is(err, ErrUnsupported) {
		t.Fatalf("byteorder: %v", err)
	}
	if c, err := openBytes(t, writeZip(t, base, torchtest.Options{ByteOrder: "little", Prefix: "my model"})); err != nil || c.Prefix != "my model" {
		t.Fatalf("little: %v", err)
	}
	b = bytes.ReplaceAll(append([]byte(nil), good...), []byte("archive/version"), []byte("archive/code/xx"))
	if _, err := openBytes(t, b); !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrUnsupported) {
		t.Fatalf("no version: %v", err)
	}
	b = bytes.ReplaceAll(append([]byte(nil), good...), []byte("archive/data/0"), []byte("archive/data.pkl"))
	if _, err := openBytes(t, b); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("duplicate: %v", err)
	}
	if !validKey("12") || validKey("../version") || validKey("a/b") || validKey("..") || validKey("") {
		t.Fatal("validKey")
	}
	_ = crc32.ChecksumIEEE
}

func TestScanFindsHiddenPickle(t *testing.T) {
	evil := []byte("\x80\x02cposix\nsystem\nX\x01\x00\x00\x00a\x85R.")
	b := writeZip(t, []torchtest.Tensor{{Name: "w", DType: "U8", Shape: []int64{int64(len(evil))}, Data: evil}}, torchtest.Options{})
	// torch never unpickles a storage, but one verdict: what Scan objects
	// to, the first read of the storage refuses (naming it); opening, which
	// reads no storage, does not
	c, err := openBytes(t, b)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	if _, err := c.Tensors()[0].WriteTo(io.Discard); !errors.Is(err, ErrNotAllowed) || !strings.Contains(err.Error(), "posix.system") {
		t.Fatalf("a storage holding a pickle with a dangerous global: %v", err)
	}
	if err := c.Check(); !errors.Is(err, ErrNotAllowed) {
		t.Fatalf("Check: %v", err)
	}
	rep, err := Scan(bytes.NewReader(b), int64(len(b)), "x.pt")
	if err != nil {
		t.Fatal(err)
	}
	if rep.Safe() || len(rep.NotAllowed()) != 1 || !strings.Contains(strings.Join(rep.Problems, "\n"), "hidden") {
		t.Fatalf("%+v", rep)
	}
}

func TestV3AndParameters(t *testing.T) {
	u16 := []byte{1, 0, 2, 0, 3, 0, 4, 0}
	ts := []torchtest.Tensor{
		{Name: "u", DType: "U16", Shape: []int64{2, 2}, Data: u16},
		{Name: "f8", DType: "F8_E4M3", Shape: []int64{3}, Data: []byte{1, 2, 3}},
		{Name: "p", DType: "BF16", Shape: []int64{2}, Data: []byte{1, 2, 3, 4}, Parameter: true, RequiresGrad: true},
		{Name: "tied", SameAs: "p"},
	}
	c, err := openBytes(t, writeZip(t, ts, torchtest.Options{}))
	if err != nil {
		t.Fatal(err)
	}
	if u := c.Lookup("u"); u.DType.String() != "U16" || u.Storage.DType.String() != "U8" || u.NBytes() != 8 {
		t.Fatalf("%+v", u)
	}
	p, tied := c.Lookup("p"), c.Lookup("tied")
	if !p.IsParameter || !p.RequiresGrad || !p.SameView(tied) || c.Entries[3].SameAs != "p" {
		t.Fatalf("%+v %+v", p, c.Entries[3])
	}
}
