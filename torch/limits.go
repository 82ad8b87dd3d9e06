package torch

import "fmt"

// Limits bounds the work and memory spent on one checkpoint; pass it with
// [WithLimits]. Every field must be at least 1: start from [DefaultLimits]
// and change what you need.
type Limits struct {
	MaxPickleBytes int64 // bytes in one pickle stream (data.pkl or one legacy pickle)
	MaxStringBytes int64 // one string or bytes value
	MaxLongBytes   int   // LONG1/LONG4/text LONG magnitude, in bytes
	MaxMemo        int   // memo entries
	MaxStack       int   // values on the stack
	MaxMarks       int   // nested MARKs
	MaxObjects     int64 // values created plus items moved by one pickle
	MaxDepth       int   // container nesting depth of the decoded object
	MaxEntries     int   // flattened leaves (tensors and other values); also at most max(pickle bytes, 65536)
	MaxNameBytes   int64 // total bytes of all entry names (one name is capped at 64 KiB); also at most max(64 x pickle bytes, 1 MiB)
	MaxDims        int   // tensor rank
	MaxTensorBytes int64 // contiguous size of one tensor; stride-0 (expanded) views can exceed their storage
	MaxZipEntries  int   // members in a zip archive
	MaxViewBuffer  int64 // bytes Tensor.WriteTo may buffer to materialise a strided view
	// MaxInflateBytes bounds the bytes of compressed pickle records that
	// one scan inflates, over all records: what it decodes in memory (at
	// most inflateRatio bytes per stored byte of a record) and what it
	// streams through with a bounded window looking for globals. The scan
	// also stops at inflateRatio times the file's size (at least
	// minInflateBudget), so a small bomb cannot keep it busy for minutes.
	// A record inflating further is reported, so the verdict is never
	// clean; torch never writes compressed records.
	MaxInflateBytes int64

	// inflateLeft, set for one scan by analyze, is what is left of the
	// scan's inflate budget (nil: MaxInflateBytes per record).
	inflateLeft *int64
	// userAllow holds the globals WithAllow allowed (nil: none).
	userAllow map[string]bool
	// expandViews is what WithExpandedViews allowed (0: none).
	expandViews int64
}

// inflateRatio bounds the bytes inflated from a compressed pickle record
// per stored byte: into memory for one record, and for the whole scan per
// byte of the file. DEFLATE reaches about 1000:1; pickles compress a few
// times at most.
const inflateRatio = 16

// minInflateBudget is the least a scan may inflate, whatever the file size.
const minInflateBudget = 256 << 20

// withInflateBudget returns a copy of l whose inflate budget is shared by
// every record of one scan of a size-byte file.
func (l *Limits) withInflateBudget(size int64) *Limits {
	c := *l
	left := min(c.MaxInflateBytes, max(minInflateBudget, inflateRatio*max(size, 0)))
	c.inflateLeft = &left
	return &c
}

// inflateBudget returns the bytes a record may still inflate.
func (l *Limits) inflateBudget() int64 {
	if l.inflateLeft == nil {
		return l.MaxInflateBytes
	}
	return max(*l.inflateLeft, 0)
}

// spendInflate records n bytes inflated.
func (l *Limits) spendInflate(n int64) {
	if l.inflateLeft != nil {
		*l.inflateLeft -= n
	}
}

// DefaultLimits returns the limits Open, NewReader and Scan use without
// [WithLimits]. They are far above anything torch writes for a state dict
// (a 100,000-tensor checkpoint uses a few percent of them) and far below
// what would exhaust a machine.
func DefaultLimits() Limits {
	return Limits{
		MaxPickleBytes:  1 << 30,
		MaxStringBytes:  256 << 20,
		MaxLongBytes:    1024,
		MaxMemo:         1 << 24,
		MaxStack:        1 << 20,
		MaxMarks:        1 << 16,
		MaxObjects:      1 << 27,
		MaxDepth:        1000,
		MaxEntries:      1 << 23,
		MaxNameBytes:    256 << 20,
		MaxDims:         64,
		MaxTensorBytes:  1 << 40,
		MaxZipEntries:   1 << 22,
		MaxViewBuffer:   512 << 20,
		MaxInflateBytes: 64 << 30,
	}
}

// validate checks that every field is at least 1; a cap of 0 or less
// would refuse every checkpoint, or mean nothing.
func (l Limits) validate() error {
	for _, f := range []struct {
		name string
		v    int64
	}{
		{"MaxPickleBytes", l.MaxPickleBytes},
		{"MaxStringBytes", l.MaxStringBytes},
		{"MaxLongBytes", int64(l.MaxLongBytes)},
		{"MaxMemo", int64(l.MaxMemo)},
		{"MaxStack", int64(l.MaxStack)},
		{"MaxMarks", int64(l.MaxMarks)},
		{"MaxObjects", l.MaxObjects},
		{"MaxDepth", int64(l.MaxDepth)},
		{"MaxEntries", int64(l.MaxEntries)},
		{"MaxNameBytes", l.MaxNameBytes},
		{"MaxDims", int64(l.MaxDims)},
		{"MaxTensorBytes", l.MaxTensorBytes},
		{"MaxZipEntries", int64(l.MaxZipEntries)},
		{"MaxViewBuffer", l.MaxViewBuffer},
		{"MaxInflateBytes", l.MaxInflateBytes},
	} {
		if f.v < 1 {
			return fmt.Errorf("%w: WithLimits: %s is %d, want at least 1 (start from DefaultLimits())", ErrOption, f.name, f.v)
		}
	}
	return nil
}

// forPickle returns the limits for flattening the object decoded from a
// pickle of n bytes: MaxEntries and MaxNameBytes are further capped in
// proportion to n. Memo references let a few kilobytes of pickle describe
// millions of leaves (a list of 3000 references to a list of 3000 references
// to one tensor: 9 million entries, 3 GiB of Entry and Tensor values from a
// 12 KB file) or gigabytes of names (one 64 KiB key under thousands of
// references). A real checkpoint spends at least a byte of pickle per leaf
// and far fewer than 64 bytes of name per byte of pickle.
func (l Limits) forPickle(n int64) *Limits {
	if e := max(n, 1<<16); e < int64(l.MaxEntries) {
		l.MaxEntries = int(e)
	}
	if nb := max(64*n, 1<<20); nb < l.MaxNameBytes {
		l.MaxNameBytes = nb
	}
	return &l
}
