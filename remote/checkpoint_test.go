package remote

import (
	"bytes"
	"context"
	"encoding/binary"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gosafetensors/safetensors/convert"
	"github.com/gosafetensors/safetensors/torch"
	"github.com/gosafetensors/safetensors/torch/torchtest"
	"github.com/gosafetensors/safetensors/torch/ziplist"
)

// sparse is an object whose bytes are zero except in a few segments: a
// synthetic checkpoint of a GiB held in a few MB of memory.
type sparse struct {
	size    int64
	segs    []sseg // sorted, disjoint
	minimum int64  // bytes an audit must read (legacy; zipMinimum for a zip)
}

type sseg struct {
	off int64
	b   []byte
}

func (s *sparse) ReadAt(p []byte, off int64) (int, error) {
	if off >= s.size {
		return 0, io.EOF
	}
	n := len(p)
	if int64(n) > s.size-off {
		n = int(s.size - off)
	}
	clear(p[:n])
	i := sort.Search(len(s.segs), func(i int) bool { return s.segs[i].off+int64(len(s.segs[i].b)) > off })
	for ; i < len(s.segs) && s.segs[i].off < off+int64(n); i++ {
		g := s.segs[i]
		lo, hi := max(off, g.off), min(off+int64(n), g.off+int64(len(g.b)))
		copy(p[lo-off:hi-off], g.b[lo-g.off:hi-g.off])
	}
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

// sparseWriter records what is written into a sparse object, dropping
// zero blocks.
type sparseWriter struct{ s sparse }

const sparseBlock = 512

var zeroBlock [sparseBlock]byte

func (w *sparseWriter) Write(p []byte) (int, error) {
	for i := 0; i < len(p); i += sparseBlock {
		b := p[i:min(i+sparseBlock, len(p))]
		off := w.s.size
		w.s.size += int64(len(b))
		if bytes.Equal(b, zeroBlock[:len(b)]) {
			continue
		}
		if n := len(w.s.segs); n > 0 && w.s.segs[n-1].off+int64(len(w.s.segs[n-1].b)) == off {
			w.s.segs[n-1].b = append(w.s.segs[n-1].b, b...)
			continue
		}
		w.s.segs = append(w.s.segs, sseg{off, append([]byte(nil), b...)})
	}
	return len(p), nil
}

// zeros writes n zero bytes to w.
func zeros(w io.Writer, n int64) error {
	var buf [64 << 10]byte
	for n > 0 {
		k := min(n, int64(len(buf)))
		if _, err := w.Write(buf[:k]); err != nil {
			return err
		}
		n -= k
	}
	return nil
}

// sparseZip returns a torch zip checkpoint of n F32 tensors of size bytes
// each (zeros), as torch.save lays it out.
func sparseZip(t testing.TB, n int, size int64) *sparse {
	t.Helper()
	tensors := make([]torchtest.Tensor, n)
	for i := range tensors {
		tensors[i] = torchtest.Tensor{Name: "model.layers." + strconv.Itoa(i) + ".weight", DType: "F32", Shape: []int64{size / 4},
			DataSize: size, Fill: func(w io.Writer) error { return zeros(w, size) }}
	}
	var w sparseWriter
	if err := torchtest.WriteZip(&w, tensors, torchtest.Options{}); err != nil {
		t.Fatal(err)
	}
	return &w.s
}

// sparseLegacy returns a legacy (torch < 1.6, _use_new_zipfile_serialization=False)
// checkpoint of n F32 tensors of size bytes each: the magic number,
// protocol and system-info pickles, the state dict whose storages are
// persistent ids, the list of storage keys, then every storage as its
// element count and bytes.
func sparseLegacy(t testing.TB, n int, size int64) *sparse {
	t.Helper()
	str := func(b []byte, s string) []byte {
		b = append(b, 'X')
		b = binary.LittleEndian.AppendUint32(b, uint32(len(s)))
		return append(b, s...)
	}
	i32 := func(b []byte, v int64) []byte {
		b = append(b, 'J')
		return binary.LittleEndian.AppendUint32(b, uint32(v))
	}
	var w sparseWriter
	w.Write([]byte("\x80\x02\x8a\x0a\x6c\xfc\x9c\x46\xf9\x20\x6a\xa8\x50\x19."))
	w.Write([]byte("\x80\x02M\xe9\x03."))
	info := []byte("\x80\x02}(")
	info = str(info, "protocol_version")
	info = append(info, "M\xe9\x03"...)
	info = str(info, "little_endian")
	info = append(info, 0x88)
	info = str(info, "type_sizes")
	info = append(info, "}("...)
	info = str(info, "short")
	info = append(info, "K\x02"...)
	info = str(info, "int")
	info = append(info, "K\x04"...)
	info = str(info, "long")
	info = append(info, "K\x04uu."...)
	w.Write(info)
	numel := size / 4
	obj := []byte("\x80\x02ccollections\nOrderedDict\nq\x00)Rq\x01(")
	for i := range n {
		key := strconv.Itoa(i)
		obj = str(obj, "model.layers."+key+".weight")
		obj = append(obj, "ctorch._utils\n_rebuild_tensor_v2\n(("...)
		obj = str(obj, "storage")
		obj = append(obj, "ctorch\nFloatStorage\n"...)
		obj = str(obj, key)
		obj = str(obj, "cpu")
		obj = i32(obj, numel)
		obj = append(obj, "NtQK\x00"...)
		obj = i32(obj, numel)
		obj = append(obj, "\x85K\x01\x85\x89ccollections\nOrderedDict\n)RtR"...)
		if i%1000 == 999 || i == n-1 {
			obj = append(obj, 'u')
			if i != n-1 {
				obj = append(obj, '(')
			}
		}
	}
	w.Write(append(obj, '.'))
	keys := []byte("\x80\x02](")
	for i := range n {
		keys = str(keys, strconv.Itoa(i))
	}
	w.Write(append(keys, "e."...))
	w.s.minimum = w.s.size + 8*int64(n) // the pickles, then every element count
	for range n {
		w.Write(binary.LittleEndian.AppendUint64(nil, uint64(numel)))
		if err := zeros(&w, size); err != nil {
			t.Fatal(err)
		}
	}
	return &w.s
}

// objectServer serves an io.ReaderAt with http.ServeContent (single and
// multi-range requests, If-Match) and a strong ETag, counting requests and
// response body bytes.
type objectServer struct {
	*httptest.Server
	requests, bytes atomic.Int64
	noMulti         bool // answer multi-range requests with 200, as S3 does
}

func serveObject(t testing.TB, obj io.ReaderAt, size int64) *objectServer {
	s := &objectServer{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.requests.Add(1)
		w.Header().Set("ETag", `"ckpt"`)
		if s.noMulti && bytes.Contains([]byte(r.Header.Get("Range")), []byte(",")) {
			r.Header.Del("Range")
		}
		http.ServeContent(&countingWriter{ResponseWriter: w, n: &s.bytes}, r, "", time.Time{}, io.NewSectionReader(obj, 0, size))
	}))
	t.Cleanup(s.Close)
	return s
}

