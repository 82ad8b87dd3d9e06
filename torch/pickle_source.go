package torch

import (
	"errors"
	"hash/crc32"
	"io"
)

const sourceWindow = 64 << 10

// source is a forward-only byte reader over a window of an io.ReaderAt. It
// knows exactly how many bytes remain, so every length field can be checked
// before anything is allocated, and it can hash everything it reads (the CRC
// of a zip member) without a second pass.
type source struct {
	r     io.ReaderAt
	base  int64 // absolute offset of byte 0
	limit int64 // bytes available from base
	pos   int64 // bytes consumed (relative)

	buf    []byte
	bstart int64 // relative offset of buf[0]

	hash   bool
	crc    uint32
	hashed int64 // bytes [0, hashed) are in crc

	entry string // for error messages

	// frame is the end of the FRAME CPython's C unpickler may hold in its
	// buffer (relative; <= pos: none). When an argument or text line needs
	// more bytes than remain in that buffer, CPython discards the rest and
	// reads the argument from the underlying file, that is from the frame
	// end, while this reader goes straight on: crossed records that frame
	// end (0: none) until takeCross.
	frame, crossed int64
	crossAt        int64 // where the read that crossed started
}

// arg notes that the next n bytes are an opcode's argument.
func (s *source) arg(n uint64) {
	if s.frame > s.pos && n > uint64(s.frame-s.pos) {
		s.cross(s.pos)
	}
}

// cross records that the read starting at at crossed the frame end.
func (s *source) cross(at int64) {
	if s.crossed == 0 {
		s.crossed, s.crossAt = s.frame, at
	}
	s.frame = 0
}

// startFrame handles a FRAME of n bytes at pos (n checked against what
// remains). A frame inside the current one leaves CPython's buffer alone;
// one that crosses its end is read from the frame end.
func (s *source) startFrame(n int64) {
	if s.frame > s.pos {
		if s.pos+n <= s.frame {
			return
		}
		s.cross(s.pos)
	}
	s.frame = s.pos + n
}

// takeCross returns and clears the frame end an argument crossed (0: none)
// and where the read that crossed it started.
func (s *source) takeCross() (fe, at int64) {
	fe, at = s.crossed, s.crossAt
	s.crossed = 0
	return fe, at
}

func newSource(r io.ReaderAt, base, limit int64, entry string) *source {
	return &source{r: r, base: base, limit: limit, entry: entry}
}

// remaining returns the number of unread bytes.
func (s *source) remaining() int64 { return s.limit - s.pos }

// readAtRel reads p at relative offset off, updating the running CRC.
func (s *source) readAtRel(p []byte, off int64) error {
	n, err := s.r.ReadAt(p, s.base+off)
	if n < len(p) {
		if err == nil || errors.Is(err, io.EOF) {
			return newError(ErrCorrupt, s.entry, off+int64(n), "unexpected end of data (file shorter than its directory says)")
		}
		return &Error{Kind: ErrCorrupt, Entry: s.entry, Offset: off + int64(n), Msg: "read failed", Err: err}
	}
	if s.hash {
		end := off + int64(len(p))
		if off <= s.hashed && end > s.hashed {
			s.crc = crc32.Update(s.crc, crc32.IEEETable, p[s.hashed-off:])
			s.hashed = end
		}
	}
	return nil
}

// fill makes at least need bytes (need <= sourceWindow) available at pos.
func (s *source) fill(need int) error {
	avail := int(s.bstart + int64(len(s.buf)) - s.pos)
	if avail >= need {
		return nil
	}
	if int64(need) > s.remaining() {
		return s.eof(need)
	}
	if s.buf == nil {
		// no bigger than the data: a file of thousands of tiny members must
		// not cost a 64 KiB allocation each
		s.buf = make([]byte, 0, min(sourceWindow, s.limit))
	}
	if avail < 0 || s.pos < s.bstart {
		avail = 0 // pos moved outside the window (a fresh source starting mid-file)
	}
	// keep the unread tail, then read as much as fits
	if avail > 0 {
		start := int(s.pos - s.bstart)
		copy(s.buf[:cap(s.buf)], s.buf[start:start+avail])
	}
	want := int64(cap(s.buf) - avail)
	if r := s.remaining() - int64(avail); want > r {
		want = r
	}
	s.buf = s.buf[:avail+int(want)]
	s.bstart = s.pos
	if err := s.readAtRel(s.buf[avail:], s.pos+int64(avail)); err != nil {
		s.buf = s.buf[:0]
		s.bstart = s.pos
		return err
	}
	return nil
}

