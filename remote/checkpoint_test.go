package remote

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
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

// sparseTensors are n F32 tensors of size bytes each, zeros.
func sparseTensors(n int, size int64) []torchtest.Tensor {
	tensors := make([]torchtest.Tensor, n)
	for i := range tensors {
		tensors[i] = torchtest.Tensor{Name: "model.layers." + strconv.Itoa(i) + ".weight", DType: "F32", Shape: []int64{size / 4},
			DataSize: size, Fill: func(w io.Writer) error { return zeros(w, size) }}
	}
	return tensors
}

// sparseZip returns a torch zip checkpoint of n F32 tensors of size bytes
// each (zeros), as torch.save lays it out.
func sparseZip(t testing.TB, n int, size int64) *sparse {
	t.Helper()
	var w sparseWriter
	if err := torchtest.WriteZip(&w, sparseTensors(n, size), torchtest.Options{}); err != nil {
		t.Fatal(err)
	}
	return &w.s
}

// sparseLegacy returns a legacy (torch < 1.6, _use_new_zipfile_serialization=False)
// checkpoint of n F32 tensors of size bytes each (zeros): the magic
// number, protocol and system-info pickles, the state dict whose storages
// are persistent ids, the list of storage keys, then every storage as its
// element count and bytes.
func sparseLegacy(t testing.TB, n int, size int64) *sparse {
	t.Helper()
	var w sparseWriter
	if err := torchtest.WriteLegacy(&w, sparseTensors(n, size), torchtest.Options{}); err != nil {
		t.Fatal(err)
	}
	w.s.minimum = w.s.size - int64(n)*size // the pickles, then every element count
	return &w.s
}

// rangeMode is how a test server answers a request for several ranges.
type rangeMode int

const (
	multiRange rangeMode = iota // multipart/byteranges (Go's net/http, nginx, Apache, Caddy)
	whole200                    // 200 and the whole object, as servers that ignore a multi-range Range header do
	firstOnly                   // 206 with the first range only, as some CDNs and object stores do
)

func (m rangeMode) String() string {
	return [...]string{"multi-range server", "single-range server (200 to several ranges)", "single-range server (first range only)"}[m]
}

// objectServer serves an io.ReaderAt with http.ServeContent (single and
// multi-range requests, If-Match) and a strong ETag, counting requests
// and the response body bytes of 206 answers (a 200 to a multi-range request sends the whole object,
// which the client closes unread).
type objectServer struct {
	*httptest.Server
	requests, bytes atomic.Int64
	noMulti         bool // answer multi-range requests with 200, as S3 does
	mode            rangeMode
}

func serveObject(t testing.TB, obj io.ReaderAt, size int64) *objectServer {
	s := &objectServer{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.requests.Add(1)
		w.Header().Set("ETag", `"ckpt"`)
		var out http.ResponseWriter = &countingWriter{ResponseWriter: w, n: &s.bytes}
		if rng := r.Header.Get("Range"); strings.Contains(rng, ",") {
			switch {
			case s.noMulti || s.mode == whole200:
				r.Header.Del("Range")
				out = w
			case s.mode == firstOnly:
				r.Header.Set("Range", rng[:strings.IndexByte(rng, ',')])
			}
		}
		http.ServeContent(out, r, "", time.Time{}, io.NewSectionReader(obj, 0, size))
	}))
	t.Cleanup(s.Close)
	return s
}

// reset zeroes the counters.
func (s *objectServer) reset() {
	s.requests.Store(0)
	s.bytes.Store(0)
}

