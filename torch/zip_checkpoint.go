package torch

import (
	"github.com/gosafetensors/safetensors/torch/pickle"
	"io"
	"strconv"
	"strings"
)

// openZip reads a torch zip checkpoint. Order matters: every data.pkl
// candidate is decoded first (so a dangerous global is what gets reported,
// even in an archive that is also malformed), then container problems are
// reported, then the object is resolved against the storage records.
// torchScriptMsg explains why a TorchScript archive does not convert.
const torchScriptMsg = "TorchScript archive (torch.jit.save): not a pickled state dict (torch.load hands it to torch.jit.load, " +
	"which resolves its __torch__ classes and compiles its code without Python's pickle); load it with torch.jit.load " +
	"and torch.save its state_dict() to convert it"

func openZip(r io.ReaderAt, size int64, lim *Limits, deferred bool) (*Checkpoint, error) {
	list := readZip
	if deferred {
		list = readZipDeferring
	}
	z, err := list(r, size, lim)
	if err != nil {
		return nil, err
	}
	prefix := z.prefix()
	if isTorchScript(z, prefix) {
		return nil, newError(ErrUnsupported, prefix+"/constants.pkl", -1, "%s", torchScriptMsg)
	}

	type decoded struct {
		e        *zipEntry
		root     any
		storages map[string]*storageRef
		err      error
	}
	var pkls []decoded
	var spent int64
	for _, e := range z.Entries {
		if !isDataPkl(e.Name) {
			continue
		}
		// Members that do not overlap hold at most size bytes together;
		// more means many central entries point into the same bytes, and
		// decoding each would cost (entries x pickle size).
		if e.DataOffset >= 0 {
			if spent += e.CompressedSize; spent > size {
				return nil, newError(ErrCorrupt, e.Name, -1, "pickle records overlap (more bytes to decode than the %d-byte file holds)", size)
			}
		}
		d := decoded{e: e}
		d.root, d.storages, d.err = decodeZipPickle(z, e, lim)
		if d.err != nil && isGlobalRefusal(d.err) {
			return nil, d.err
		}
		pkls = append(pkls, d)
	}
	for _, p := range z.problems {
		return nil, newError(p.kind, p.entry, -1, "%s", p.msg)
	}
	if len(pkls) == 0 {
		return nil, newError(ErrCorrupt, "", -1, "zip archive has no <prefix>/data.pkl record (not a torch checkpoint)")
	}
	if len(pkls) > 1 {
		return nil, newError(ErrCorrupt, pkls[1].e.Name, -1, "more than one data.pkl record")
	}
	if want := prefix + "/data.pkl"; pkls[0].e.Name != want {
		return nil, newError(ErrCorrupt, pkls[0].e.Name, -1, "pickle record is not spelled %q (torch would match it case-insensitively)", want)
	}
	for _, e := range z.Entries {
		// torch lists records through a 512-byte buffer (names cut at 511
		// bytes), and jit.load then finds them without case: compare what
		// either sees
		name := e.Name
		if len(name) > 511 {
			name = name[:511]
		}
		rest := asciiLower(strings.TrimPrefix(name, prefix+"/"))
		if rest == "constants.pkl" || strings.HasPrefix(rest, "code/") {
			return nil, newError(ErrUnsupported, e.Name, -1, "%s", torchScriptMsg)
		}
	}
	version, err := zipVersion(z, prefix)
	if err != nil {
		return nil, err
	}
	if e := z.lookup(prefix + "/byteorder"); e != nil {
		b, err := z.readSmall(e, 64)
		if err != nil {
			return nil, err
		}
		switch string(b) { // torch compares the bytes exactly (b'little' / b'big')
		case "little":
		case "big":
			return nil, newError(ErrUnsupported, e.Name, -1, "big-endian checkpoint (byteorder record says \"big\"); only little-endian data is supported")
		default:
			return nil, newError(ErrCorrupt, e.Name, -1, "byteorder record says %q", truncate(b))
		}
	}
	p := pkls[0]
	if p.err != nil {
		return nil, p.err
	}
	var d *deferredOpen
	if deferred {
		d = &deferredOpen{r: r, size: size, lim: lim}
	}
	stores := make(map[*storageRef]*Storage, len(p.storages))
	used := make(map[*zipEntry]bool, len(p.storages))
	for _, ref := range p.storages {
		s, e, err := zipStorage(z, prefix, ref, d)
		if err != nil {
			return nil, err
		}
		stores[ref], used[e] = s, true
	}
	for _, e := range z.Entries {
		if e.Deferred && !used[e] {
			// a record no storage reads would never be checked
			return nil, newError(ErrCorrupt, e.Name, -1, "record is not a storage of data.pkl")
		}
	}
	c := &Checkpoint{Format: FormatZip, Prefix: prefix, Version: version, pickleEntry: p.e.Name,
		zip: z, storages: sortStorages(stores), deferred: d}
	if err := c.build(p.root, stores, p.e.Name, lim.forPickle(p.e.Size)); err != nil {
		return nil, err
	}
	// a record is referenced when torch's reader would return it for a name
	// torch asks for: it looks names up without case (z.lookup), so
	// archive/DATA/0 is the storage of key 0
	known := map[*zipEntry]bool{p.e: true}
	names := []string{"version", ".data/version", "byteorder", ".data/serialization_id"}
	for _, ref := range p.storages {
		names = append(names, "data/"+ref.key)
	}
	for _, n := range names {
		if e := z.lookup(prefix + "/" + n); e != nil {
			known[e] = true
		}
	}
	for _, e := range z.Entries {
		if !known[e] && !strings.HasSuffix(e.Name, "/") {
			c.Unreferenced = append(c.Unreferenced, e.Name)
		}
	}
	return c, nil
}

