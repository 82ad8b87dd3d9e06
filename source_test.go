package safetensors

import (
	"bytes"
	"errors"
	"io"
	"testing"
)

// runCounter is a RunReader over b that counts its calls.
type runCounter struct {
	b            []byte
	calls, reads int
	fail         error
}

func (r *runCounter) ReadAt(p []byte, off int64) (int, error) {
	r.reads++
	return bytes.NewReader(r.b).ReadAt(p, off)
}

func (r *runCounter) ReadRuns(bufs [][]byte, offs []int64) error {
	r.calls++
	if r.fail != nil {
		return r.fail
	}
	for i := range bufs {
		if i > 0 && offs[i] < offs[i-1]+int64(len(bufs[i-1])) {
			return errors.New("runs out of order")
		}
		copy(bufs[i], r.b[offs[i]:])
	}
	return nil
}

func TestNewTensorRunReaderColumnSlice(t *testing.T) {
	// a 64x16 U8 matrix whose byte at (i, j) is i*16+j mod 256
	data := make([]byte, 64*16)
	for i := range data {
		data[i] = byte(i)
	}
	info := TensorInfo{Name: "m", DType: U8, Shape: []int64{64, 16}, DataOffsets: [2]int64{0, int64(len(data))}}
	rc := &runCounter{b: data}
	s, err := NewTensor(info, rc, "remote").Slice(All(), Range(2, 4))
	if err != nil {
		t.Fatal(err)
	}
	got, _ := s.Bytes()
	for i := range 64 {
		for j := range 2 {
			if want := byte(i*16 + 2 + j); got[i*2+j] != want {
				t.Fatalf("(%d,%d) = %d, want %d", i, j, got[i*2+j], want)
			}
		}
	}
	if rc.calls != 1 || rc.reads != 0 {
		t.Fatalf("64 runs took %d ReadRuns calls and %d ReadAt calls, want 1 and 0", rc.calls, rc.reads)
	}
	// I/O errors stay I/O errors
	rc.fail = io.ErrUnexpectedEOF
	if _, err := NewTensor(info, rc, "remote").Slice(All(), Range(2, 4)); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("error %v does not wrap the reader's", err)
	}
}

// streamOnly serves b and records whether Stream was used.
type streamOnly struct {
	b        []byte
	streamed bool
}

func (s *streamOnly) ReadAt(p []byte, off int64) (int, error) {
	return bytes.NewReader(s.b).ReadAt(p, off)
}

func (s *streamOnly) Stream(w io.Writer) (int64, error) {
	s.streamed = true
	n, err := w.Write(s.b)
	return int64(n), err
}

func TestNewTensorStreamer(t *testing.T) {
	b := []byte{1, 2, 3, 4, 5, 6, 7, 8}
	info := TensorInfo{Name: "x", DType: F32, Shape: []int64{2}, DataOffsets: [2]int64{0, 8}}
	st := &streamOnly{b: b}
	tt := NewTensor(info, st, "ckpt")
	got, err := tt.Copy()
	if err != nil || !bytes.Equal(got, b) || !st.streamed {
		t.Fatalf("Copy = %v, %v (streamed %v)", got, err, st.streamed)
	}
	st.streamed = false
	var buf bytes.Buffer
	if n, err := tt.WriteTo(&buf); err != nil || n != 8 || !bytes.Equal(buf.Bytes(), b) || !st.streamed {
		t.Fatalf("WriteTo = %d, %v (streamed %v)", n, err, st.streamed)
	}
	p := make([]byte, 4)
	if n, err := tt.ReadAt(p, 4); err != nil || n != 4 || !bytes.Equal(p, b[4:]) {
		t.Fatalf("ReadAt = %d, %v", n, err)
	}
}

func TestReaderIsSource(t *testing.T) {
	b, err := Marshal([]TensorData{{Name: "a", DType: U8, Shape: []int64{2}, Data: []byte{1, 2}}}, map[string]string{"k": "v"})
	if err != nil {
		t.Fatal(err)
	}
	r, err := NewReader(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		t.Fatal(err)
	}
	var s Source = r
	m := s.Meta()
	m["k"] = "changed"
	if r.Metadata["k"] != "v" {
		t.Fatal("Meta returned the reader's own map")
	}
	if _, err := s.Tensor("nope"); !errors.Is(err, ErrTensorNotFound) {
		t.Fatalf("missing tensor: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestInvalidOptionRefused(t *testing.T) {
	b, _ := Marshal(nil, nil)
	if _, err := NewReader(bytes.NewReader(b), int64(len(b)), WithMaxHeaderSize(-1)); !errors.Is(err, ErrOption) {
		t.Fatalf("WithMaxHeaderSize(-1): %v", err)
	}
	if _, err := ReadHeader(bytes.NewReader(b), nil); !errors.Is(err, ErrOption) {
		t.Fatalf("nil option: %v", err)
	}
}
