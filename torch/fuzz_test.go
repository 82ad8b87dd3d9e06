package torch

import (
	"bytes"
	"fmt"
	"github.com/gosafetensors/safetensors/torch/pickle"
	"github.com/gosafetensors/safetensors/torch/tarlist"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// fuzzLimits keeps each fuzz iteration cheap while exercising every cap.
func fuzzLimits() *Limits {
	l := DefaultLimits()
	l.MaxPickleBytes = 1 << 20
	l.MaxStringBytes = 1 << 16
	l.MaxMemo = 1 << 12
	l.MaxStack = 1 << 12
	l.MaxMarks = 1 << 8
	l.MaxObjects = 1 << 16
	l.MaxEntries = 1 << 12
	l.MaxNameBytes = 1 << 20
	l.MaxZipEntries = 1 << 10
	l.MaxViewBuffer = 1 << 16
	l.MaxTensorBytes = 1 << 24
	return &l
}

func addSeeds(f *testing.F, match func(string) bool) {
	for _, dir := range []string{"torch", "malicious", "broken", "unsupported"} {
		files, _ := filepath.Glob(filepath.Join(testdata, dir, "*"))
		for _, p := range files {
			if !match(p) || filepath.Ext(p) == ".json" || filepath.Ext(p) == ".safetensors" {
				continue
			}
			if b, err := os.ReadFile(p); err == nil && len(b) <= 64<<10 {
				f.Add(b)
			}
		}
	}
}

// FuzzUnpickle feeds arbitrary bytes to the strict and scanning machines
// (no recover: a panic fails the fuzzer).
func FuzzUnpickle(f *testing.F) {
	addSeeds(f, func(p string) bool { return filepath.Ext(p) == ".pkl" || filepath.Ext(p) == ".bin" })
	f.Add([]byte("\x80\x02ccollections\nOrderedDict\n)R."))
	f.Fuzz(func(t *testing.T, b []byte) {
		defer watchdog(b)()
		lim := fuzzLimits()
		for _, mode := range []pidMode{pidNone, pidZip, pidLegacy} {
			src := pickle.NewStream(bytes.NewReader(b), 0, int64(len(b)))
			m := newVM(src, lim, "f", mode, nil, nil)
			if v, err := m.run(); err == nil {
				c := &Checkpoint{}
				_ = c.build(v, map[*storageRef]*Storage{}, "f", lim)
			}
			src = pickle.NewStream(bytes.NewReader(b), 0, int64(len(b)))
			m = newVM(src, lim, "f", mode, nil, nil)
			m.scan = (&ScanReport{}).sink("f")
			_, _ = m.run()
		}
		if m := int64(len(b)) + 1; m < 0 {
			t.Fatal("unreachable")
		}
	})
}

// FuzzZip feeds arbitrary files to the container layer, Open and Scan, and
// reads every tensor of files that open.
func FuzzZip(f *testing.F) {
	addSeeds(f, func(string) bool { return true })
	f.Fuzz(func(t *testing.T, b []byte) {
		defer watchdog(b)()
		lim := fuzzLimits()
		r := bytes.NewReader(b)
		for _, deferred := range []bool{false, true} {
			if c, err := open(r, int64(len(b)), lim, deferred); err == nil {
				if c.deferred != nil {
					c.deferred.name = "fuzz"
				}
				for _, tn := range c.Tensors() {
					if tn.NBytes() > 1<<24 {
						t.Fatalf("tensor %q claims %d bytes in a %d-byte file", tn.Name, tn.NBytes(), len(b))
					}
					_, _ = tn.WriteTo(io.Discard)
				}
			}
		}
		rep := &ScanReport{}
		if len(b) > 0 && bytes.HasPrefix(b, []byte("PK")) {
			scanZip(r, int64(len(b)), lim, rep)
		} else {
			scanStream(r, int64(len(b)), lim, rep)
		}
	})
}

// watchdog crashes the fuzz worker (so the input is saved) if one input
// takes more than 10 seconds: work must stay bounded.
func watchdog(b []byte) func() {
	t := time.AfterFunc(10*time.Second, func() { panic(fmt.Sprintf("input took more than 10s: %q", b)) })
	return func() { t.Stop() }
}

// FuzzScanTar feeds arbitrary files to the tar layer and the whole scan:
// no panic, bounded work, and a first block the header check accepts
// makes the file a tar for Scan.
func FuzzScanTar(f *testing.F) {
	for _, p := range []string{"tar_v7_longname_pickle_polyglot.pt", "tar_pax_path_polyglot.pt", "py_tar_pickle_member.pt", "py_gnutar_storages_member.pt"} {
		if b, err := os.ReadFile(filepath.Join(testdata, "crafted", p)); err == nil {
			f.Add(b)
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		defer watchdog(b)()
		lim := fuzzLimits()
		r := bytes.NewReader(b)
		if len(b) >= tarBlock {
			_, _ = tarlist.ParseHeader(b[:tarBlock])
			rep, err := Scan(r, int64(len(b)), "f", WithLimits(*lim))
			if err != nil {
				t.Fatal(err)
			}
			if tarlist.IsTar(r, int64(len(b))) && !bytes.HasPrefix(b, []byte("PK\x03\x04")) && rep.Format != FormatTar {
				t.Fatalf("tar accepted but scanned as %s", rep.Format)
			}
		}
		tarlist.ListUnion(r, int64(len(b)), lim.MaxZipEntries)
	})
}
