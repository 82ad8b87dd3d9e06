package torch

import (
	"encoding/binary"
	"fmt"
	"github.com/gosafetensors/safetensors/torch/pickle"
	"github.com/gosafetensors/safetensors/torch/tarlist"
	"io"
	"slices"
	"strings"
)

// tarReadByTorch are the members torch's legacy tar loader extracts and
// unpickles (sys_info is scanned too, in case a torch version reads it).
var tarReadByTorch = map[string]bool{"storages": true, "tensors": true, "pickle": true, "sys_info": true}

// scanTar scans a file whose first block Python's tarfile accepts, the
// way torch's legacy_load would read it: "storages" (a count pickle, then
// per storage an argument pickle and raw data, then a views pickle),
// "tensors" (a count pickle, then per tensor one argument pickle and
// binary metadata), "pickle" (the object). The members are listed as each
// Python release lists them (tar_list.go) and links are followed as
// tarfile follows them (tar_link.go); every member of those names in any
// listing is scanned (tarfile returns the last, but a listing that differs
// from Python's by one member must not hide the other), and where
// structure is lost the walker continues to the end of the member. The
// data of every other member is walked for globals too, so that a member
// only a link (or a listing we got wrong) makes torch read cannot hide one.
func scanTar(r io.ReaderAt, size int64, lim *Limits, rep *ScanReport) {
	lists, problems := tarlist.ListAll(r, size, lim.MaxZipEntries)
	for _, p := range problems {
		if !strings.HasPrefix(p, "tar: ") {
			p = "tar: " + p
		}
		rep.addProblem(p)
	}
	type job struct {
		name    string // what torch reads it as
		data, n int64
		sparse  bool
	}
	done := map[job]bool{}
	read := map[[2]int64]bool{} // data regions scanned as torch members
	noted := map[string]bool{}
	note := func(p string) {
		if !noted[p] {
			noted[p] = true
			rep.addProblem(p)
		}
	}
	selfRead := map[string]bool{} // torch names read through a link out of the archive
	for _, ms := range lists {
		l := tarlist.NewIndex(ms)
		for i, m := range ms {
			if !tarReadByTorch[m.Name] {
				continue
			}
			entry := "tar member " + m.Name
			targets, notes, outside := l.Resolve(i, tarExtractedBefore[m.Name]...)
			if !m.IsRegular() {
				note(fmt.Sprintf("%s is a link or special file (type %q) pointing to %q: torch would read what it points to", entry, m.Type, m.Linkname))
			}
			for _, n := range notes {
				note(entry + ": " + n)
			}
			if tarExtracted[m.Name] {
				for _, k := range outside {
					tarLinkOut(ms[k], m.Name, entry, rep, noted)
					selfRead[m.Name] = true
				}
			}
			for _, j := range targets {
				t := ms[j]
				k := job{m.Name, t.DataOffset, t.Size, t.HasSparse}
				if done[k] {
					continue
				}
				done[k] = true
				read[[2]int64{t.DataOffset, t.Size}] = true
				e := entry
				if j != i {
					e = fmt.Sprintf("%s (link to %s)", entry, t.Name)
				}
				scanTarData(r, size, t, m.Name, e, lim, rep)
			}
		}
	}
	// A link out of the archive may be /proc/self/fd/N: torch then reads
	// the checkpoint itself, from byte 0, as that member.
	for _, name := range []string{"storages", "tensors", "pickle"} {
		if len(selfRead) > 0 && (selfRead[name] || name == "pickle") {
			scanTarMember(r, 0, size, name, fmt.Sprintf("tar checkpoint read from byte 0 as member %s (through a link out of the archive)", name), lim, rep)
		}
	}
	// the rest: walked for globals
	for _, ms := range lists {
		for _, m := range ms {
			if !m.IsRegular() || read[[2]int64{m.DataOffset, m.Size}] {
				continue
			}
			read[[2]int64{m.DataOffset, m.Size}] = true
			n := tarlist.DataLen(m, size)
			if m.HasSparse {
				n = tarlist.StoredEnd(m, size) - m.DataOffset
			}
			if n > 0 {
				walkAt(r, m.DataOffset, 0, n, fmt.Sprintf("tar member %s (not read by torch)", m.Name), rep, nil)
			}
		}
	}
}