func (s *source) eof(need int) error {
	return newError(ErrCorrupt, s.entry, s.pos, "unexpected end of pickle data (need %d bytes, %d remain)", need, s.remaining())
}

// readByte returns the next byte.
func (s *source) readByte() (byte, error) {
	if s.pos < s.bstart || s.pos >= s.bstart+int64(len(s.buf)) {
		if err := s.fill(1); err != nil {
			return 0, err
		}
	}
	b := s.buf[s.pos-s.bstart]
	s.pos++
	return b, nil
}

// next returns the next n bytes (n <= sourceWindow); the slice is only valid
// until the next read.
func (s *source) next(n int) ([]byte, error) {
	s.arg(uint64(max(n, 0)))
	if err := s.fill(n); err != nil {
		return nil, err
	}
	i := int(s.pos - s.bstart)
	s.pos += int64(n)
	return s.buf[i : i+n], nil
}

// readN returns a fresh copy of the next n bytes. n is checked against the
// bytes that remain before any allocation.
func (s *source) readN(n int64) ([]byte, error) {
	s.arg(uint64(max(n, 0)))
	if n < 0 || n > s.remaining() {
		return nil, newError(ErrCorrupt, s.entry, s.pos, "length %d exceeds the %d bytes that remain", n, s.remaining())
	}
	if n <= sourceWindow {
		b, err := s.next(int(n))
		if err != nil {
			return nil, err
		}
		return append([]byte(nil), b...), nil
	}
	out := make([]byte, n)
	avail := s.bstart + int64(len(s.buf)) - s.pos
	if avail < 0 || s.pos < s.bstart {
		avail = 0
	}
	if avail > 0 {
		i := int(s.pos - s.bstart)
		copy(out, s.buf[i:i+int(avail)])
	}
	if err := s.readAtRel(out[avail:], s.pos+avail); err != nil {
		return nil, err
	}
	s.pos += n
	s.buf = s.buf[:0]
	s.bstart = s.pos
	return out, nil
}

// skip advances n bytes (n checked against what remains).
func (s *source) skip(n int64) error {
	s.arg(uint64(max(n, 0)))
	if n < 0 || n > s.remaining() {
		return newError(ErrCorrupt, s.entry, s.pos, "length %d exceeds the %d bytes that remain", n, s.remaining())
	}
	for n > 0 {
		k := n
		if k > sourceWindow {
			k = sourceWindow
		}
		if _, err := s.next(int(k)); err != nil {
			return err
		}
		n -= k
	}
	return nil
}

// readLine returns the bytes up to (not including) the next '\n', at most max
// bytes long.
func (s *source) readLine(max int64) ([]byte, error) {
	var line []byte
	start := s.pos
	inFrame := s.frame > s.pos
	for {
		b, err := s.readByte()
		if err != nil {
			return nil, err
		}
		if b == '\n' {
			return line, nil
		}
		if inFrame && s.pos == s.frame {
			// no '\n' before the frame end: CPython reads the line from there
			s.cross(start)
			inFrame = false
		}
		if int64(len(line)) >= max {
			return nil, newError(ErrLimit, s.entry, s.pos, "text line longer than %d bytes", max)
		}
		line = append(line, b)
	}
}

// finishCRC hashes any unread bytes up to the limit and returns the CRC of
// the whole window.
func (s *source) finishCRC() (uint32, error) {
	buf := make([]byte, min(256<<10, max(s.limit-s.hashed, 0)))
	for s.hashed < s.limit {
		k := s.limit - s.hashed
		if k > int64(len(buf)) {
			k = int64(len(buf))
		}
		if err := s.readAtRel(buf[:k], s.hashed); err != nil {
			return 0, err
		}
	}
	return s.crc, nil
}
