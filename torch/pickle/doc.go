// Package pickle is an inert pickle machine: it decodes Python pickles of
// protocols 0 to 5 without importing, looking up or calling anything.
//
// The machine ([Machine]) steps the opcodes as CPython's C unpickler does
// (the one torch.load uses): every length is checked against the bytes
// that remain before anything is allocated; the memo, the stack, MARK
// nesting, string and integer sizes and the total work are capped
// ([Limits]); the protocol-0 text operands (INT, LONG, FLOAT, STRING,
// UNICODE, GET/PUT) are parsed exactly as _pickle.c parses them, so a
// literal CPython reads is never refused or read as another value; and
// where CPython's buffering makes it read on from a FRAME's end (a FRAME
// running past its STOP, an argument crossing a frame end) both readings
// are considered.
//
// What the machine does not decide is its [Policy], handed in from
// outside as CPython's Unpickler.find_class and persistent_load are: which
// globals resolve (GLOBAL, STACK_GLOBAL), what a persistent id means
// (BINPERSID), what REDUCE and BUILD build. Containers the pickle builds
// itself are plain data ([Tuple], [*List], [*Dict]); the constructs that
// instantiate or call without the policy (INST, OBJ, NEWOBJ, NEWOBJ_EX,
// EXT codes, APPEND or SETITEM onto anything but a list or dict) are
// refused.
//
// In audit mode (an [Auditor] in the [Config]) the machine never stops at
// a refusal: it reports it, pushes an [*Opaque] stand-in and goes on, so
// that an audit sees the whole pickle. Where decoding stops anyway (a
// limit, malformed bytes), the opcode walker ([Walks]) goes on, like
// pickletools.genops, from the machine's state ([Machine.FailState]) to
// the end of the region: it tracks only the strings a STACK_GLOBAL needs,
// with bounded memory, resynchronises after anything it cannot parse, and
// reports every name Python could import. Walks from FRAME ends are made
// once each, within a budget shared by one audit.
//
// Errors are *[Error] values matching [ErrCorrupt], [ErrLimit],
// [ErrNotAllowed] or [ErrUnsupported] with errors.Is; a Policy's own
// errors are returned unchanged.
package pickle
