package torch

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gosafetensors/safetensors/internal/torchoracle"
	"github.com/gosafetensors/safetensors/torch/torchtest"
	"github.com/gosafetensors/safetensors/torch/ziplist"
)

// The fixtures of testdata/storage_records are checkpoints whose storage
// records alone are odd or broken: a zip record's local header, its data
// descriptor, the bytes between records, a pickle inside a storage; a
// legacy storage's element count, a pickle inside a storage. They show
// what those records decide (TestStorageRecordsOracle asks real torch):
// whether torch.load fails and which bytes a tensor gets, never which
// globals torch imports. Open defers their checks to the storage's first
// read; Scan checks them all, and its verdict must be the same wherever
// the file is read from (remote.TestScanVerdictEverywhere).
//
// go test ./torch -run TestStorageRecordFixtures -update rewrites them
// and their INDEX.json; without -update the test regenerates each and
// requires it to equal the committed one.

const storageRecordsDir = testdata + "/storage_records"

// storageRecord is one line of testdata/storage_records/INDEX.json.
type storageRecord struct {
	Name     string `json:"name"`
	Base     string `json:"base"`     // the file it was made from, under testdata
	Record   string `json:"record"`   // the storage record changed
	Mutation string `json:"mutation"` // what was changed
	// TorchLoad is what torch.load (1.13) does with it: "loads" (the same
	// tensors as the base), "loads other bytes" (a tensor's bytes differ)
	// or "fails"; in every case it asks for no global the base does not
	// (TestStorageRecordsOracle).
	TorchLoad   string `json:"torch_load"`
	ScanVerdict string `json:"scan_verdict"`
	// Read is what the first read of the record's storage gives after
	// NewReader (which reads no storage) accepted the file: "ok", or the
	// error kind ("corrupt", "unsupported", "not allowed").
	Read string `json:"read"`
	// RefusedAtOpen: the trouble is not in a storage record, and NewReader
	// refuses the file (Read is its error's kind).
	RefusedAtOpen bool `json:"refused_at_open,omitempty"`

	data []byte
}

// payloadPickle is a protocol-2 pickle calling posix.system("true").
var payloadPickle = []byte("\x80\x02cposix\nsystem\nX\x04\x00\x00\x00true\x85R.")

// zipRecords lists a zip checkpoint's records.
func zipRecords(t testing.TB, b []byte) *ziplist.Reader {
	t.Helper()
	z, err := ziplist.NewReader(bytes.NewReader(b), int64(len(b)), 1<<16)
	if err != nil || len(z.Problems) > 0 {
		t.Fatalf("base archive: %v %v", err, z.Problems)
	}
	return z
}

// zipRecord returns the entry named name.
func zipRecord(t testing.TB, z *ziplist.Reader, name string) *ziplist.Entry {
	t.Helper()
	e := z.Lookup(name)
	if e == nil {
		t.Fatalf("no record %s", name)
	}
	return e
}

// insertBytes inserts ins at offset at of the zip archive b (a record
// boundary), moving every record and directory after it: the central
// directory's local header offsets and the end records are patched.
func insertBytes(t testing.TB, b []byte, at int64, ins []byte) []byte {
	t.Helper()
	z := zipRecords(t, b)
	out := slices.Concat(b[:at], ins, b[at:])
	k := int64(len(ins))
	move := func(off int64) int64 {
		if off >= at {
			return off + k
		}
		return off
	}
	cd := move(z.DirOffset)
	p := cd
	for range z.Entries {
		if binary.LittleEndian.Uint32(out[p:]) != 0x02014b50 {
			t.Fatalf("central entry at %d", p)
		}
		lo := binary.LittleEndian.Uint32(out[p+42:])
		binary.LittleEndian.PutUint32(out[p+42:], uint32(move(int64(lo))))
		nl, el, cl := binary.LittleEndian.Uint16(out[p+28:]), binary.LittleEndian.Uint16(out[p+30:]), binary.LittleEndian.Uint16(out[p+32:])
		p += 46 + int64(nl) + int64(el) + int64(cl)
	}
	if z.DirEnd != z.EndOffset { // zip64 end record and locator
		e64 := move(z.DirEnd)
		binary.LittleEndian.PutUint64(out[e64+48:], uint64(cd))
		binary.LittleEndian.PutUint64(out[move(z.EndOffset)-20+8:], uint64(e64))
	}
	binary.LittleEndian.PutUint32(out[move(z.EndOffset)+16:], uint32(cd))
	return out
}

