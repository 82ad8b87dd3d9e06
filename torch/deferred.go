package torch

import (
	"cmp"
	"encoding/binary"
	"io"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/gosafetensors/safetensors/internal/rangeread"
	"github.com/gosafetensors/safetensors/torch/pickle"
	"github.com/gosafetensors/safetensors/torch/ziplist"
)

// Open and NewReader defer the checks of each storage record's container
// (a zip record's local header, data descriptor and the bytes around it;
// a legacy storage's element count) to the first read of that storage.
// Nothing there decides what torch.load imports: torch unpickles data.pkl
// (or the legacy pickles) and reads storages as raw bytes, so a storage
// record can only make torch.load fail or give a tensor other bytes
// (docs/security/scan.md, TestStorageRecordsOracle). Opening a remote
// checkpoint then costs a few requests whatever its tensor count, where
// checking every record costs one request each on a server that answers
// only single ranges.
//
// The deferred checks are Scan's own, so that a checkpoint all of whose
// storages pass them is one Scan calls clean: opening (fastOpen) checks
// everything else as Scan does, taking each deferred record to be laid out
// as torch lays it out (the record fills the file up to the next one); the
// first read of a storage checks that its record is. A storage that fails
// is refused with the error the full analysis gives, the one Open gave
// before anything was deferred (Scan's refusal), and if that analysis
// finds the file clean after all, the storage is read where it found it.

// deferredOpen is what a checkpoint opened with deferred checks needs to
// analyse itself in full.
type deferredOpen struct {
	r    io.ReaderAt
	size int64
	lim  *Limits
	name string // set by newReader

	mu   sync.Mutex
	done bool
	c    *Checkpoint // the checkpoint as the full analysis opened it, if clean
	err  error       // the full analysis's refusal, if not
}

// full analyses the file as Scan does (once; a failure to read is returned
// and not remembered) and returns the checkpoint it opens, or its
// refusal.
func (d *deferredOpen) full() (c *Checkpoint, refusal, readErr error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.done {
		return d.c, d.err, nil
	}
	rr := &readRecorder{r: d.r, size: d.size}
	rep, c, err := analyze(rr, d.size, d.name, d.lim)
	if err == nil {
		err = rr.failure(d.name)
	}
	if err != nil {
		return nil, nil, err
	}
	d.done = true
	if c == nil || rep.Verdict() != VerdictClean {
		d.err = withPath(rep.refusal(), d.name)
		return nil, d.err, nil
	}
	d.c = c
	return c, nil, nil
}

// lazyRecord is a storage whose record has not been checked yet: a zip
// entry (z, e) or a legacy storage whose element count is at pos.
type lazyRecord struct {
	open *deferredOpen
	z    *zipArchive
	e    *zipEntry
	pos  int64

	mu   sync.Mutex
	head atomic.Pointer[recordState] // the record's header checked
	full atomic.Pointer[recordState] // and its end
}

// recordState is a checked record: where its bytes are, or why it is
// refused.
type recordState struct {
	r   io.ReaderAt
	off int64
	err error
}

// Check runs the checks of the storage's record that opening deferred to
// its first read (Tensor.WriteTo, View, Verify and Section run it): for a
// zip record, its local header, that its data does not start a pickle
// naming globals, and that the record with its data descriptor fills the
// file up to the next record; for a legacy storage, its element count.
// These are the checks Scan makes of every record. A failure is the error
// Open would have given had it checked the record at once (the full
// analysis's refusal); a failure to read is returned as such, and the next
// call tries again.
func (s *Storage) Check() error {
	_, err := s.checked(true)
	return err
}

