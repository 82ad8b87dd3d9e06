package torch

import (
	"bytes"
	"encoding/binary"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

const tarSparseCrafted = "tar_gnu_sparse_ext_pickle.tar"

// TestTarSparseCrafted checks the committed regression file against its
// generator (-update rewrites it) and that Scan names the global in the
// "pickle" member tarfile lists after the sparse extension block.
func TestTarSparseCrafted(t *testing.T) {
	path := filepath.Join(craftedDir, tarSparseCrafted)
	want := tarSparseExtPickle()
	if *updateCrafted {
		if err := os.WriteFile(path, want, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s differs from its generator (run with -update)", path)
	}
	rep, err := ScanFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if v := rep.Verdict(); v != "dangerous" || !slices.Contains(rep.NotAllowed(), "posix.system") {
		t.Fatalf("verdict %s, globals %v, problems %q", v, rep.NotAllowed(), rep.Problems)
	}
	if g := rep.Globals[0]; g.Entry != "tar member pickle" {
		t.Errorf("first global at %+v, want tar member pickle", g)
	}
}

// TestTarSparseMutations scans the sparse layouts with bytes of their
// headers and extension blocks overwritten (numbers, flags, base-256
// fields): no panic, no hang, and the member list stays bounded.
func TestTarSparseMutations(t *testing.T) {
	vals := []string{"\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff", "\x80\x7f\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff",
		"77777777777\x00", "00000000001\x00", "\x01", "\x00", "-1\x00"}
	n := 0
	for i, c := range slices.Concat(tarSparseCases(), tarExtractCases()) {
		start := len(tarHarmless)
		if i >= len(tarSparseCases()) {
			start = 0 // storages itself is sparse: read as tar.extract writes it
		}
		for pos := start; pos < min(len(c), start+3*tarBlock); pos += 7 {
			for _, v := range vals {
				b := append([]byte(nil), c...)
				copy(b[pos:], v)
				setTarChecksum(b[start:start+tarBlock], false)
				if _, err := Scan(bytes.NewReader(b), int64(len(b)), "f"); err != nil {
					t.Fatal(err)
				}
				n++
			}
		}
	}
	t.Logf("%d mutated sparse tars scanned", n)
}

// TestTarSparseExtractScanned: a payload only the extracted content holds
// (the second run overwrites the first) is named; with more holes than
// are scanned through, each run is walked and the verdict is never clean.
func TestTarSparseExtractScanned(t *testing.T) {
	f, _ := tarSparseOverwrite()
	for _, c := range [][]byte{f, tarSparseHoles(false), tarSparseHoles(true), tarSparseSplit()} {
		rep, err := Scan(bytes.NewReader(c), int64(len(c)), "f")
		if err != nil {
			t.Fatal(err)
		}
		if rep.Verdict() != VerdictDangerous || !slices.Contains(rep.NotAllowed(), "posix.system") {
			t.Errorf("verdict %s, globals %v, problems %q", rep.Verdict(), rep.NotAllowed(), rep.Problems)
		}
	}
}

// tarSparseHoles is storages with a benign count run, then (past a hole
// larger than maxSparseHoles, or a small one) a payload run that overwrites
// part of it... as the views pickle after a storage whose raw bytes span
// the hole.
func tarSparseHoles(huge bool) []byte {
	gap := int64(1 << 20)
	if huge {
		gap = maxSparseHoles + 1<<20
	}
	head := cat(hPickle("K\x01"), hPickle("(", hStr("s0"), hStr("cpu"), "ctorch\nByteStorage\nt"))
	numel := gap + 64 - int64(len(head)) - 8
	r1 := cat(head, binary.LittleEndian.AppendUint64(nil, uint64(numel)), "\x80\x02B", le32(200))
	p := systemPickle()
	at := int64(len(head)) + 8 + numel
	stored := cat(r1, p)
	hdr := sparseHdr("storages", int64(len(stored)), at+int64(len(p)), [][2]int64{{0, int64(len(r1))}, {at, int64(len(p))}}, false)
	return cat(hdr, pad512(stored), ustarMember("tensors", tarTensors0), ustarMember("pickle", hPickle("}")), tarEnd)
}

// tarSparseSplit: past a hole larger than maxSparseHoles, the payload is
// two adjacent runs stored in reverse order (neither run, nor the stored
// data, holds it whole).
func tarSparseSplit() []byte {
	head := cat(hPickle("K\x01"), hPickle("(", hStr("s0"), hStr("cpu"), "ctorch\nByteStorage\nt"))
	gap := int64(maxSparseHoles + 1<<20)
	numel := gap + 64 - int64(len(head)) - 8
	r1 := cat(head, binary.LittleEndian.AppendUint64(nil, uint64(numel)))
	p := systemPickle()
	h := 6 // inside "cposix\n"
	at := int64(len(r1)) + numel
	stored := cat(r1, p[h:], p[:h])
	hdr := sparseHdr("storages", int64(len(stored)), at+int64(len(p)),
		[][2]int64{{0, int64(len(r1))}, {at + int64(h), int64(len(p) - h)}, {at, int64(h)}}, false)
	return cat(hdr, pad512(stored), ustarMember("tensors", tarTensors0), ustarMember("pickle", hPickle("}")), tarEnd)
}