// tarExtracted are the members torch reads with tar.extract (then open):
// a link among them is made on disk as it is, so one that leaves the
// archive makes torch read a file of the host. "pickle" is read with
// extractfile, which only follows links inside the archive.
var tarExtracted = map[string]bool{"storages": true, "tensors": true}

// tarExtractedBefore are the members torch has extracted to disk before it
// reads each one: a link to one of them reads the file on disk.
var tarExtractedBefore = map[string][]string{"tensors": {"storages"}}

// tarLinkOut records link k, met while resolving the member torch reads
// as name, whose target is outside the archive. torch.load (Python 3.8 to
// 3.13 extract it without a filter) then unpickles whatever host file the
// link names: the checkpoint itself (/proc/self/fd/N, scanned from byte 0
// by the caller), or any file the scan cannot see. A checkpoint torch
// wrote never holds such a link: it is reported as a not-allowed finding,
// so the verdict is dangerous.
func tarLinkOut(k tarlist.Member, name, entry string, rep *ScanReport, noted map[string]bool) {
	key := "link-out|" + name + "|" + k.Linkname
	if noted[key] {
		return
	}
	noted[key] = true
	rep.addGlobal(GlobalUse{Module: "<tar-link>", Name: clip(k.Linkname), Offset: k.HeaderOffset, Entry: entry, Verdict: "not allowed",
		Reason: fmt.Sprintf("tar.extract makes %q a link (type %q) to a file outside the archive, and torch.load unpickles that host file as %q: code the scan cannot see", k.Name, k.Type, name)})
}

// scanTarData scans the data of member t as the member torch reads under
// name.
func scanTarData(r io.ReaderAt, size int64, t tarlist.Member, name, entry string, lim *Limits, rep *ScanReport) {
	if !t.HasSparse {
		if n := tarlist.DataLen(t, size); n > 0 {
			scanTarMember(r, t.DataOffset, n, name, entry, lim, rep)
		}
		return
	}
	if tarExtracted[name] {
		scanTarExtracted(r, size, t, name, entry, lim, rep)
	}
	// extractfile (pickle) reads the content through the sparse map
	v, ok := tarlist.NewSparseView(r, t.DataOffset, max(t.Size, 0), t.Sparse)
	switch {
	case ok && v.Holes() > maxSparseHoles:
		rep.addProblem(fmt.Sprintf("%s: its sparse map holds %d bytes of holes between data (more than %d); the stored data is scanned", entry, v.Holes(), maxSparseHoles))
	case ok:
		scanTarMember(v, 0, v.Size(), name, entry+" (sparse)", lim, rep)
	default:
		rep.addProblem(fmt.Sprintf("%s: its sparse map has negative or overflowing numbers or too many runs; the stored data is scanned", entry))
	}
	// all the stored data makefile copies, in file order
	if end := tarlist.StoredEnd(t, size); end > t.DataOffset {
		scanTarMember(r, t.DataOffset, end-t.DataOffset, name, entry+" (stored data)", lim, rep)
	}
}

