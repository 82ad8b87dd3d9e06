package rangeread

import (
	"errors"
	"fmt"
	"io"
	"sync"
)

// Piece is one destination: Buf is filled with the object's bytes at Off.
type Piece struct {
	Buf []byte
	Off int64
}

// End returns the offset just past the piece.
func (p Piece) End() int64 { return p.Off + int64(len(p.Buf)) }

// Span is a contiguous byte range [Off, End) read with one range; it covers
// its pieces, in offset order, and the gaps between them.
type Span struct {
	Off, End int64
	Pieces   []Piece
}

// Len returns the span's length in bytes.
func (s Span) Len() int64 { return s.End - s.Off }

// check reports whether s is well formed: Off <= End, and its pieces
// sorted, disjoint and inside [Off, End).
func (s Span) check() error {
	if s.Off < 0 || s.End < s.Off {
		return fmt.Errorf("%w: span [%d, %d)", ErrInvalidRuns, s.Off, s.End)
	}
	pos := s.Off
	for i, p := range s.Pieces {
		if p.Off < pos || int64(len(p.Buf)) > s.End-p.Off {
			return fmt.Errorf("%w: piece %d (%d bytes at %d) outside span [%d, %d) or before the previous piece's end %d", ErrInvalidRuns, i, len(p.Buf), p.Off, s.Off, s.End, pos)
		}
		pos = p.End()
	}
	return nil
}

// ErrInvalidRuns reports runs given to ReadRuns that are not sorted,
// disjoint runs inside the object.
var ErrInvalidRuns = errors.New("invalid runs")

// Check validates a ReadRuns request against an object of size bytes: equal
// lengths, offsets non-negative, runs inside the object (overflow-checked),
// sorted and non-overlapping. It returns the non-empty runs as pieces.
func Check(bufs [][]byte, offs []int64, size int64) ([]Piece, error) {
	if len(bufs) != len(offs) {
		return nil, fmt.Errorf("%w: %d buffers but %d offsets", ErrInvalidRuns, len(bufs), len(offs))
	}
	pieces := make([]Piece, 0, len(bufs))
	prevEnd := int64(0)
	for i, b := range bufs {
		off := offs[i]
		if off < 0 || int64(len(b)) > size || off > size-int64(len(b)) {
			return nil, fmt.Errorf("%w: run %d: %d bytes at %d lie outside the %d-byte object", ErrInvalidRuns, i, len(b), off, size)
		}
		if off < prevEnd {
			return nil, fmt.Errorf("%w: run %d at %d overlaps or precedes the previous run (ending at %d): runs must be sorted and disjoint", ErrInvalidRuns, i, off, prevEnd)
		}
		if len(b) == 0 {
			continue
		}
		prevEnd = off + int64(len(b))
		pieces = append(pieces, Piece{Buf: b, Off: off})
	}
	return pieces, nil
}

// Plan groups sorted, disjoint pieces into spans, merging neighbours at most
// gap bytes apart as long as the span stays under maxSpan bytes (0: no bound).
func Plan(pieces []Piece, gap, maxSpan int64) []Span {
	var spans []Span
	for _, p := range pieces {
		if n := len(spans); n > 0 {
			s := &spans[n-1]
			if p.Off-s.End <= gap && (maxSpan <= 0 || p.End()-s.Off <= maxSpan) {
				s.End = p.End()
				s.Pieces = append(s.Pieces, p)
				continue
			}
		}
		spans = append(spans, Span{Off: p.Off, End: p.End(), Pieces: []Piece{p}})
	}
	return spans
}

// Fill reads exactly s.Len() bytes of r, the object's bytes from s.Off,
// into the span's pieces, discarding the gaps. A stream that ends early
// gives io.ErrUnexpectedEOF. A span whose pieces are not sorted, disjoint
// and inside it is refused with [ErrInvalidRuns] before anything is read:
// its bytes would land in the wrong places.
func Fill(r io.Reader, s Span) error {
	if err := s.check(); err != nil {
		return err
	}
	pos := s.Off
	for _, p := range s.Pieces {
		if p.Off > pos {
			if n, err := io.CopyN(io.Discard, r, p.Off-pos); err != nil {
				return short(pos-s.Off+n, s.Len(), err)
			}
		}
		if n, err := io.ReadFull(r, p.Buf); err != nil {
			return short(p.Off-s.Off+int64(n), s.Len(), err)
		}
		pos = p.End()
	}
	if pos < s.End {
		if n, err := io.CopyN(io.Discard, r, s.End-pos); err != nil {
			return short(pos-s.Off+n, s.Len(), err)
		}
	}
	return nil
}

func short(got, want int64, err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return fmt.Errorf("body ended after %d of %d bytes: %w", got, want, io.ErrUnexpectedEOF)
	}
	return err
}

// Parallel runs fn(0..n-1) on at most limit goroutines and returns the
// errors joined. After the first error no new call starts.
func Parallel(n, limit int, fn func(i int) error) error {
	if n == 1 {
		return fn(0)
	}
	var (
		mu     sync.Mutex
		errs   []error
		next   int
		failed bool
		wg     sync.WaitGroup
	)
	take := func() (int, bool) {
		mu.Lock()
		defer mu.Unlock()
		if failed || next >= n {
			return 0, false
		}
		next++
		return next - 1, true
	}
	for range min(limit, n) {
		wg.Go(func() {
			for {
				i, ok := take()
				if !ok {
					return
				}
				if err := fn(i); err != nil {
					mu.Lock()
					errs = append(errs, err)
					failed = true
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}