// tensorBytes is the size of each tensor of the synthetic checkpoints: 1
// KB, or 100 KB (10,000 tensors: 1 GB) with GOSAFETENSORS_LONG=1. What a
// scan reads does not depend on it.
func tensorBytes() int64 {
	if os.Getenv("GOSAFETENSORS_LONG") != "" {
		return 100_000
	}
	return 1000
}

// zipMinimum returns the bytes an audit of a zip checkpoint cannot do
// without: its end records and central directory, its data.pkl, and every
// local header with its name.
func zipMinimum(t testing.TB, obj *sparse) int64 {
	z, err := ziplist.NewReader(obj, obj.size, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	n := obj.size - z.DirOffset
	for _, e := range z.Entries {
		n += 30 + int64(len(e.Name))
		if strings.HasSuffix(e.Name, "/data.pkl") {
			n += e.Size
		}
	}
	return n
}

// TestRemoteCheckpointRequests counts the requests and bytes an audit
// (torch.Scan) and an open (torch.NewReader, what inspect and convert do
// first) of a remote checkpoint cost, against a 10,000-tensor zip
// checkpoint (1 GB with GOSAFETENSORS_LONG=1; what is read does not
// depend on the tensors' size) and a legacy one: a few requests whatever
// the tensor count, where they cost 60,050 and 20,054 before.
func TestRemoteCheckpointRequests(t *testing.T) {
	for _, c := range []struct {
		name    string
		obj     func(testing.TB, int, int64) *sparse
		overMin float64
	}{
		{"zip", sparseZip, 2.5},
		{"legacy", sparseLegacy, 3.5},
	} {
		t.Run(c.name, func(t *testing.T) {
			obj := c.obj(t, 10_000, tensorBytes())
			minimum := obj.minimum
			if c.name == "zip" {
				minimum = zipMinimum(t, obj)
			}
			srv := serveObject(t, obj, obj.size)
			for _, op := range []string{"scan", "open"} {
				srv.requests.Store(0)
				srv.bytes.Store(0)
				f, err := Open(context.Background(), srv.URL+"/pytorch_model.bin")
				if err != nil {
					t.Fatal(err)
				}
				switch op {
				case "scan":
					rep, err := torch.Scan(f, f.Size(), f.Name())
					if err != nil || rep.Verdict() != torch.VerdictClean {
						t.Fatalf("scan: %v %v", err, rep.Problems)
					}
				case "open":
					ck, err := torch.NewReader(f, f.Size(), f.Name())
					if err != nil || len(ck.Tensors()) != 10_000 {
						t.Fatalf("open: %v", err)
					}
				}
				reqs, moved := srv.requests.Load(), srv.bytes.Load()
				t.Logf("%s of a %d-byte %s checkpoint: %d requests, %d bytes (%.2f x the %d bytes it must read)", op, obj.size, c.name, reqs, moved, float64(moved)/float64(max(minimum, 1)), minimum)
				// Over the minimum: multipart framing (~100 bytes a record
				// header), the read-ahead of a pickle stream whose end is not
				// known in advance (legacy), the tail fetched whole.
				if limit := c.overMin * float64(minimum); reqs > 8 || float64(moved) > limit {
					t.Errorf("%s: %d requests and %d bytes, want at most 8 and %.1f x %d", op, reqs, moved, c.overMin, minimum)
				}
			}
		})
	}
}

// TestRemoteConvertStreams: converting a remote checkpoint reads its
// storages in large ranges (the read-ahead of one stream over them all)
// and each byte once, verification included (it compares the output with
// the bytes copied, WithVerifyFromCopy, as the CLI does for remote input).
func TestRemoteConvertStreams(t *testing.T) {
	obj := sparseZip(t, 50, 1<<20)
	srv := serveObject(t, obj, obj.size)
	f, err := Open(context.Background(), srv.URL+"/pytorch_model.bin")
	if err != nil {
		t.Fatal(err)
	}
	ck, err := torch.NewReader(f, f.Size(), f.Name())
	if err != nil {
		t.Fatal(err)
	}
	plan, err := convert.PlanCheckpoint(ck, f.Name())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := plan.Write(context.Background(), filepath.Join(t.TempDir(), "model.safetensors"), convert.WithVerifyFromCopy(true)); err != nil {
		t.Fatal(err)
	}
	reqs, moved := srv.requests.Load(), srv.bytes.Load()
	t.Logf("converting a %d-byte checkpoint of 50 storages: %d requests, %d bytes (%.3f x its size)", obj.size, reqs, moved, float64(moved)/float64(obj.size))
	if reqs > 12 || moved > obj.size+obj.size/20 {
		t.Errorf("%d requests, %d bytes for a %d-byte checkpoint", reqs, moved, obj.size)
	}
}