// scanTarExtracted scans sparse member t as tar.extract writes it (see
// newExtractView): a later run overwrites an earlier one. Where holes
// are too large to scan through, each data run is walked on its own.
func scanTarExtracted(r io.ReaderAt, size int64, t tarlist.Member, name, entry string, lim *Limits, rep *ScanReport) {
	entry += " (sparse, as extracted)"
	v, short, ok := tarlist.NewExtractView(r, size, t.DataOffset, t.Size, t.Sparse)
	if !ok {
		rep.addProblem(fmt.Sprintf("%s: tar.extract fails on its sparse map (a negative offset or size); the stored data is scanned", entry))
		return
	}
	if short {
		rep.addProblem(fmt.Sprintf("%s: its sparse runs need more data than the file holds (tar.extract raises ReadError); what it writes first is scanned", entry))
	}
	if v.Holes() <= maxSparseHoles {
		scanTarMember(v, 0, v.Size(), name, entry, lim, rep)
		return
	}
	rep.addProblem(fmt.Sprintf("%s: its content holds %d bytes of holes between data (more than %d); it is walked for globals, skipping the largest holes", entry, v.Holes(), maxSparseHoles))
	walkSparse(v, entry, rep)
}

// walkSparse walks the content of v for globals in segments: the zeros of
// holes are walked through while they total at most maxSparseHoles
// (smallest first), and the larger holes split the content.
func walkSparse(v *tarlist.SparseView, entry string, rep *ScanReport) {
	var holes []int64
	for _, c := range v.Runs() {
		if c.Real < 0 {
			holes = append(holes, c.Stop-c.Start)
		}
	}
	slices.Sort(holes)
	limit, sum := int64(-1), int64(0) // holes up to limit are walked
	for i, h := range holes {
		if h > maxSparseHoles-sum {
			break
		}
		sum += h
		if i+1 == len(holes) || holes[i+1] != h {
			limit = h
		}
	}
	from := int64(0)
	for _, c := range v.Runs() {
		if c.Real < 0 && c.Stop-c.Start > limit {
			walkAt(v, 0, from, c.Start, entry, rep, nil)
			from = c.Stop
		}
	}
	walkAt(v, 0, from, v.Size(), entry, rep, nil)
}

// maxSparseHoles bounds the zeros of a sparse member's holes that are
// scanned as its content.
const maxSparseHoles = 64 << 20

// scanTarMember scans n bytes at base of r as the named member torch reads.
func scanTarMember(r io.ReaderAt, base, n int64, name, entry string, lim *Limits, rep *ScanReport) {
	switch name {
	case "storages":
		scanTarStorages(r, base, n, entry, lim, rep)
	case "tensors":
		scanTarTensors(r, base, n, entry, lim, rep)
	default: // "pickle", unpickled with legacy_load's persistent_load
		scanPickles(r, base, 0, n, entry, pidTar, lim, rep, 1, nil)
	}
}

// tarSeq decodes the pickles and binary records of a tar member in order.
type tarSeq struct {
	r        io.ReaderAt
	base, n  int64
	src      *pickle.Stream
	entry    string
	lim      *Limits
	rep      *ScanReport
	storages map[string]*storageRef
	done     bool
}

func newTarSeq(r io.ReaderAt, base, n int64, entry string, lim *Limits, rep *ScanReport) *tarSeq {
	return &tarSeq{r: r, base: base, n: n, src: pickle.NewStream(r, base, n), entry: entry, lim: lim, rep: rep,
		storages: make(map[string]*storageRef)}
}

// pickle decodes the next pickle; on failure the walker takes over to the
// end of the member and ok is false.
func (t *tarSeq) pickle() (any, bool) {
	if t.done {
		return nil, false
	}
	if t.src.Remaining() == 0 {
		t.rep.addProblem(fmt.Sprintf("%s: truncated (a pickle is missing at offset %d)", t.entry, t.src.Pos()))
		t.done = true
		return nil, false
	}
	ps := scanSource(t.src, t.entry, pidLegacy, t.lim, t.rep, 1, nil, t.storages)
	if ps.failed {
		walkAt(t.r, t.base, ps.failOff, t.n, t.entry, t.rep, ps.state)
		t.done = true
		return nil, false
	}
	return ps.first, true
}

