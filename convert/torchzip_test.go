package convert

import (
	"archive/zip"
	"bufio"
	"encoding/binary"
	"io"
	"os"
	"strconv"
	"testing"
)

// synthTensor is a contiguous tensor for writeTorchZip.
type synthTensor struct {
	name  string
	dtype string // "F32" or "BF16"
	shape []int64
	fill  func(w io.Writer) error // writes exactly numel*itemsize bytes
}

var storageClass = map[string]string{"F32": "FloatStorage", "BF16": "BFloat16Storage", "F16": "HalfStorage", "I64": "LongStorage"}
var itemSizeOf = map[string]int64{"F32": 4, "BF16": 2, "F16": 2, "I64": 8}

func (s synthTensor) numel() int64 {
	n := int64(1)
	for _, d := range s.shape {
		n *= d
	}
	return n
}

// writeTorchZip writes a torch.save-style zip checkpoint (pickle protocol 2,
// an OrderedDict of _rebuild_tensor_v2 tensors, one storage per tensor) the
// way torch 1.13 lays it out, without PyTorch. It is the stand-in for a
// torchtest writer in benchmarks and sharding tests.
func writeTorchZip(tb testing.TB, path string, tensors []synthTensor) {
	tb.Helper()
	f, err := os.Create(path)
	if err != nil {
		tb.Fatal(err)
	}
	bw := bufio.NewWriterSize(f, 1<<20)
	zw := zip.NewWriter(bw)
	create := func(name string) io.Writer {
		w, err := zw.CreateHeader(&zip.FileHeader{Name: "archive/" + name, Method: zip.Store})
		if err != nil {
			tb.Fatal(err)
		}
		return w
	}
	create("data.pkl").Write(pickleStateDict(tensors))
	for i, t := range tensors {
		if err := t.fill(create("data/" + strconv.Itoa(i))); err != nil {
			tb.Fatal(err)
		}
	}
	io.WriteString(create("version"), "3\n")
	if err := zw.Close(); err != nil {
		tb.Fatal(err)
	}
	if err := bw.Flush(); err != nil {
		tb.Fatal(err)
	}
	if err := f.Close(); err != nil {
		tb.Fatal(err)
	}
}

func pickleStateDict(tensors []synthTensor) []byte {
	var p []byte
	str := func(s string) {
		p = append(p, 'X')
		p = binary.LittleEndian.AppendUint32(p, uint32(len(s)))
		p = append(p, s...)
	}
	integer := func(v int64) {
		p = append(p, 'J')
		p = binary.LittleEndian.AppendUint32(p, uint32(int32(v)))
	}
	global := func(mod, name string) { p = append(p, "c"+mod+"\n"+name+"\n"...) }
	p = append(p, 0x80, 2)
	global("collections", "OrderedDict")
	p = append(p, ')', 'R', '(')
	for i, t := range tensors {
		str(t.name)
		global("torch._utils", "_rebuild_tensor_v2")
		p = append(p, '(', '(')
		str("storage")
		global("torch", storageClass[t.dtype])
		str(strconv.Itoa(i))
		str("cpu")
		integer(t.numel())
		p = append(p, 't', 'Q')
		integer(0)
		p = append(p, '(')
		for _, d := range t.shape {
			integer(d)
		}
		p = append(p, 't', '(')
		stride := int64(1)
		strides := make([]int64, len(t.shape))
		for j := len(t.shape) - 1; j >= 0; j-- {
			strides[j] = stride
			stride *= t.shape[j]
		}
		for _, s := range strides {
			integer(s)
		}
		p = append(p, 't', 0x89)
		global("collections", "OrderedDict")
		p = append(p, ')', 'R', 't', 'R')
	}
	p = append(p, 'u', '.')
	return p
}

// patternFill writes n bytes of a cheap deterministic pattern.
func patternFill(n int64, seed byte) func(io.Writer) error {
	return func(w io.Writer) error {
		buf := make([]byte, min(n, 1<<20))
		for i := range buf {
			buf[i] = byte(i*7) ^ seed
		}
		for n > 0 {
			k := min(n, int64(len(buf)))
			if _, err := w.Write(buf[:k]); err != nil {
				return err
			}
			n -= k
		}
		return nil
	}
}

func synth(name, dtype string, seed byte, shape ...int64) synthTensor {
	t := synthTensor{name: name, dtype: dtype, shape: shape}
	t.fill = patternFill(t.numel()*itemSizeOf[dtype], seed)
	return t
}