// isDataPkl reports whether name is "<folder>/data.pkl" (one level deep),
// ignoring ASCII case as torch's zip reader does: every such record is
// decoded (so that a dangerous global in "archive/DATA.PKL" is named), but
// only the exact spelling is then accepted (see openZip).
func isDataPkl(name string) bool {
	i := strings.IndexByte(name, '/')
	return i > 0 && asciiLower(name[i+1:]) == "data.pkl"
}

// decodeZipPickle decodes one data.pkl strictly, checking trailing bytes and CRC.
func decodeZipPickle(z *zipArchive, e *zipEntry, lim *Limits) (any, map[string]*storageRef, error) {
	ra, off, n, ok := z.pickleReader(e, lim.MaxPickleBytes)
	if !ok {
		return nil, nil, newError(ErrCorrupt, e.Name, -1, "record cannot be read")
	}
	if n == 0 {
		return nil, nil, newError(ErrCorrupt, e.Name, -1, "data.pkl is empty")
	}
	if n > lim.MaxPickleBytes {
		return nil, nil, newError(ErrLimit, e.Name, -1, "data.pkl is %d bytes, over the %d-byte limit", n, lim.MaxPickleBytes)
	}
	src := pickle.NewStream(ra, off, n)
	if e.Method == 0 {
		src.HashCRC32()
	}
	m := newVM(src, lim, e.Name, pidZip, nil, nil)
	root, err := m.run()
	if err != nil {
		return nil, nil, err
	}
	if src.Remaining() != 0 {
		return nil, nil, newError(ErrCorrupt, e.Name, src.Pos(), "%d bytes after the pickle's STOP", src.Remaining())
	}
	if e.Method == 0 {
		crc, err := src.CRC32()
		if err != nil {
			return nil, nil, withEntry(err, e.Name)
		}
		if crc != e.CRC32 {
			return nil, nil, newError(ErrCorrupt, e.Name, -1, "CRC-32 mismatch (stored %08x, computed %08x)", e.CRC32, crc)
		}
	}
	return root, m.storages, nil
}

// zipVersion reads and checks the "version" record. torch reads
// ".data/version" when it exists and "version" otherwise; when both exist
// both are checked, so neither reader's choice can be out of range.
func zipVersion(z *zipArchive, prefix string) (string, error) {
	var version string
	found := false
	for _, name := range []string{prefix + "/version", prefix + "/.data/version"} {
		e := z.lookup(name)
		if e == nil {
			continue
		}
		b, err := z.readSmall(e, 64)
		if err != nil {
			return "", err
		}
		s := strings.TrimSpace(string(b))
		v, perr := strconv.Atoi(s)
		// torch 1.13 writes 3 and reads up to 10; later versions stay in that range
		if perr != nil || v < 1 || v > 10 {
			return "", newError(ErrCorrupt, e.Name, -1, "unsupported checkpoint format version %q (expected 1 to 10)", truncate(b))
		}
		if !found {
			version, found = s, true
		}
	}
	if !found {
		return "", newError(ErrCorrupt, "", -1, "no %s/version record", prefix)
	}
	return version, nil
}

// validKey reports whether a storage key is a plain record name.
func validKey(k string) bool {
	if k == "" || k == "." || k == ".." || len(k) > 255 {
		return false
	}
	return !strings.ContainsAny(k, "/\\\x00")
}

// zipStorage resolves a persistent id to <prefix>/data/<key>, and nothing
// else; with d, a record whose local header was deferred is checked on the
// storage's first read.
func zipStorage(z *zipArchive, prefix string, ref *storageRef, d *deferredOpen) (*Storage, *zipEntry, error) {
	if !validKey(ref.key) {
		return nil, nil, newError(ErrCorrupt, "", -1, "storage key %q is not a plain record name", ref.key)
	}
	name := prefix + "/data/" + ref.key
	e := z.lookup(name)
	if e == nil {
		return nil, nil, newError(ErrCorrupt, "", -1, "storage %q: record %s is missing", ref.key, name)
	}
	// torch writes exactly numel*itemsize bytes; a longer record hides bytes
	// no tensor can reach, a shorter one is read past its end by some torch
	// versions
	if e.Size != ref.nbytes {
		return nil, nil, newError(ErrCorrupt, name, -1, "storage %q is %d bytes but its persistent id says %d (%d x %s)", ref.key, e.Size, ref.nbytes, ref.numel, ref.typ.name)
	}
	s := &Storage{
		Key: ref.key, DType: ref.typ.dtype, ItemSize: ref.typ.itemSize, Numel: ref.numel, Location: ref.location,
		entry: name, recLen: e.Size, crc: e.CRC32, hasCRC: true, at: e.HeaderOffset,
	}
	if e.Deferred {
		deferStorage(s, &lazyRecord{open: d, z: z, e: e}, ref.nbytes)
		return s, e, nil
	}
	s.sec, s.r, s.recOff = io.NewSectionReader(z.r, e.DataOffset, ref.nbytes), z.r, e.DataOffset
	return s, e, nil
}
