// Package ziplist lists zip archives the way miniz does, as PyTorch's
// PyTorchStreamReader (torch.load's zip reader) uses it, and reports what
// other zip readers would read differently.
//
// torch.load reads a checkpoint that starts with a local file header
// through miniz. Where zip readers disagree (which end record counts,
// which of two names, which ZIP64 field), the answer that matters for a
// scanner is miniz's: the bytes torch unpickles. This package gives it:
//   - the end record is the last signature in the last 64 KiB (which must
//     end the file exactly: a fake record in the comment cannot redirect
//     the reader); a ZIP64 locator and record, which must agree with it;
//   - the central directory it names, entry by entry, with the first ZIP64
//     extra field of an entry (two are refused: miniz takes the first,
//     other readers the last);
//   - every local header, read to cross-check name, flags, method and
//     sizes (miniz reads a STORED entry's uncompressed size of bytes from
//     its local header's data, wherever that lies in the file);
//   - names looked up as mz_zip_reader_locate_file does, ASCII letters
//     without case ([Reader.Lookup], [FoldName]).
//
// What miniz reads but a checkpoint torch writes never holds is listed in
// [Reader.Problems] rather than refused: entries marked as directories
// (miniz returns them unread), names with a NUL (miniz cuts them there),
// duplicate or case-folded names, encrypted or compressed entries,
// overlapping entries, entries outside the area before the directory.
// [Reader.Gaps] lists the bytes no record explains. When the directory is
// unusable, [CandidateDirectories], [ParseDirectory], [ReadLocalHeader]
// and [NextLocalHeader] let a scanner look at what any reader could take.
//
// Errors are *[Error] values matching [ErrFormat], [ErrUnsupported] or
// [ErrLimit] with errors.Is.
package ziplist
