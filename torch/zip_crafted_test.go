package torch

import "encoding/binary"

// zipCraftedFiles lists the crafted zips whose data.pkl record lies past
// the central directory, where torch's reader (miniz) still reads it.
func zipCraftedFiles() []craftedEntry {
	sys := []string{"posix.system"}
	evil := systemPickle()
	// build returns a zip of archive/version and archive/data/0, then a
	// central directory naming them and archive/data.pkl, whose local
	// header and data sit in the end record's comment ("eocd") or in the
	// comment of the last central entry ("central").
	build := func(where string) []byte {
		var buf []byte
		type ent struct {
			name string
			data []byte
			off  int
		}
		var ents []ent
		for _, e := range []ent{{name: "archive/version", data: []byte("3\n")}, {name: "archive/data/0", data: f32s(4)}} {
			e.off = len(buf)
			ents = append(ents, e)
			buf = append(append(buf, rawLocal(e.name, e.data)...), e.data...)
		}
		cdOff := len(buf)
		var cd []byte
		for _, e := range ents {
			cd = append(cd, rawCentral(e.name, e.data, e.off)...)
		}
		rec := cat(rawLocal("archive/data.pkl", evil), evil)
		pkl := rawCentral("archive/data.pkl", evil, 0)
		switch where {
		case "eocd":
			cd = append(cd, pkl...)
			binary.LittleEndian.PutUint32(cd[len(cd)-len(pkl)+42:], uint32(cdOff+len(cd)+lenEnd))
			return cat(buf, cd, rawEnd(3, len(cd), cdOff, len(rec)), rec)
		default: // "central": the record is the data.pkl entry's own comment
			binary.LittleEndian.PutUint16(pkl[32:], uint16(len(rec)))
			binary.LittleEndian.PutUint32(pkl[42:], uint32(cdOff+len(cd)+len(pkl)))
			cd = cat(cd, pkl, rec)
			return cat(buf, cd, rawEnd(3, len(cd), cdOff, 0))
		}
	}
	return []craftedEntry{
		{Name: "zip_data_pkl_in_end_comment.pt", Class: "container-polyglot",
			Attack:      "the central directory's archive/data.pkl points at a local header inside the end record's comment (miniz only checks that it lies inside the file): posix.system",
			ScanVerdict: "dangerous", Globals: sys, Entry: "archive/data.pkl", Offset: off(2), Convert: "refuse", ConvertErr: "not allowed", data: build("eocd")},
		{Name: "zip_data_pkl_in_central_comment.pt", Class: "container-polyglot",
			Attack:      "archive/data.pkl's local header and data are that central entry's own comment, inside the central directory: posix.system",
			ScanVerdict: "dangerous", Globals: sys, Entry: "archive/data.pkl", Offset: off(2), Convert: "refuse", ConvertErr: "not allowed", data: build("central")},
	}
}