// patch returns a copy of b with v written at off (a uint16, uint32 or
// uint64 little-endian, or bytes).
func patch(b []byte, off int64, v any) []byte {
	out := slices.Clone(b)
	switch x := v.(type) {
	case uint16:
		binary.LittleEndian.PutUint16(out[off:], x)
	case uint32:
		binary.LittleEndian.PutUint32(out[off:], x)
	case uint64:
		binary.LittleEndian.PutUint64(out[off:], x)
	case []byte:
		copy(out[off:], x)
	default:
		panic(fmt.Sprintf("patch %T", v))
	}
	return out
}

// storageRecordFiles generates the fixtures.
func storageRecordFiles(t testing.TB) []storageRecord {
	t.Helper()
	var out []storageRecord
	add := func(r storageRecord) { out = append(out, r) }

	// A real torch 1.13 zip checkpoint: fields of its records changed in
	// place.
	const real = "oracle/general_checkpoint.pt"
	b, err := os.ReadFile(filepath.Join(testdata, real))
	if err != nil {
		t.Fatal(err)
	}
	z := zipRecords(t, b)
	mid := zipRecord(t, z, "general_checkpoint/data/1")
	first := zipRecord(t, z, "general_checkpoint/data/0")
	last := zipRecord(t, z, "general_checkpoint/data/9")
	u16 := func(off int64) uint16 { return binary.LittleEndian.Uint16(b[off:]) }
	h := mid.HeaderOffset
	desc := mid.DataOffset + mid.Size // its data descriptor
	for _, c := range []struct {
		name, what    string
		e             *ziplist.Entry
		off           int64
		v             any
		load, verdict string
		read          string
	}{
		{"zip_header_signature", "local header signature PK\\x03\\x05", mid, h, uint32(0x05034b50), "fails", "invalid", "corrupt"},
		{"zip_first_header_signature", "local header signature PK\\x03\\x05 (the first storage, after data.pkl)", first, first.HeaderOffset, uint32(0x05034b50), "fails", "invalid", "corrupt"},
		{"zip_header_version", "version needed to extract 99", mid, h + 4, uint16(99), "loads", "clean", "ok"},
		{"zip_header_flags_encrypted", "local header flags with the encryption bit", mid, h + 6, u16(h+6) | 1, "loads", "invalid", "unsupported"},
		{"zip_header_flags_no_descriptor", "local header flags without the data-descriptor bit", mid, h + 6, u16(h+6) &^ 8, "loads", "clean", "ok"},
		{"zip_header_method_deflate", "local header says DEFLATE (the central directory STORED)", mid, h + 8, uint16(8), "loads", "invalid", "corrupt"},
		{"zip_header_crc", "local header CRC-32 0x12345678", mid, h + 14, uint32(0x12345678), "loads", "clean", "ok"},
		{"zip_header_sizes", "local header sizes 5 and 5", mid, h + 18, uint64(5 | 5<<32), "loads", "clean", "ok"},
		{"zip_header_name_length_plus_1", "local header name length + 1 (the data starts a byte later)", mid, h + 26, u16(h+26) + 1, "loads other bytes", "invalid", "corrupt"},
		{"zip_header_extra_length_minus_4", "local header extra field length - 4 (the data starts 4 bytes earlier)", mid, h + 28, u16(h+28) - 4, "loads other bytes", "invalid", "corrupt"},
		{"zip_header_extra_length_plus_8", "local header extra field length + 8 (the data runs into the next record)", mid, h + 28, u16(h+28) + 8, "loads other bytes", "invalid", "corrupt"},
		{"zip_header_extra_length_max", "local header extra field length 65535 (the data past the end of the file)", mid, h + 28, uint16(0xffff), "fails", "invalid", "corrupt"},
		{"zip_last_header_extra_length_minus_4", "local header extra field length - 4 (the last storage, before the version record)", last, last.HeaderOffset + 28, binary.LittleEndian.Uint16(b[last.HeaderOffset+28:]) - 4, "loads other bytes", "invalid", "corrupt"},
		{"zip_header_name_byte", "local header name's last byte changed (data/1 -> data/X)", mid, h + 30 + int64(len(mid.Name)) - 1, []byte("X"), "loads", "invalid", "corrupt"},
		{"zip_extra_field_pickle", "a pickle calling posix.system in the local header's extra field (padding)", first, first.HeaderOffset + 30 + int64(len(first.Name)), payloadPickle[:min(len(payloadPickle), int(first.DataOffset-first.HeaderOffset-30-int64(len(first.Name))))], "loads", "clean", "ok"},
		{"zip_descriptor_signature", "data descriptor signature PK\\x07\\x09", mid, desc, uint32(0x09074b50), "loads", "invalid", "corrupt"},
		{"zip_descriptor_crc", "data descriptor CRC-32 0x12345678", mid, desc + 4, uint32(0x12345678), "loads", "invalid", "corrupt"},
	} {
		add(storageRecord{Name: c.name + ".pt", Base: real, Record: c.e.Name, Mutation: c.what, TorchLoad: c.load, ScanVerdict: c.verdict, Read: c.read,
			data: patch(b, c.off, c.v)})
	}
	if n := first.DataOffset - first.HeaderOffset - 30 - int64(len(first.Name)); n < int64(len(payloadPickle)) {
		t.Fatalf("the first storage's extra field holds %d bytes, the payload %d", n, len(payloadPickle))
	}
	next := desc + 16 // the record after data/1
	add(storageRecord{Name: "zip_gap_pickle.pt", Base: real, Record: mid.Name, Mutation: "a pickle calling posix.system between the storage's data descriptor and the next record",
		TorchLoad: "loads", ScanVerdict: "dangerous", Read: "not allowed", data: insertBytes(t, b, next, payloadPickle)})
	add(storageRecord{Name: "zip_gap_zeros.pt", Base: real, Record: mid.Name, Mutation: "16 zero bytes between the storage's data descriptor and the next record",
		TorchLoad: "loads", ScanVerdict: "invalid", Read: "corrupt", data: insertBytes(t, b, next, make([]byte, 16))})

	// A storage whose bytes are a pickle (torch lays the record out; the
	// base is written by torchtest, as torch.save writes it).
	const made = "storage_records/zip_base.pt"
	pad := func(p []byte) []byte { return append(slices.Clone(p), make([]byte, 64-len(p))...) }
	tensors := func(data []byte) []torchtest.Tensor {
		return []torchtest.Tensor{
			{Name: "a", DType: "F32", Shape: []int64{16}, Data: make([]byte, 64)},
			{Name: "b", DType: "U8", Shape: []int64{64}, Data: data},
			{Name: "c", DType: "F32", Shape: []int64{4}, Data: make([]byte, 16)},
		}
	}
	var buf bytes.Buffer
	if err := torchtest.WriteZip(&buf, tensors(make([]byte, 64)), torchtest.Options{}); err != nil {
		t.Fatal(err)
	}
	add(storageRecord{Name: "zip_base.pt", Base: made, Record: "", Mutation: "none: the base of the storage_pickle fixtures",
		TorchLoad: "loads", ScanVerdict: "clean", Read: "ok", data: slices.Clone(buf.Bytes())})
	for _, c := range []struct {
		name, what string
		data       []byte
		verdict    string
		read       string
	}{
		{"zip_storage_pickle", "the storage's bytes start with a pickle calling posix.system", pad(payloadPickle), "dangerous", "not allowed"},
		{"zip_storage_pickle_allowed", "the storage's bytes start with a pickle naming collections.OrderedDict", pad([]byte("\x80\x02ccollections\nOrderedDict\n)R.")), "invalid", "corrupt"},
		{"zip_storage_pickle_plain", "the storage's bytes start with a pickle of an int (PROTO 2, no global)", pad([]byte("\x80\x02K\x07.")), "clean", "ok"},
	} {
		buf.Reset()
		if err := torchtest.WriteZip(&buf, tensors(c.data), torchtest.Options{}); err != nil {
			t.Fatal(err)
		}
		add(storageRecord{Name: c.name + ".pt", Base: made, Record: "archive/data/1", Mutation: c.what,
			TorchLoad: "loads other bytes", ScanVerdict: c.verdict, Read: c.read, data: slices.Clone(buf.Bytes())})
	}

	// A real torch 1.13 legacy checkpoint: element counts changed, a
	// pickle in a storage, a pickle after the last one.
	const legacy = "torch/dtypes_legacy.pt"
	lb, err := os.ReadFile(filepath.Join(testdata, legacy))
	if err != nil {
		t.Fatal(err)
	}
	lim := DefaultLimits()
	lc, err := open(bytes.NewReader(lb), int64(len(lb)), &lim, false)
	if err != nil {
		t.Fatal(err)
	}
	ls := lc.storages
	lmid, llast := ls[len(ls)/2], ls[len(ls)-1]
	big := ls[0]
	for _, s := range ls {
		if s.NBytes() > big.NBytes() {
			big = s
		}
	}
	for _, c := range []struct {
		name, what string
		s          *Storage
		v          uint64
	}{
		{"legacy_count_plus_1", "element count + 1", lmid, uint64(lmid.Numel + 1)},
		{"legacy_count_minus_1", "element count - 1", lmid, uint64(lmid.Numel - 1)},
		{"legacy_count_zero", "element count 0", lmid, 0},
		{"legacy_count_huge", "element count 2^40", lmid, 1 << 40},
		{"legacy_count_negative", "element count -1", lmid, ^uint64(0)},
		{"legacy_first_count_plus_1", "element count + 1 (the first storage)", ls[0], uint64(ls[0].Numel + 1)},
		{"legacy_last_count_minus_1", "element count - 1 (the last storage)", llast, uint64(llast.Numel - 1)},
	} {
		add(storageRecord{Name: c.name + ".pt", Base: legacy, Record: c.s.entry, Mutation: c.what,
			TorchLoad: "fails", ScanVerdict: "invalid", Read: "corrupt", data: patch(lb, c.s.at, c.v)})
	}
	if big.NBytes() < int64(len(payloadPickle)) {
		t.Fatalf("the largest legacy storage holds %d bytes", big.NBytes())
	}
	add(storageRecord{Name: "legacy_storage_pickle.pt", Base: legacy, Record: big.entry, Mutation: "the storage's bytes start with a pickle calling posix.system",
		TorchLoad: "loads other bytes", ScanVerdict: "clean", Read: "ok", data: patch(lb, big.at+8, payloadPickle)})
	add(storageRecord{Name: "legacy_trailing_pickle.pt", Base: legacy, Mutation: "a pickle calling posix.system after the last storage (not a storage record: checked at open)",
		TorchLoad: "loads", ScanVerdict: "dangerous", Read: "not allowed", RefusedAtOpen: true, data: slices.Concat(lb, payloadPickle)})
	return out
}