// ckptTensorBytes is the size of each tensor of the synthetic 10,000-tensor
// checkpoints (1 GB, held sparse): large enough that record headers are
// too far apart to share a single-range request, as in the checkpoints
// people audit.
const ckptTensorBytes = 100_000

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
// checkpoint of 1 GB and a legacy one, on a server that answers
// multi-range requests and on two that answer only single ranges: at most
// 8 requests each, whatever the tensor count and the server. An open reads
// no storage record (their checks wait for each storage's first read) and
// a few MB; an audit checks every record: on a multi-range server it reads
// a few MB, on a single-range one it reads through the storages with one
// request (the record headers lie 100 KB apart, less than what a request
// costs: see singleRangeGap). Before this work they cost 60,050 and 20,054
// requests; before the checks were deferred and the single-range gap was
// priced, an open on a single-range server 10,007 and 9,987 requests, an
// audit 10,007 and 9,982.
func TestRemoteCheckpointRequests(t *testing.T) {
	const n = 10_000
	for _, c := range []struct {
		name    string
		obj     func(testing.TB, int, int64) *sparse
		overMin float64
	}{
		{"zip", sparseZip, 2.5},
		// the read-ahead of the pickles runs past their end (which is not
		// known in advance) into the storages
		{"legacy", sparseLegacy, 4.5},
	} {
		t.Run(c.name, func(t *testing.T) {
			obj := c.obj(t, n, ckptTensorBytes)
			minimum := obj.minimum
			if c.name == "zip" {
				minimum = zipMinimum(t, obj)
			}
			for _, mode := range []rangeMode{multiRange, whole200, firstOnly} {
				srv := serveObject(t, obj, obj.size)
				srv.mode = mode
				for _, op := range []string{"scan", "open"} {
					srv.reset()
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
						if err != nil || len(ck.Tensors()) != n {
							t.Fatalf("open: %v", err)
						}
					}
					reqs, moved := srv.requests.Load(), srv.bytes.Load()
					t.Logf("%s, %s of a %d-byte %s checkpoint: %d requests, %d bytes (%.2f x the %d bytes an audit must read, %.3f x the file)",
						mode, op, obj.size, c.name, reqs, moved, float64(moved)/float64(max(minimum, 1)), minimum, float64(moved)/float64(obj.size))
					// Over the minimum: multipart framing (~100 bytes a record
					// header), the read-ahead of a pickle stream whose end is not
					// known in advance (legacy), the tail fetched whole.
					limit := c.overMin * float64(minimum)
					if op == "scan" && mode != multiRange {
						limit = 1.01 * float64(obj.size) // the storages read through
					}
					if reqs > 8 || float64(moved) > limit {
						t.Errorf("%s, %s: %d requests and %d bytes, want at most 8 and %.0f", mode, op, reqs, moved, limit)
					}
				}
			}
		})
	}
}

// TestRemoteConvertStreams: converting a remote checkpoint reads its
// storages in large ranges (the read-ahead of one stream over them all,
// which the checks of each storage's record, made on its first read, read
// from too) and each byte once, verification included (it compares the
// output with the bytes copied, WithVerifyFromCopy, as the CLI does for
// remote input), on every kind of server.
func TestRemoteConvertStreams(t *testing.T) {
	for _, c := range []struct {
		name string
		obj  func(testing.TB, int, int64) *sparse
	}{{"zip", sparseZip}, {"legacy", sparseLegacy}} {
		obj := c.obj(t, 50, 1<<20)
		for _, mode := range []rangeMode{multiRange, whole200, firstOnly} {
			srv := serveObject(t, obj, obj.size)
			srv.mode = mode
			f, err := Open(context.Background(), srv.URL+"/pytorch_model.bin")
			if err != nil {
				t.Fatal(err)
			}
			ck, err := torch.NewReader(f, f.Size(), f.Name())
			if err != nil {
				t.Fatal(err)
			}
			opened := srv.requests.Load()
			plan, err := convert.PlanCheckpoint(ck, f.Name())
			if err != nil {
				t.Fatal(err)
			}
			if _, err := plan.Write(context.Background(), filepath.Join(t.TempDir(), "model.safetensors"), convert.WithVerifyFromCopy(true)); err != nil {
				t.Fatal(err)
			}
			reqs, moved := srv.requests.Load(), srv.bytes.Load()
			t.Logf("%s, converting a %d-byte %s checkpoint of 50 storages: %d requests (%d to open it), %d bytes (%.3f x its size)",
				mode, obj.size, c.name, reqs, opened, moved, float64(moved)/float64(obj.size))
			if reqs > 8 || moved > obj.size+obj.size/20 {
				t.Errorf("%s, %s: %d requests, %d bytes for a %d-byte checkpoint", mode, c.name, reqs, moved, obj.size)
			}
		}
	}
}

