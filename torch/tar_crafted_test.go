package torch

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
	return []craftedEntry{
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
