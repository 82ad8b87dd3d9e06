package safetensors

import (
	"bytes"
	"errors"
	"io"
	"reflect"
	"sync/atomic"
	"testing"
)

// countingReaderAt counts ReadAt calls and bytes, to prove a slice reads
// only the runs it needs.
type countingReaderAt struct {
	r            io.ReaderAt
	calls, bytes atomic.Int64
}

func (c *countingReaderAt) ReadAt(p []byte, off int64) (int, error) {
	c.calls.Add(1)
	c.bytes.Add(int64(len(p)))
	return c.r.ReadAt(p, off)
}

// iota8 makes a U8 tensor file whose element i holds byte i.
func iotaFile(t *testing.T, dtype DType, shape []int64) []byte {
	t.Helper()
	size, err := byteSize(dtype, shape)
	if err != nil {
		t.Fatal(err)
	}
	data := make([]byte, size)
	for i := range data {
		data[i] = byte(i)
	}
	b, err := Marshal([]TensorData{{Name: "x", DType: dtype, Shape: shape, Data: data}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestSliceTable(t *testing.T) {
	// x is U8 of shape [3,4,5]; element (i,j,k) holds byte 20i+5j+k.
	file := iotaFile(t, U8, []int64{3, 4, 5})
	el := func(i, j, k int) byte { return byte(20*i + 5*j + k) }
	cases := []struct {
		spec  string
		shape []int64
		want  []byte
		runs  int64 // ReadAt calls through a lazy reader
	}{
		{"", []int64{3, 4, 5}, nil, 1},
		{"1", []int64{4, 5}, seq(20, 40), 1},
		{"-1", []int64{4, 5}, seq(40, 60), 1},
		{"0:2", []int64{2, 4, 5}, seq(0, 40), 1},
		{"1:", []int64{2, 4, 5}, seq(20, 60), 1},
		{":,1", []int64{3, 5}, []byte{el(0, 1, 0), el(0, 1, 1), el(0, 1, 2), el(0, 1, 3), el(0, 1, 4), el(1, 1, 0), el(1, 1, 1), el(1, 1, 2), el(1, 1, 3), el(1, 1, 4), el(2, 1, 0), el(2, 1, 1), el(2, 1, 2), el(2, 1, 3), el(2, 1, 4)}, 3},
		{"0:2,:,-1", []int64{2, 4}, []byte{el(0, 0, 4), el(0, 1, 4), el(0, 2, 4), el(0, 3, 4), el(1, 0, 4), el(1, 1, 4), el(1, 2, 4), el(1, 3, 4)}, 8},
		{"2,3,4", []int64{}, []byte{el(2, 3, 4)}, 1},
		{"::2,0,1:3", []int64{2, 2}, []byte{el(0, 0, 1), el(0, 0, 2), el(2, 0, 1), el(2, 0, 2)}, 2},
		{"1,1:3", []int64{2, 5}, seq(25, 35), 1},
		{"0:0", []int64{0, 4, 5}, []byte{}, 0},
		{":,:,::3", []int64{3, 4, 2}, nil, 24},
		{"-2:-1", []int64{1, 4, 5}, seq(20, 40), 1},
		{"::9223372036854775807", []int64{1, 4, 5}, seq(0, 20), 1},
		{"1::9223372036854775806,:,4:", []int64{1, 4, 1}, []byte{el(1, 0, 4), el(1, 1, 4), el(1, 2, 4), el(1, 3, 4)}, 4},
		// brackets as in Python, and the Ellipsis
		{"[0:2]", []int64{2, 4, 5}, seq(0, 40), 1},
		{" [ 1 ] ", []int64{4, 5}, seq(20, 40), 1},
		{"[1,]", []int64{4, 5}, seq(20, 40), 1},
		{"...", []int64{3, 4, 5}, seq(0, 60), 1},
		{"[...]", []int64{3, 4, 5}, seq(0, 60), 1},
		{"1,...", []int64{4, 5}, seq(20, 40), 1},
		{"..., 1:3, 4", []int64{3, 2}, []byte{el(0, 1, 4), el(0, 2, 4), el(1, 1, 4), el(1, 2, 4), el(2, 1, 4), el(2, 2, 4)}, 6},
		{"2,...,4", []int64{4}, []byte{el(2, 0, 4), el(2, 1, 4), el(2, 2, 4), el(2, 3, 4)}, 4},
		{"2,3,4,...", []int64{}, []byte{el(2, 3, 4)}, 1},
	}
	for _, c := range cases {
		t.Run(c.spec, func(t *testing.T) {
			idx, err := ParseSlice(c.spec)
			if err != nil {
				t.Fatal(err)
			}
			want := c.want
			if want == nil && c.spec == "" {
				want = seq(0, 60)
			}
			// in memory (as when mapped)
			r, err := NewReader(bytes.NewReader(file), int64(len(file)))
			if err != nil {
				t.Fatal(err)
			}
			cr := &countingReaderAt{r: bytes.NewReader(file)}
			lazy, err := NewReader(cr, int64(len(file)))
			if err != nil {
				t.Fatal(err)
			}
			calls0 := cr.calls.Load()
			for _, rd := range []*Reader{r, lazy} {
				x, err := rd.Tensor("x")
				if err != nil {
					t.Fatal(err)
				}
				s, err := x.Slice(idx...)
				if err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(s.Shape, c.shape) {
					t.Fatalf("shape %v, want %v", s.Shape, c.shape)
				}
				got, _ := s.Bytes()
				if want != nil && !bytes.Equal(got, want) {
					t.Fatalf("bytes %v, want %v", got, want)
				}
				if int64(len(got)) != s.NumElements() {
					t.Fatalf("%d bytes for %d elements", len(got), s.NumElements())
				}
			}
			if calls := cr.calls.Load() - calls0; calls != c.runs {
				t.Errorf("%d ReadAt calls, want %d", calls, c.runs)
			}
			if read := cr.bytes.Load(); read > 60+int64(len(file)-60) {
				t.Errorf("read %d bytes", read)
			}
		})
	}
}

func seq(a, b int) []byte {
	out := make([]byte, 0, b-a)
	for i := a; i < b; i++ {
		out = append(out, byte(i))
	}
	return out
}

func TestSliceReadsOnlyWhatItNeeds(t *testing.T) {
	file := iotaFile(t, F32, []int64{256, 1024}) // 1 MiB
	cr := &countingReaderAt{r: bytes.NewReader(file)}
	r, err := NewReader(cr, int64(len(file)))
	if err != nil {
		t.Fatal(err)
	}
	x, _ := r.Tensor("x")
	before := cr.bytes.Load()
	s, err := x.Slice(Range(10, 12))
	if err != nil {
		t.Fatal(err)
	}
	if got := cr.bytes.Load() - before; got != 2*1024*4 {
		t.Fatalf("read %d bytes for a 2-row slice, want %d", got, 2*1024*4)
	}
	b, _ := s.Bytes()
	if !bytes.Equal(b, file[len(file)-256*1024*4+10*4096:][:8192]) {
		t.Fatal("wrong bytes")
	}
}

func TestSliceErrors(t *testing.T) {
	file := iotaFile(t, U8, []int64{3, 4})
	r, _ := NewReader(bytes.NewReader(file), int64(len(file)), WithName("m.safetensors"))
	x, _ := r.Tensor("x")
	for spec, want := range map[string]error{
		"3":         ErrSliceOutOfRange,
		"-4":        ErrSliceOutOfRange,
		"0:5":       ErrSliceOutOfRange,
		"-5:":       ErrSliceOutOfRange,
		"2:1":       ErrInvalidSlice,
		"0,0,0":     ErrSliceOutOfRange,
		":,4":       ErrSliceOutOfRange,
		"a":         ErrInvalidSlice,
		"::0":       ErrInvalidSlice,
		"::-1":      ErrInvalidSlice,
		"1:2:3:4":   ErrInvalidSlice,
		",":         ErrInvalidSlice,
		"...,...":   ErrInvalidSlice,
		"0,0,...,0": ErrSliceOutOfRange,
		"[0:1":      ErrInvalidSlice,
	} {
		idx, err := ParseSlice(spec)
		if err == nil {
			_, err = x.Slice(idx...)
		}
		if !errors.Is(err, want) {
			t.Errorf("%q: got %v, want %v", spec, err, want)
		}
	}
	_, err := x.Slice(At(7))
	var fe *FormatError
	if !errors.As(err, &fe) || fe.Tensor != "x" || fe.File != "m.safetensors" {
		t.Errorf("slice error %v does not name file and tensor", err)
	}
}

func TestSliceSubByte(t *testing.T) {
	// F4: two elements per byte. Shape [4,4] is 8 bytes, 2 per row.
	file := iotaFile(t, F4, []int64{4, 4})
	r, _ := NewReader(bytes.NewReader(file), int64(len(file)))
	x, _ := r.Tensor("x")
	s, err := x.Slice(Range(1, 3))
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := s.Bytes(); !bytes.Equal(b, []byte{2, 3, 4, 5}) {
		t.Fatalf("got %v", b)
	}
	if s, err = x.Slice(All(), Range(2, 4)); err != nil {
		t.Fatal(err)
	} else if b, _ := s.Bytes(); !bytes.Equal(b, []byte{1, 3, 5, 7}) {
		t.Fatalf("got %v", b)
	}
	for _, idx := range [][]Selector{{All(), Range(1, 3)}, {All(), At(0)}, {All(), All().Every(3)}} {
		if _, err := x.Slice(idx...); !errors.Is(err, ErrMisalignedSlice) {
			t.Errorf("%v: got %v, want MisalignedSlice", idx, err)
		}
	}
}