// fixtureFiles lists the checkpoint-like fixtures of testdata (every file
// but the indexes, notes and scripts).
func fixtureFiles(t *testing.T) []string {
	var paths []string
	for _, dir := range []string{"torch", "oracle", "crafted", "malicious", "broken", "unsupported", "storage_records", "compressed"} {
		ents, _ := os.ReadDir(filepath.Join("../testdata", dir))
		for _, e := range ents {
			if ext := filepath.Ext(e.Name()); e.Type().IsRegular() && ext != ".json" && ext != ".md" && ext != ".py" {
				paths = append(paths, filepath.Join("../testdata", dir, e.Name()))
			}
		}
	}
	if len(paths) < 200 {
		t.Fatalf("only %d fixtures", len(paths))
	}
	return paths
}

// TestScanVerdictEverywhere: Scan's report of every fixture in testdata
// (the crafted attack files, the oracle's checkpoints, the storage-record
// fixtures, real torch output, broken files) is the same read locally,
// from a server that answers multi-range requests and from servers that
// answer only single ranges (a 200 to several ranges, or the first range
// only); and so is opening it and running the checks deferred to the
// storages' first reads (NewReader then Checkpoint.Check), error for
// error. The remote reads start small (a 512-byte prefix, a 4 KiB
// read-ahead) so that even small files take many requests.
func TestScanVerdictEverywhere(t *testing.T) {
	summary := func(rep *torch.ScanReport, err error) string {
		if rep == nil {
			return fmt.Sprintf("no report: %v", err)
		}
		return fmt.Sprintf("%s (%s): globals %v, opcodes %d, problems %q, tensors %d, err %v", rep.Verdict(), rep.Format, rep.NotAllowed(), len(rep.DangerousOpcodes), rep.Problems, rep.Tensors, err)
	}
	open := func(r io.ReaderAt, size int64) string {
		c, err := torch.NewReader(r, size, "fixture")
		if err != nil {
			return "refused at open: " + err.Error()
		}
		if err := c.Check(); err != nil {
			return "refused by the deferred checks: " + err.Error()
		}
		return fmt.Sprintf("accepted, %d tensors", len(c.Tensors()))
	}
	servers := map[rangeMode]*objectServer{}
	var data atomic.Pointer[[]byte]
	for _, mode := range []rangeMode{multiRange, whole200, firstOnly} {
		s := &objectServer{mode: mode}
		s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			b := *data.Load()
			w.Header().Set("ETag", fmt.Sprintf(`"%x"`, sha256.Sum256(b)))
			if rng := r.Header.Get("Range"); strings.Contains(rng, ",") {
				switch mode {
				case whole200:
					r.Header.Del("Range")
				case firstOnly:
					r.Header.Set("Range", rng[:strings.IndexByte(rng, ',')])
				}
			}
			http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(b))
		}))
		t.Cleanup(s.Close)
		servers[mode] = s
	}
	n := 0
	for _, p := range fixtureFiles(t) {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if len(b) > 8<<20 {
			continue
		}
		n++
		data.Store(&b)
		rep, err := torch.Scan(bytes.NewReader(b), int64(len(b)), "fixture")
		want, wantOpen := summary(rep, err), open(bytes.NewReader(b), int64(len(b)))
		for mode, s := range servers {
			f, err := Open(context.Background(), s.URL+"/"+filepath.Base(p), WithPrefetch(512), WithReadAhead(4<<10))
			if err != nil {
				t.Fatalf("%s: %v", p, err)
			}
			rep, err := torch.Scan(f, f.Size(), "fixture")
			if got := summary(rep, err); got != want {
				t.Errorf("%s, %s: scan gives\n  %s\nlocally\n  %s", p, mode, got, want)
			}
			if got := open(f, f.Size()); got != wantOpen {
				t.Errorf("%s, %s: open gives\n  %s\nlocally\n  %s", p, mode, got, wantOpen)
			}
			f.Close()
		}
	}
	t.Logf("%d fixtures, the same report locally and on %d kinds of server", n, len(servers))
}
