package torch

// redteamCrafted lists the red-team reviews' attack files, rebuilt by
// docs/security/redteam/make_fixtures.py from each review's own script
// (CPython's pickle, zipfile and tarfile) and committed: every regression
// the reviews found stays a fixture, checked without python3. The story
// of each round is docs/security/redteam.md.
func redteamCrafted() []craftedEntry {
	sys := []string{"posix.system"}
	by := func(script string) string {
		return "python3 docs/security/redteam/make_fixtures.py (" + script + ".py)"
	}
	dangerous := func(name, class, script, entry, attack string) craftedEntry {
		return craftedEntry{Name: name, Class: class, MadeBy: by(script), Attack: attack,
			ScanVerdict: "dangerous", Globals: sys, Entry: entry, Convert: "refuse", ConvertErr: "not allowed"}
	}
	notClean := func(name, class, script, verdict, convertErr, attack string) craftedEntry {
		return craftedEntry{Name: name, Class: class, MadeBy: by(script), Attack: attack,
			ScanVerdict: verdict, Convert: "refuse", ConvertErr: convertErr}
	}
	withLink := func(e craftedEntry) craftedEntry {
		e.Globals = append(e.Globals, "<tar-link>./proc/self/fd/3")
		return e
	}
	return []craftedEntry{
		dangerous("redteam_round2_l1_legacy_frame_straddle.pt", "parser", "round2/l1_legacy_frame_straddle", "pickle 1 (from a frame end)",
			"round 2: an opcode argument crosses a FRAME end in a legacy stream with a frame of 128 KiB or more (CPython reads it with read(), from the frame end)"),
		dangerous("redteam_round2_t1_tar_sparse.tar", "container-polyglot", "round2/t1_tar_sparse", "tar member pickle",
			"round 2: a GNU sparse member with extension blocks shifts every later header by 512 bytes in tarfile; a lister ignoring them misses member pickle"),
		dangerous("redteam_round2_z1_eocd_comment.pt", "container-polyglot", "round2/z1_eocd_comment", "archive/data.pkl",
			"round 2: the zip's data.pkl local header inside the end record's comment (miniz only checks offset + 30 + size <= archive size)"),
		dangerous("redteam_round2_z2_frame_straddle.pt", "parser", "round2/z2_frame_straddle", "archive/data.pkl (from a frame end)",
			"round 2: an opcode argument crossing a FRAME end in a zip data.pkl: CPython discards the rest of the frame and reads the argument from its end"),
		dangerous("redteam_round3_t1_tensors_one_pickle.tar", "container-polyglot", "round3/t1_tensors_one_pickle", "tar member tensors",
			"round 3: member tensors holds one pickle per tensor; reading two lost our place and a BINBYTES hid the payload"),
		dangerous("redteam_round3_t2_symlink_pickle.tar", "container-polyglot", "round3/t2_symlink_pickle", "tar member pickle (link to payload)",
			"round 3: member pickle is a symbolic link to ./payload, which extractfile follows"),
		dangerous("redteam_round3_t3_hardlink_normpath.tar", "container-polyglot", "round3/t3_hardlink_normpath", "tar member pickle (link to payload)",
			"round 3: member pickle is a hard link to ./payload, found by os.path.normpath"),
		dangerous("redteam_round3_t4_pax_path_slash.tar", "container-polyglot", "round3/t4_pax_path_slash", "tar member pickle",
			"round 3: a pax record path=pickle/ (tarfile strips the slash)"),
		dangerous("redteam_round3_t5_longname_then_pax.tar", "container-polyglot", "round3/t5_longname_then_pax", "tar member pickle",
			"round 3: a GNU long name then a pax path: the long name wins"),
		dangerous("redteam_round4_a1_sparse_overwrite.tar", "container-polyglot", "round4/a1_sparse_overwrite", "tar member storages (sparse, as extracted)",
			"round 4: an old-GNU sparse storages whose second run overwrites the first when tar.extract writes it"),
		withLink(dangerous("redteam_round4_a2_selffd_symlink.tar", "container-polyglot", "round4/a2_selffd_symlink", "tar checkpoint read from byte 0 as member storages (through a link out of the archive)",
			"round 4: member storages is a symbolic link to /proc/self/fd/3: torch re-reads the checkpoint itself as the storages stream")),
		notClean("redteam_round4_b1_budget_bufio.pt", "caps", "round4/b1_budget_bufio", "invalid", "unsupported",
			"round 4: a payload just past the inflate budget, which the walker's read-ahead hid (neither named nor reported); now the budget is reported"),
		dangerous("redteam_round4_b2_overlap_walk.pt", "container-polyglot", "round4/b2_overlap_walk", "archive/data.pkl",
			"round 4: STORED members nested in each other's BINBYTES: the whole-file walk that replaced decoding missed data.pkl"),
		dangerous("redteam_round5_p1_pax_sparse01.tar", "container-polyglot", "round5/p1_pax_sparse01", "tar member storages (sparse, as extracted)",
			"round 5: a pax GNU sparse 0.1 storages whose runs extraction reorders"),
		dangerous("redteam_round5_p2_neg_pax.tar", "container-polyglot", "round5/p2_neg_pax", "tar member storages",
			"round 5: a pax header whose base-256 size is -1, with a walker gadget in header bytes 500-511"),
		dangerous("redteam_round5_p3_clean_polyglot.tar", "container-polyglot", "round5/p3_clean_polyglot", "tar member storages",
			"round 5: a pax header of size -1 at byte 0: old tarfile reads no records and goes on to storages; read from byte 0 the file is also a valid legacy checkpoint (was clean, and converted)"),
		dangerous("redteam_round6_u1_unicode_pax_size.tar", "container-polyglot", "round6/u1_unicode_pax_size", "tar member storages",
			"round 6: a pax size in fullwidth digits (Python's int(str) reads Unicode digits and spaces)"),
		dangerous("redteam_round6_u2_unicode_sparse_realsize.tar", "container-polyglot", "round6/u2_unicode_sparse_realsize", "tar member storages",
			"round 6: the same in GNU.sparse.realsize"),
		dangerous("redteam_round6_u3_sparse00_regex.tar", "container-polyglot", "round6/u3_sparse00_regex", "tar member storages (sparse, as extracted)",
			"round 6: older releases build the pax sparse 0.0 map with a regex over the raw pax data (GNUxsparsexoffset matches)"),
		dangerous("redteam_round7_z1_shared_header_usize.pt", "container-polyglot", "round7/z1_shared_header_usize", "archive/data.pkl",
			"round 7: a.pkl and data.pkl share data and csize but not usize (miniz reads usize bytes of a STORED entry)"),
		dangerous("redteam_round7_z2_fallback_csize.pt", "container-polyglot", "round7/z2_fallback_csize", "archive/data.pkl",
			"round 7: spare bytes after the central directory send the scan to its fallback, which read csize, not usize, bytes"),
		dangerous("redteam_round7_z3_eocd_window.pt", "container-polyglot", "round7/z3_eocd_window", "archive/data.pkl",
			"round 7: 66,000 bytes after the end record: miniz searches about 69.6 KB back"),
		notClean("redteam_round8_d1_dir_attr.pt", "container-polyglot", "round8/d1_dir_attr", "invalid", "corrupt",
			"round 8: data.pkl with the DOS directory attribute: miniz returns its buffer unread (was clean, converted)"),
		notClean("redteam_round8_x1_zip64_ext_sector.pt", "container-polyglot", "round8/x1_zip64_ext_sector", "invalid", "corrupt",
			"round 8: a second archive in the zip64 end record's extensible data sector"),
		notClean("redteam_round8_n1_nul_constants.pt", "container-polyglot", "round8/n1_nul_constants", "invalid", "corrupt",
			"round 8: archive/constants.pkl followed by a NUL: torch cuts names there and switches to torch.jit.load"),
		notClean("redteam_round9_bo_case.pt", "container-polyglot", "round9/bo_case", "invalid", "unsupported",
			"round 9: archive/BYTEORDER = big: miniz finds it without case (was converted unswapped)"),
		notClean("redteam_round10_trunc_constants.pt", "container-polyglot", "round10/trunc_constants", "invalid", "unsupported",
			"round 10: PREFIX/constants.pklX with a 497-byte prefix: torch lists records through a 512-byte buffer and sees constants.pkl (TorchScript)"),
	}
}
