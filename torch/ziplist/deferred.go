package ziplist

import (
	"fmt"
	"io"
	"sync"

	"github.com/gosafetensors/safetensors/internal/rangeread"
)

// resolution is what Resolve and CheckEnd found for one deferred entry.
type resolution struct {
	mu       sync.Mutex
	header   bool // Resolve's answer is in data and problems
	data     int64
	problems []Problem
	end      bool // CheckEnd's answer is in endProblems
	endProbs []Problem
}

// state returns the (locked) resolution of e.
func (z *Reader) state(e *Entry) *resolution {
	z.mu.Lock()
	if z.resolved == nil {
		z.resolved = make(map[*Entry]*resolution)
	}
	res := z.resolved[e]
	if res == nil {
		res = &resolution{}
		z.resolved[e] = res
	}
	z.mu.Unlock()
	res.mu.Lock()
	return res
}

// problems returns a problem recorder and what it records.
func problems() (*[]Problem, func(kind error, entry, format string, args ...any)) {
	var probs []Problem
	return &probs, func(kind error, entry, format string, args ...any) {
		probs = append(probs, Problem{Kind: kind, Entry: entry, Msg: fmt.Sprintf(format, args...)})
	}
}

// Resolve reads the local header of an entry [NewReaderDeferring]
// deferred and checks it as NewReader checks every other one. It returns
// the offset of the entry's data (-1 if its local header is unusable) and
// the problems found, which NewReader would have listed in Problems; for
// an entry that was not deferred, its DataOffset and nothing. The error
// is a failure to read, not a problem of the archive (and is not
// remembered: a later call reads again). Resolve is safe for concurrent
// use; its answer is remembered. See also [Reader.CheckEnd].
func (z *Reader) Resolve(e *Entry) (int64, []Problem, error) {
	if !e.Deferred {
		return e.DataOffset, nil, nil
	}
	res := z.state(e)
	defer res.mu.Unlock()
	if err := z.resolve(e, res); err != nil {
		return -1, nil, err
	}
	return res.data, res.problems, nil
}

func (z *Reader) resolve(e *Entry, res *resolution) error {
	if res.header {
		return nil
	}
	rr := &readRecorder{r: z.r, size: z.size}
	probs, problem := problems()
	data := z.checkLocal(rr, e, problem)
	if rr.err != nil {
		return rr.err
	}
	res.header, res.data, res.problems = true, data, *probs
	return nil
}

// CheckEnd checks that a deferred entry, with its data descriptor if it
// has one, ends exactly where the next record (or the central directory)
// starts, as [Reader.Gaps] took it to: a shorter entry leaves unexplained
// bytes (a gap), a longer one overlaps what follows. It reads the local
// header first if Resolve has not, and returns the problems found (none
// when the local header is unusable: Resolve reports it); for an entry
// that was not deferred, nothing. Errors and concurrency are as for
// Resolve. A reader of the entry's data checks its end after the data:
// the descriptor follows it.
func (z *Reader) CheckEnd(e *Entry) ([]Problem, error) {
	if !e.Deferred {
		return nil, nil
	}
	res := z.state(e)
	defer res.mu.Unlock()
	if res.end {
		return res.endProbs, nil
	}
	if err := z.resolve(e, res); err != nil {
		return nil, err
	}
	rr := &readRecorder{r: z.r, size: z.size}
	probs, problem := problems()
	if res.data >= 0 {
		end, next := res.data+e.CompressedSize, z.nextStart(e)
		if e.Flags&0x8 != 0 {
			end += z.descriptorLenAt(rr, end, e)
		}
		switch {
		case end < next:
			problem(ErrFormat, e.Name, "%d unexplained bytes at offset %d between zip records", next-end, end)
		case end > next:
			problem(ErrFormat, e.Name, "entry (data and descriptor up to offset %d) overlaps the record at offset %d", end, next)
		}
	}
	if rr.err != nil {
		return nil, rr.err
	}
	res.end, res.endProbs = true, *probs
	return res.endProbs, nil
}

// Prefetch announces to a remote reader ([rangeread.Prefetcher]) what
// Resolve reads for the deferred entries es, and with ends what CheckEnd
// reads too: each local header with its name, its extra field and the
// first bytes of its data, and its data descriptor, where the entry fills
// the file up to the next record as it should. Checking many entries then
// costs a few requests (on a server that answers multi-range requests)
// rather than one or two each.
func (z *Reader) Prefetch(es []*Entry, ends bool) {
	var offs, lens []int64
	for _, e := range es {
		if !e.Deferred {
			continue
		}
		next := z.nextStart(e)
		// header, name, extra field (what is left before the data and its
		// descriptor), and 2 bytes of the data (a scanner looks for a
		// pickle there); the extra field of a torch record is short
		hdrEnd := min(max(next-e.CompressedSize+2, e.HeaderOffset+lenLocal+int64(len(e.Name))), e.HeaderOffset+lenLocal+int64(len(e.Name))+4096, z.size)
		offs, lens = append(offs, e.HeaderOffset), append(lens, hdrEnd-e.HeaderOffset)
		if ends && e.Flags&0x8 != 0 {
			// the descriptor ends at next: 12 to 24 bytes before it, read
			// as descriptorLen reads it (24 bytes from where it starts)
			a := max(next-24, e.HeaderOffset)
			offs, lens = append(offs, a), append(lens, min(next+24, z.size)-a)
		}
	}
	rangeread.Prefetch(z.r, offs, lens)
}

// readRecorder remembers the first read that failed: an error, or an end
// before the file's size. Resolve returns it rather than a problem of the
// archive, for a failure to read is not a finding about the bytes.
type readRecorder struct {
	r    io.ReaderAt
	size int64
	err  error
}

func (rr *readRecorder) ReadAt(p []byte, off int64) (int, error) {
	n, err := rr.r.ReadAt(p, off)
	if err != nil && !(err == io.EOF && off+int64(n) >= rr.size) && rr.err == nil {
		rr.err = err
		if err == io.EOF {
			rr.err = io.ErrUnexpectedEOF
		}
	}
	return n, err
}