// skip passes over k bytes of binary data.
func (t *tarSeq) skip(k int64) bool {
	if t.done {
		return false
	}
	if k < 0 || k > t.src.Remaining() {
		t.rep.addProblem(fmt.Sprintf("%s offset %d: %d bytes of data expected, %d remain", t.entry, t.src.Pos(), k, t.src.Remaining()))
		t.done = true
		return false
	}
	t.src.SetPos(t.src.Pos() + k)
	return true
}

func (t *tarSeq) u64() (uint64, bool) {
	if t.done || t.src.Remaining() < 8 {
		t.skip(8)
		return 0, false
	}
	var b [8]byte
	if readFull(t.r, b[:], t.base+t.src.Pos()) != nil {
		t.done = true
		return 0, false
	}
	t.src.SetPos(t.src.Pos() + 8)
	return binary.LittleEndian.Uint64(b[:]), true
}

// lost gives up on the structure: the rest of the member is walked.
func (t *tarSeq) lost(why string) {
	if t.done {
		return
	}
	t.rep.addProblem(fmt.Sprintf("%s offset %d: %s; the rest of the member is walked for globals", t.entry, t.src.Pos(), why))
	walkAt(t.r, t.base, t.src.Pos(), t.n, t.entry, t.rep, nil)
	t.done = true
}

// finish reports and walks bytes after the last record.
func (t *tarSeq) finish() {
	if t.done || t.src.Remaining() == 0 {
		return
	}
	t.rep.addProblem(fmt.Sprintf("%s offset %d: %d unexplained bytes after the last record", t.entry, t.src.Pos(), t.src.Remaining()))
	walkAt(t.r, t.base, t.src.Pos(), t.n, t.entry, t.rep, nil)
}

func scanTarStorages(r io.ReaderAt, base, n int64, entry string, lim *Limits, rep *ScanReport) {
	t := newTarSeq(r, base, n, entry, lim, rep)
	v, ok := t.pickle()
	if !ok {
		return
	}
	count, isInt := v.(int64)
	if !isInt || count < 0 {
		t.lost("the storage count is not a non-negative int")
		return
	}
	for i := int64(0); i < count; i++ {
		v, ok := t.pickle()
		if !ok {
			return
		}
		args, _ := v.(pickle.Tuple)
		var g *global
		if len(args) == 3 {
			g, _ = args[2].(*global)
		}
		if g == nil || g.allow == nil || g.allow.role != roleStorageType {
			t.lost("storage arguments are not (key, location, storage type)")
			return
		}
		numel, ok := t.u64()
		if !ok {
			return
		}
		k, ok := mulCheck(int64(numel), int64(g.allow.storage.itemSize))
		if !ok || !t.skip(k) {
			return
		}
	}
	if _, ok := t.pickle(); ok { // storage views
		t.finish()
	}
}

func scanTarTensors(r io.ReaderAt, base, n int64, entry string, lim *Limits, rep *ScanReport) {
	t := newTarSeq(r, base, n, entry, lim, rep)
	v, ok := t.pickle()
	if !ok {
		return
	}
	count, isInt := v.(int64)
	if !isInt || count < 0 {
		t.lost("the tensor count is not a non-negative int")
		return
	}
	for i := int64(0); i < count; i++ {
		// one pickle per tensor: (key, storage id, original tensor type)
		v, ok := t.pickle()
		if !ok {
			return
		}
		if args, _ := v.(pickle.Tuple); len(args) != 3 {
			t.lost("tensor arguments are not (key, storage id, tensor type)")
			return
		}
		nd, ok := t.u64() // int32 ndim, then 4 ignored bytes
		if !ok {
			return
		}
		ndim := int64(int32(uint32(nd)))
		if ndim < 0 || ndim > t.src.Remaining()/16 {
			t.lost(fmt.Sprintf("tensor rank %d does not fit in the member", ndim))
			return
		}
		if !t.skip(16*ndim + 8) { // sizes, strides, storage offset
			return
		}
	}
	t.finish()
}