// checked runs the record's deferred checks, all of them with full, else
// those of its header (what tells where its bytes are): a reader of the
// whole storage checks its end after the data, which it then reads in
// stream order.
func (s *Storage) checked(full bool) (*recordState, error) {
	l := s.lazy
	if l == nil {
		return nil, nil
	}
	if st := l.load(full); st != nil {
		return st, copyErr(st.err)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if st := l.load(full); st != nil {
		return st, copyErr(st.err)
	}
	d := l.open
	head := l.head.Load()
	if head == nil {
		if l.e != nil {
			l.z.Prefetch([]*zipEntry{l.e}, full)
		}
		ok, off, err := l.checkHead(s)
		if err != nil {
			return nil, err
		}
		if head = (&recordState{r: d.r, off: off}); !ok {
			if head, err = l.refused(s); err != nil {
				return nil, err
			}
			l.full.Store(head)
		}
		l.head.Store(head)
	}
	if !full || head.err != nil || l.full.Load() != nil {
		return l.load(full), copyErr(l.load(full).err)
	}
	st := head
	if l.e != nil {
		probs, err := l.z.CheckEnd(l.e)
		if err != nil {
			return nil, s.readFailed(err, l.e.HeaderOffset)
		}
		if len(probs) > 0 {
			if st, err = l.refused(s); err != nil {
				return nil, err
			}
		}
	}
	l.full.Store(st)
	return st, copyErr(st.err)
}

// load returns the record's state, checked fully or at least its header.
func (l *lazyRecord) load(full bool) *recordState {
	if full {
		return l.full.Load()
	}
	return l.head.Load()
}

// copyErr returns a copy of a remembered *Error, which callers may stamp.
func copyErr(err error) error {
	if e, ok := err.(*Error); ok {
		c := *e
		return &c
	}
	return err
}

// checkHead checks the record's header: it reports whether it passes and
// where the storage's bytes are; an error is a failure to read.
func (l *lazyRecord) checkHead(s *Storage) (bool, int64, error) {
	d := l.open
	rr := &readRecorder{r: d.r, size: d.size}
	if l.e != nil {
		data, probs, err := l.z.Resolve(l.e)
		if err != nil {
			return false, 0, s.readFailed(err, l.e.HeaderOffset)
		}
		if data < 0 || len(probs) > 0 {
			return false, 0, nil
		}
		rep := &ScanReport{walks: pickle.NewWalks(walkBudget(d.size)), userAllow: d.lim.userAllow, zipLoader: true}
		found := hiddenPickle(rr, data, l.e.Size, l.e.Name, d.lim, rep)
		if err := rr.err.Load(); err != nil {
			return false, 0, s.readFailed(*err, data)
		}
		return !found, data, nil
	}
	var hdr [8]byte
	err := readFull(rr, hdr[:], l.pos)
	if p := rr.err.Load(); p != nil {
		return false, 0, s.readFailed(*p, l.pos)
	}
	// torch's _set_from_file refuses any other count
	return err == nil && int64(binary.LittleEndian.Uint64(hdr[:])) == s.Numel, l.pos + 8, nil
}

// refused is the state of a record that failed a check: the full
// analysis's refusal, or if it finds the file clean after all, the
// storage where it found it (never where this record's own check could
// not confirm it); an error is a failure to read.
func (l *lazyRecord) refused(s *Storage) (*recordState, error) {
	d := l.open
	c, refusal, err := d.full()
	if err != nil {
		return nil, err
	}
	if refusal != nil {
		return &recordState{err: refusal}, nil
	}
	for _, t := range c.storages {
		if t.Key == s.Key {
			return &recordState{r: t.r, off: t.recOff}, nil
		}
	}
	return &recordState{err: &Error{Path: d.name, Entry: s.entry, Offset: -1, Kind: ErrCorrupt,
		Msg: "internal error: the storage's record failed its check, and the full analysis does not list it"}}, nil
}

// readFailed wraps a failure to read the storage's record.
func (s *Storage) readFailed(err error, off int64) error {
	return &Error{Path: s.path, Entry: s.entry, Offset: off, Kind: ErrCorrupt, Msg: "read failed", Err: err}
}

// lazyReader is the bytes of a storage whose record is checked on first
// read: [0, n) of the record's data. Reads need the header checked, or
// with full the whole record.
type lazyReader struct {
	s    *Storage
	n    int64
	full bool
}

func (lr *lazyReader) ReadAt(p []byte, off int64) (int, error) {
	st, err := lr.s.checked(lr.full)
	if err != nil {
		return 0, err
	}
	if off < 0 || off >= lr.n {
		if len(p) == 0 && off >= 0 {
			return 0, nil
		}
		return 0, io.EOF
	}
	var eof error
	if int64(len(p)) > lr.n-off {
		p, eof = p[:lr.n-off], io.EOF
	}
	n, err := st.r.ReadAt(p, st.off+off)
	if err == nil {
		err = eof
	}
	return n, err
}

// deferStorage makes s a storage whose record is checked on first read.
func deferStorage(s *Storage, l *lazyRecord, nbytes int64) {
	s.lazy = l
	lr := &lazyReader{s: s, n: nbytes}
	s.sec = io.NewSectionReader(lr, 0, nbytes)
	s.r, s.recOff = lr, 0
}

// checkHead runs the checks of the storage's record header deferred to its
// first read (see Check).
func (s *Storage) checkHead() error {
	_, err := s.checked(false)
	return err
}

// public returns the storage's bytes for callers outside the package
// (Section): their first read runs every deferred check.
func (s *Storage) public() io.ReaderAt {
	if s.lazy == nil {
		return s.sec
	}
	return &lazyReader{s: s, n: s.sec.Size(), full: true}
}

// storageName reports whether a zip record name is where a storage may
// live, <folder>/data/<key> (without case, as miniz finds records), and
// is not a pickle record: the records whose local headers opening defers.
func storageName(name string) bool {
	i := strings.IndexByte(name, '/')
	if i <= 0 {
		return false
	}
	key, ok := strings.CutPrefix(asciiLower(name[i+1:]), "data/")
	return ok && validKey(key) && !strings.HasSuffix(key, ".pkl")
}

// Check runs the deferred checks of every storage's record (see
// [Storage.Check]), in file order, and returns the first failure: after
// it, the checkpoint has passed every check Scan makes, and Scan calls the
// file clean. A remote reader ([rangeread.Prefetcher]) fetches what the
// checks read first, together: a few requests on a server that answers
// multi-range requests, one or two a record on one that does not.
// Conversion runs it before the output is committed.
func (c *Checkpoint) Check() error {
	var es []*zipEntry
	var offs, lens []int64
	var z *ziplist.Reader
	for _, s := range c.storages {
		if s.lazy == nil || s.lazy.full.Load() != nil {
			continue
		}
		if s.lazy.e != nil {
			es, z = append(es, s.lazy.e), s.lazy.z.Reader
		} else {
			offs, lens = append(offs, s.lazy.pos), append(lens, 8)
		}
	}
	if z != nil {
		z.Prefetch(es, true)
	}
	if len(offs) > 0 {
		rangeread.Prefetch(c.storages[0].lazy.open.r, offs, lens)
	}
	for _, s := range c.storages {
		if err := s.Check(); err != nil {
			return err
		}
	}
	return nil
}

// sortStorages returns the storages of stores in file order.
func sortStorages(stores map[*storageRef]*Storage) []*Storage {
	out := make([]*Storage, 0, len(stores))
	for _, s := range stores {
		out = append(out, s)
	}
	slices.SortFunc(out, func(a, b *Storage) int { return cmp.Compare(a.at, b.at) })
	return out
}
