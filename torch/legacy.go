package torch

import (
	"encoding/binary"
	"fmt"
	"github.com/gosafetensors/safetensors/torch/pickle"
	"io"
)

// openLegacy reads the rest of a legacy (non-zip) checkpoint whose first
// pickle was the magic number and ended at pos: protocol version, sys_info,
// the object, the storage key list, then for each key an int64 LE numel and
// numel*itemsize raw bytes. All five pickles go through the inert decoder
// (torch.load unpickles every one of them with the full unpickler) before any
// of them is interpreted.
//
// With deferred, the element counts are not read: each storage is where the
// sizes the persistent ids give put it (as they do in any file torch
// loads, for it refuses a count that differs), and its count is checked on
// its first read (see deferred.go).
func openLegacy(r io.ReaderAt, size int64, lim *Limits, pos int64, deferred bool) (*Checkpoint, error) {
	storages := make(map[string]*storageRef)
	ids := new(int)
	vals := make([]any, 5)
	var objLen int64 // length of the object pickle
	for i := 1; i < 5; i++ {
		entry := fmt.Sprintf("pickle %d", i+1)
		src := pickle.NewStream(r, 0, size)
		src.SetPos(pos)
		mode := pidNone
		if i == 3 {
			mode = pidLegacy
		}
		v, err := newVM(src, lim, entry, mode, storages, ids).run()
		if err != nil {
			return nil, err
		}
		vals[i] = v
		if i == 3 {
			objLen = src.Pos() - pos
		}
		pos = src.Pos()
	}
	if p, ok := vals[1].(int64); !ok || p != 1001 {
		return nil, newError(ErrUnsupported, "pickle 2", -1, "legacy protocol version %s (expected 1001)", describeNum(vals[1]))
	}
	// vals[2] is sys_info (protocol_version, little_endian, type_sizes):
	// torch.load ignores it, and reads storages in the machine's byte order
	// (little-endian everywhere torch runs today), so it is ignored here too.
	keyList, ok := vals[4].(*pickle.List)
	if !ok {
		return nil, newError(ErrCorrupt, "pickle 5", -1, "storage key list is a %s, not a list", typeName(vals[4]))
	}
	stores := make(map[*storageRef]*Storage, len(storages))
	var d *deferredOpen
	if deferred {
		d = &deferredOpen{r: r, size: size, lim: lim}
	} else {
		prefetchLegacyHeaders(r, size, pos, keyList, storages)
	}
	for _, kv := range keyList.Items {
		key, ok := kv.(string)
		if !ok {
			return nil, newError(ErrCorrupt, "pickle 5", -1, "storage key is a %s, not a str", typeName(kv))
		}
		ref := storages[key]
		if ref == nil {
			return nil, newError(ErrCorrupt, "pickle 5", -1, "storage key %q is not used by the object", key)
		}
		if stores[ref] != nil {
			return nil, newError(ErrCorrupt, "pickle 5", -1, "storage key %q listed twice", key)
		}
		if pos > size-8 {
			return nil, newError(ErrCorrupt, "", pos, "truncated: storage %q header is past the end of the %d-byte file", key, size)
		}
		if d != nil {
			if ref.nbytes > size-pos-8 {
				return nil, newError(ErrCorrupt, "", pos, "truncated: storage %q needs %d bytes at offset %d but the file is %d bytes", key, ref.nbytes, pos+8, size)
			}
			s := &Storage{Key: key, DType: ref.typ.dtype, ItemSize: ref.typ.itemSize, Numel: ref.numel, Location: ref.location,
				entry: "legacy storage " + key, at: pos}
			deferStorage(s, &lazyRecord{open: d, pos: pos}, ref.nbytes)
			stores[ref] = s
			pos += 8 + ref.nbytes
			continue
		}
		var hdr [8]byte
		if err := readFull(r, hdr[:], pos); err != nil {
			return nil, err
		}
		numel := int64(binary.LittleEndian.Uint64(hdr[:]))
		n, ok := mulCheck(numel, int64(ref.typ.itemSize))
		if numel < 0 || !ok {
			return nil, newError(ErrCorrupt, "", pos, "storage %q has an invalid element count %d", key, numel)
		}
		data := pos + 8
		if n > size-data {
			return nil, newError(ErrCorrupt, "", pos, "truncated: storage %q needs %d bytes at offset %d but the file is %d bytes", key, n, data, size)
		}
		// torch's _set_from_file refuses any difference ("storage has wrong
		// byte size"); accepting a longer record would convert a file
		// torch.load refuses
		if numel != ref.numel {
			return nil, newError(ErrCorrupt, "", pos, "storage %q holds %d elements but its persistent id says %d", key, numel, ref.numel)
		}
		stores[ref] = &Storage{
			Key: key, DType: ref.typ.dtype, ItemSize: ref.typ.itemSize, Numel: ref.numel, Location: ref.location,
			sec: io.NewSectionReader(r, data, ref.nbytes), entry: "legacy storage " + key, at: pos,
			r: r, recOff: data,
		}
		pos = data + n
	}
	for key, ref := range storages {
		if stores[ref] == nil {
			return nil, newError(ErrCorrupt, "pickle 5", -1, "storage %q is not in the storage key list (no data)", key)
		}
	}
	c := &Checkpoint{Format: FormatLegacy, end: pos, storages: sortStorages(stores), deferred: d}
	if err := c.build(vals[3], stores, "pickle 4", lim.forPickle(objLen)); err != nil {
		return nil, err
	}
	return c, nil
}
