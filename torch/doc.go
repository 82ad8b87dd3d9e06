// Package torch reads PyTorch checkpoints (torch.save output, zip and legacy
// formats) without ever executing pickle code.
//
// The pickle stream is decoded by a small, inert stack machine: GLOBAL and
// STACK_GLOBAL push names that are checked against a short allowlist the
// moment they are read, REDUCE and BUILD only build records for a handful of
// allowlisted torch and collections callables, and persistent ids are only
// accepted in the ('storage', ...) form torch writes. Nothing is imported,
// looked up or called. Every length read from the file is checked against the
// bytes that remain before anything is allocated, and the decoder caps memo
// size, stack depth, mark nesting and the number of objects (see [Limits]).
//
// Storage bytes are never read into memory when a checkpoint is opened: each
// storage is an [io.SectionReader] over the underlying [io.ReaderAt], and
// [Tensor.WriteTo] streams a tensor's elements in C-contiguous little-endian
// order, materialising strided views with a bounded buffer.
//
// [Scan] is the audit counterpart of [Open]: it decodes every pickle in a file
// without stopping at the first problem and reports every global, every
// opcode that could run code and every container irregularity it finds.
// Its verdict ([ScanReport.Verdict]) over-approximates what
// torch.load(weights_only=False) would import: every interpretation torch
// may take is scanned (zip; else a tar as Python's tarfile accepts it, and
// the legacy stream torch falls back to), the text opcodes are parsed as
// CPython's C unpickler parses them, and wherever full decoding stops (a
// cap, a refusal, an unknown construct) an opcode walker continues to the
// end of the region so that no global goes unnamed. Unexplained bytes
// (after the last legacy storage, between zip records, after a pickle) are
// problems and are walked too. [Open] and [NewReader] run the same scan and
// accept a file only when its verdict is "clean": scan and convert cannot
// disagree.
//
// All errors returned by this package are *[Error] values that match one of
// the sentinels [ErrNotAllowed], [ErrUnsupported], [ErrCorrupt] or [ErrLimit]
// with [errors.Is].
package torch

// The crafted attack files of testdata/crafted (Go-made, py_* and the
// red-team reviews' redteam_*) are rebuilt by TestCrafted -update.
//go:generate go test -run ^TestCrafted$ -update .
