package safetensors

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
)

func TestHeaderEncodingMatchesReference(t *testing.T) {
	// The reference's escaping and layout, checked by hand.
	b, err := Marshal([]TensorData{
		{Name: "b\"\\\n\x01é", DType: F32, Shape: []int64{1}, Data: make([]byte, 4)},
		{Name: "a", DType: F32, Shape: []int64{}, Data: make([]byte, 4)},
		{Name: "z", DType: U8, Shape: []int64{0}},
		{Name: "c", DType: F64, Shape: []int64{1}, Data: make([]byte, 8)},
	}, map[string]string{"z": "1", "a": "\t"})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"__metadata__":{"a":"\t","z":"1"},"c":{"dtype":"F64","shape":[1],"data_offsets":[0,8]},` +
		`"a":{"dtype":"F32","shape":[],"data_offsets":[8,12]},"b\"\\\n\u0001é":{"dtype":"F32","shape":[1],"data_offsets":[12,16]},` +
		`"z":{"dtype":"U8","shape":[0],"data_offsets":[16,16]}}`
	h := head(b)[8:]
	if got := strings.TrimRight(string(h), " "); got != want {
		t.Fatalf("header\n got %s\nwant %s", got, want)
	}
	if len(h)%8 != 0 {
		t.Fatalf("header length %d not a multiple of 8", len(h))
	}
	if _, err := NewReader(bytes.NewReader(b), int64(len(b))); err != nil {
		t.Fatal(err)
	}
	empty, _ := Marshal(nil, nil)
	if string(empty) != "\x08\x00\x00\x00\x00\x00\x00\x00{}      " {
		t.Fatalf("empty file %q", empty)
	}
}

func TestWriterRefuses(t *testing.T) {
	cases := map[string][]TensorData{
		"reserved":  {{Name: "__metadata__", DType: U8, Shape: []int64{1}, Data: []byte{1}}},
		"duplicate": {{Name: "a", DType: U8, Shape: []int64{1}, Data: []byte{1}}, {Name: "a", DType: F32, Shape: []int64{1}, Data: make([]byte, 4)}},
		"negative":  {{Name: "a", DType: U8, Shape: []int64{-1}}},
		"short":     {{Name: "a", DType: F32, Shape: []int64{2}, Data: make([]byte, 4)}},
		"subbyte":   {{Name: "a", DType: F4, Shape: []int64{3}, Data: make([]byte, 2)}},
		"overflow":  {{Name: "a", DType: F64, Shape: []int64{1 << 62, 4}}},
	}
	for name, tensors := range cases {
		if _, err := Marshal(tensors, nil); err == nil {
			t.Errorf("%s: accepted", name)
		}
		path := filepath.Join(t.TempDir(), "out.safetensors")
		if err := WriteFile(path, tensors, nil); err == nil {
			t.Errorf("%s: WriteFile accepted", name)
		}
		if ents, _ := os.ReadDir(filepath.Dir(path)); len(ents) != 0 {
			t.Errorf("%s: left %d files behind", name, len(ents))
		}
	}
	big := strings.Repeat("x", DefaultMaxHeaderSize)
	if _, err := Marshal([]TensorData{{Name: big, DType: U8, Shape: []int64{0}}}, nil); !errors.Is(err, ErrHeaderTooLarge) {
		t.Errorf("huge header: %v", err)
	}
}

func TestStreamingWriterChecksCounts(t *testing.T) {
	infos := []TensorInfo{{Name: "a", DType: U8, Shape: []int64{4}}, {Name: "b", DType: F32, Shape: []int64{1}}}
	var buf bytes.Buffer
	w, err := NewWriter(&buf, infos, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := w.Tensors()[0].Name; got != "b" {
		t.Fatalf("F32 must come before U8, got %q first", got)
	}
	if err := w.WriteTensor("a", []byte{1, 2, 3, 4}); err == nil {
		t.Fatal("out-of-order write accepted")
	}
	if err := w.CopyTensor("b", strings.NewReader("12")); err == nil {
		t.Fatal("short reader accepted")
	}
	w, _ = NewWriter(&buf, infos, nil)
	if err := w.CopyTensor("b", strings.NewReader("12345")); err == nil {
		t.Fatal("long reader accepted")
	}
	buf.Reset()
	w, _ = NewWriter(&buf, infos, nil)
	if err := w.CopyTensor("b", strings.NewReader("1234")); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err == nil {
		t.Fatal("Close before all tensors accepted")
	}
	if err := w.WriteTensor("a", []byte{1, 2, 3, 4}); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	r, err := NewReader(bytes.NewReader(buf.Bytes()), int64(buf.Len()))
	if err != nil {
		t.Fatal(err)
	}
	a, _ := r.Tensor("a")
	if b, _ := a.Bytes(); string(b) != "\x01\x02\x03\x04" {
		t.Fatalf("a = %q", b)
	}
}

// TestOverwriteMappedFile rewrites a file from views of its own mapping: the
// output must hold the original bytes (rename, never truncate in place), and
// the old views stay intact.
func TestOverwriteMappedFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "m.safetensors")
	data := bytes.Repeat([]byte("0123456789abcdef"), 1<<14)
	if err := WriteFile(path, []TensorData{{Name: "w", DType: U8, Shape: []int64{int64(len(data))}, Data: data}}, nil); err != nil {
		t.Fatal(err)
	}
	f, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w, _ := f.Tensor("w")
	view, _ := w.Bytes()
	if err := WriteFile(path, []TensorData{{Name: "w2", DType: U8, Shape: w.Shape, Data: view}}, map[string]string{"k": "v"}); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(view, data) {
		t.Fatal("the mapped view changed")
	}
	g, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	w2, _ := g.Tensor("w2")
	if b, _ := w2.Bytes(); !bytes.Equal(b, data) {
		t.Fatal("rewritten file holds the wrong bytes")
	}
}

func TestFileWriterAbortLeavesDestination(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "keep.safetensors")
	os.WriteFile(path, []byte("original"), 0o644)
	fw, err := Create(path, []TensorInfo{{Name: "a", DType: U8, Shape: []int64{2}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := fw.Close(); err == nil {
		t.Fatal("Close without data succeeded")
	}
	if b, _ := os.ReadFile(path); string(b) != "original" {
		t.Fatalf("destination changed: %q", b)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Fatalf("%d entries left in the directory", len(ents))
	}
}

// TestConcurrentReads reads one mapped file and one lazy reader from many
// goroutines; run with -race.
func TestConcurrentReads(t *testing.T) {
	path := "testdata/torch/tiny_transformer.safetensors"
	f, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	osf, _ := os.Open(path)
	defer osf.Close()
	st, _ := osf.Stat()
	lazy, err := NewReader(osf, st.Size())
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]byte{}
	for x, err := range f.All() {
		if err != nil {
			t.Fatal(err)
		}
		want[x.Name], _ = x.Copy()
	}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 50 {
				r := &f.Reader
				if (g+i)%2 == 0 {
					r = lazy
				}
				for _, name := range r.Names() {
					x, err := r.Tensor(name)
					if err != nil {
						t.Error(err)
						return
					}
					b, err := x.Bytes()
					if err != nil || !bytes.Equal(b, want[name]) {
						t.Errorf("tensor %q differs (%v)", name, err)
						return
					}
					if len(x.Shape) > 0 && x.Shape[0] > 1 {
						if _, err := x.Slice(Range(0, 1)); err != nil {
							t.Error(err)
						}
					}
				}
			}
		}()
	}
	wg.Wait()
}

func TestReadHeaderStream(t *testing.T) {
	b, _ := os.ReadFile("testdata/torch/tiny_transformer.safetensors")
	h, err := ReadHeader(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	if h.Len() == 0 || h.FileSize() != int64(len(b)) {
		t.Fatalf("%d tensors, size %d", h.Len(), h.FileSize())
	}
	// A huge claimed header with few bytes present must fail without
	// allocating what it claims.
	claim := []byte{0x00, 0xe1, 0xf5, 0x05, 0, 0, 0, 0, '{'} // 100,000,000
	if _, err := ReadHeader(bytes.NewReader(claim)); !errors.Is(err, ErrInvalidHeaderLength) {
		t.Fatalf("got %v", err)
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	ReadHeader(bytes.NewReader(claim))
	runtime.ReadMemStats(&after)
	if n := after.TotalAlloc - before.TotalAlloc; n > 1<<20 {
		t.Fatalf("allocated %d bytes for a 9-byte input", n)
	}
}

func TestClosedFile(t *testing.T) {
	f, err := Open("testdata/torch/tiny_transformer.safetensors")
	if err != nil {
		t.Fatal(err)
	}
	name := f.Names()[0]
	f.Close()
	if _, err := f.Tensor(name); !errors.Is(err, ErrClosed) {
		t.Fatalf("Tensor after Close: %v", err)
	}
	if err := f.Close(); !errors.Is(err, ErrClosed) {
		t.Fatalf("second Close: %v", err)
	}
}

func TestReadAll(t *testing.T) {
	path := "testdata/torch/tiny_transformer.safetensors"
	f, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	all, err := f.ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]byte{}
	for x, err := range f.All() {
		if err != nil {
			t.Fatal(err)
		}
		want[x.Name], _ = x.Copy()
	}
	f.Close()
	if len(all) != len(want) {
		t.Fatalf("%d tensors, want %d", len(all), len(want))
	}
	for _, x := range all { // still valid after Close
		if b, _ := x.Bytes(); !bytes.Equal(b, want[x.Name]) {
			t.Fatalf("tensor %q differs", x.Name)
		}
	}
}

func TestCloseVerified(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "v.safetensors")
	infos := []TensorInfo{{Name: "a", DType: U8, Shape: []int64{3}}}
	for _, fail := range []bool{true, false} {
		fw, err := Create(path, infos, nil)
		if err != nil {
			t.Fatal(err)
		}
		fw.WriteTensor("a", []byte{1, 2, 3})
		err = fw.CloseVerified(func(r *Reader) error {
			x, err := r.Tensor("a")
			if err != nil {
				return err
			}
			if b, _ := x.Bytes(); !bytes.Equal(b, []byte{1, 2, 3}) {
				return errors.New("read back wrong bytes")
			}
			if fail {
				return errors.New("refused")
			}
			return nil
		})
		_, statErr := os.Stat(path)
		if fail && (err == nil || statErr == nil) {
			t.Fatalf("failed verification: err %v, file exists %v", err, statErr == nil)
		}
		if !fail && (err != nil || statErr != nil) {
			t.Fatalf("passed verification: err %v, stat %v", err, statErr)
		}
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Fatalf("%d entries in the directory", len(ents))
	}
}

// TestCopyAfterTruncation: a file cut short while open gives an error from
// Copy (pread), not a crash (the mapping's lost pages would fault).
func TestCopyAfterTruncation(t *testing.T) {
	path := filepath.Join(t.TempDir(), "t.safetensors")
	data := bytes.Repeat([]byte{7}, 1<<16)
	if err := WriteFile(path, []TensorData{{Name: "w", DType: U8, Shape: []int64{int64(len(data))}, Data: data}}, nil); err != nil {
		t.Fatal(err)
	}
	f, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w, _ := f.Tensor("w")
	if err := os.Truncate(path, 100); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Copy(); err == nil || !strings.Contains(err.Error(), `tensor "w"`) {
		t.Fatalf("Copy of a truncated file: %v", err)
	}
}
