package pickle

import (
	"errors"
	"hash/crc32"
	"io"
)

const streamWindow = 64 << 10

// Stream is the bytes of one or more pickles: a forward-only reader over
// a window of an io.ReaderAt. It knows exactly how many bytes remain, so
// every length field is checked before anything is allocated, and it can
// hash everything it reads (the CRC-32 of a zip member) without a second
// pass. Consecutive pickles (a legacy checkpoint's five) are decoded from
// one Stream, each by its own Machine.
type Stream struct {
	r     io.ReaderAt
	base  int64 // absolute offset of byte 0
	limit int64 // bytes available from base
	pos   int64 // bytes consumed (relative)

	buf    []byte
	bstart int64 // relative offset of buf[0]

	hash   bool
	crc    uint32
	hashed int64 // bytes [0, hashed) are in crc

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
func (s *Stream) arg(n uint64) {
	if s.frame > s.pos && n > uint64(s.frame-s.pos) {
		s.cross(s.pos)
	}
}

// cross records that the read starting at at crossed the frame end.
func (s *Stream) cross(at int64) {
	if s.crossed == 0 {
		s.crossed, s.crossAt = s.frame, at
	}
	s.frame = 0
}

// startFrame handles a FRAME of n bytes at pos (n checked against what
// remains). A frame inside the current one leaves CPython's buffer alone;
// one that crosses its end is read from the frame end.
func (s *Stream) startFrame(n int64) {
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
func (s *Stream) takeCross() (fe, at int64) {
	fe, at = s.crossed, s.crossAt
	s.crossed = 0
	return fe, at
}

// NewStream returns a Stream over the limit bytes of r at base.
func NewStream(r io.ReaderAt, base, limit int64) *Stream {
	return &Stream{r: r, base: base, limit: limit}
}

// Pos returns the offset of the next byte, relative to base.
func (s *Stream) Pos() int64 { return s.pos }

// SetPos moves to pos, relative to base (a pickle that starts after other
// bytes of the window).
func (s *Stream) SetPos(pos int64) { s.pos = pos }

// Len returns the length of the window.
func (s *Stream) Len() int64 { return s.limit }

// Skip moves n bytes on (raw data between pickles, as a legacy tar member
// holds); n must be at most Remaining.
func (s *Stream) Skip(n int64) error { return s.skip(n) }

// Remaining returns the number of unread bytes.
func (s *Stream) Remaining() int64 { return s.remaining() }

// HashCRC32 makes the stream compute the CRC-32 (IEEE) of every byte it
// reads, for CRC32; call it before the first read.
func (s *Stream) HashCRC32() { s.hash = true }

// CRC32 reads any bytes not yet read up to the limit and returns the
// CRC-32 of the whole window (see HashCRC32).
func (s *Stream) CRC32() (uint32, error) { return s.finishCRC() }

// remaining returns the number of unread bytes.
func (s *Stream) remaining() int64 { return s.limit - s.pos }

// readAtRel reads p at relative offset off, updating the running CRC.
func (s *Stream) readAtRel(p []byte, off int64) error {
	n, err := s.r.ReadAt(p, s.base+off)
	if n < len(p) {
		if err == nil || errors.Is(err, io.EOF) {
			return errorf(ErrCorrupt, off+int64(n), "unexpected end of data (file shorter than its directory says)")
		}
		return &Error{Kind: ErrCorrupt, Offset: off + int64(n), Msg: "read failed", Err: err}
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

// fill makes at least need bytes (need <= streamWindow) available at pos.
func (s *Stream) fill(need int) error {
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
		s.buf = make([]byte, 0, min(streamWindow, s.limit))
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

func (s *Stream) eof(need int) error {
	return errorf(ErrCorrupt, s.pos, "unexpected end of pickle data (need %d bytes, %d remain)", need, s.remaining())
}

// readByte returns the next byte.
func (s *Stream) readByte() (byte, error) {
	if s.pos < s.bstart || s.pos >= s.bstart+int64(len(s.buf)) {
		if err := s.fill(1); err != nil {
			return 0, err
		}
	}
	b := s.buf[s.pos-s.bstart]
	s.pos++
	return b, nil
}

// next returns the next n bytes (n <= streamWindow); the slice is only valid
// until the next read.
func (s *Stream) next(n int) ([]byte, error) {
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
func (s *Stream) readN(n int64) ([]byte, error) {
	s.arg(uint64(max(n, 0)))
	if n < 0 || n > s.remaining() {
		return nil, errorf(ErrCorrupt, s.pos, "length %d exceeds the %d bytes that remain", n, s.remaining())
	}
	if n <= streamWindow {
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
func (s *Stream) skip(n int64) error {
	s.arg(uint64(max(n, 0)))
	if n < 0 || n > s.remaining() {
		return errorf(ErrCorrupt, s.pos, "length %d exceeds the %d bytes that remain", n, s.remaining())
	}
	for n > 0 {
		k := n
		if k > streamWindow {
			k = streamWindow
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
func (s *Stream) readLine(max int64) ([]byte, error) {
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
			return nil, errorf(ErrLimit, s.pos, "text line longer than %d bytes", max)
		}
		line = append(line, b)
	}
}

// finishCRC hashes any unread bytes up to the limit and returns the CRC of
// the whole window.
func (s *Stream) finishCRC() (uint32, error) {
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