func readStorageRecordIndex(t testing.TB) []storageRecord {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(storageRecordsDir, "INDEX.json"))
	if err != nil {
		t.Fatal(err)
	}
	var idx []storageRecord
	if err := json.Unmarshal(b, &idx); err != nil {
		t.Fatal(err)
	}
	return idx
}

// readKind names the kind of a read's error as INDEX.json does.
func readKind(err error) string {
	switch {
	case err == nil:
		return "ok"
	case errors.Is(err, ErrNotAllowed):
		return "not allowed"
	case errors.Is(err, ErrUnsupported):
		return "unsupported"
	case errors.Is(err, ErrLimit):
		return "limit"
	}
	return "corrupt"
}

// TestStorageRecordFixtures regenerates the fixtures and checks each
// against Scan (its verdict), NewReader (which reads no storage, so
// accepts the file unless the trouble is elsewhere) and the first read of
// the changed record's storage (which runs the record's deferred checks:
// it fails exactly when Scan does not say clean, with the error the full
// analysis gives).
func TestStorageRecordFixtures(t *testing.T) {
	files := storageRecordFiles(t)
	if *updateCrafted {
		if err := os.MkdirAll(storageRecordsDir, 0o755); err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			if err := os.WriteFile(filepath.Join(storageRecordsDir, f.Name), f.data, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		b, _ := json.MarshalIndent(files, "", "  ")
		if err := os.WriteFile(filepath.Join(storageRecordsDir, "INDEX.json"), append(b, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	idx := readStorageRecordIndex(t)
	if len(idx) != len(files) {
		t.Fatalf("INDEX.json has %d entries, the generator %d (run go test ./torch -run TestStorageRecordFixtures -update)", len(idx), len(files))
	}
	for i, f := range files {
		b, err := os.ReadFile(filepath.Join(storageRecordsDir, f.Name))
		if err != nil || !bytes.Equal(b, f.data) || idx[i].Name != f.Name {
			t.Fatalf("%s: committed file differs from the generator (run go test ./torch -run TestStorageRecordFixtures -update): %v", f.Name, err)
		}
		t.Run(f.Name, func(t *testing.T) {
			rep, err := Scan(bytes.NewReader(b), int64(len(b)), f.Name)
			if err != nil {
				t.Fatal(err)
			}
			if string(rep.Verdict()) != f.ScanVerdict {
				t.Errorf("scan says %s (problems %q, globals %v), want %s", rep.Verdict(), rep.Problems, rep.NotAllowed(), f.ScanVerdict)
			}
			c, err := NewReader(bytes.NewReader(b), int64(len(b)), f.Name)
			if f.RefusedAtOpen {
				if readKind(err) != f.Read {
					t.Errorf("NewReader: %v, want %s", err, f.Read)
				}
				return
			}
			if err != nil {
				t.Fatalf("NewReader refuses a file whose trouble is in a storage record: %v", err)
			}
			var rerr error
			for _, tn := range c.Tensors() {
				if f.Record == "" || tn.Storage.entry == f.Record {
					_, rerr = tn.WriteTo(&bytes.Buffer{})
					break
				}
			}
			if got := readKind(rerr); got != f.Read {
				t.Errorf("the first read of %s: %v (%s), want %s", f.Record, rerr, got, f.Read)
			}
			if (rerr == nil) != (rep.Verdict() == VerdictClean) {
				t.Errorf("the first read of the storage gives %v, scan says %s", rerr, rep.Verdict())
			}
			if rerr != nil && rep.Verdict() == VerdictDangerous && !strings.Contains(rerr.Error(), "posix.system") {
				t.Errorf("the refusal does not name posix.system: %v", rerr)
			}
			checkDeferredAgree(t, b, f.Name)
		})
	}
}

// TestStorageRecordsOracle asks real torch (internal/torchoracle) what
// each storage-record fixture does: whatever a storage record holds, torch
// asks for no global its base does not (the globals it asks for are the
// base's, or the first of them when the load fails at that storage), so
// a storage record cannot decide what torch imports; it decides only
// whether torch.load fails and which bytes a tensor gets, as INDEX.json's
// torch_load says. And what Scan calls clean, torch loads.
func TestStorageRecordsOracle(t *testing.T) {
	o := torchoracle.Shared(t, torchoracle.Options{Allow: AllowlistForOracle()})
	bases := map[string]*torchoracle.Result{}
	load := func(path string) *torchoracle.Result {
		r, err := o.Load(path)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	sums := func(r *torchoracle.Result) []string {
		var out []string
		for _, tn := range r.Tensors {
			out = append(out, tn.Name+" "+tn.SHA256)
		}
		return out
	}
	for _, f := range readStorageRecordIndex(t) {
		base := bases[f.Base]
		if base == nil {
			base = load(filepath.Join(testdata, f.Base))
			if !base.Loaded || len(base.Refused) > 0 || len(base.Tensors) == 0 {
				t.Fatalf("base %s: loaded %v, refused %v, error %s", f.Base, base.Loaded, base.Refused, base.Error)
			}
			bases[f.Base] = base
		}
		r := load(filepath.Join(storageRecordsDir, f.Name))
		if len(r.Events) > 0 || len(r.Refused) > 0 {
			t.Errorf("%s: torch asked for %v (events %v)", f.Name, r.Refused, r.Events)
		}
		if len(r.Globals) > len(base.Globals) || !slices.Equal(r.Globals, base.Globals[:len(r.Globals)]) {
			t.Errorf("%s: torch asked for %v, the base for %v", f.Name, r.Globals, base.Globals)
		}
		got := "fails"
		if r.Loaded {
			got = "loads"
			if !slices.Equal(sums(r), sums(base)) {
				got = "loads other bytes"
			}
		}
		if got != f.TorchLoad {
			t.Errorf("%s (%s): torch.load %s (%s), INDEX.json says %s", f.Name, f.Mutation, got, r.Error, f.TorchLoad)
		}
		if f.ScanVerdict == string(VerdictClean) && !r.Loaded {
			t.Errorf("%s: scan says clean, torch.load fails: %s", f.Name, r.Error)
		}
		t.Logf("%-40s torch.load %-18s asks for %d of the base's %d globals; scan %s", f.Name, got, len(r.Globals), len(base.Globals), f.ScanVerdict)
	}
}
