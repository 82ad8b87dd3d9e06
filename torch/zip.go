package torch

import (
	"bytes"
	"compress/flate"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/gosafetensors/safetensors/torch/ziplist"
)

// A torch zip checkpoint as miniz reads it: the archive is listed by
// package ziplist; what is torch's (one top-level folder, how much of a
// compressed pickle record to inflate) is here.

// zipEntry is one central-directory record, checked against its local header.
type zipEntry = ziplist.Entry

// zipProblem is a container irregularity; problems are reported after the
// pickles have been checked, so a dangerous global is always named first.
type zipProblem struct {
	kind  error
	entry string
	msg   string
}

// zipArchive is a listed archive and the problems found in it.
type zipArchive struct {
	*ziplist.Reader
	r        io.ReaderAt
	size     int64
	problems []zipProblem
}

func (z *zipArchive) problem(kind error, entry, format string, args ...any) {
	z.problems = append(z.problems, zipProblem{kind: kind, entry: entry, msg: fmt.Sprintf(format, args...)})
}

// readZip lists the archive as miniz does (see ziplist.NewReader).
func readZip(r io.ReaderAt, size int64, lim *Limits) (*zipArchive, error) {
	return listZip(r, size, lim, nil)
}

// readZipDeferring is readZip without reading the local headers of the
// records where storages may live (see storageName): their checks wait
// for the first read of the storage.
func readZipDeferring(r io.ReaderAt, size int64, lim *Limits) (*zipArchive, error) {
	return listZip(r, size, lim, func(e *ziplist.Entry) bool { return storageName(e.Name) })
}

func listZip(r io.ReaderAt, size int64, lim *Limits, deferred func(*ziplist.Entry) bool) (*zipArchive, error) {
	zr, err := ziplist.NewReaderDeferring(r, size, lim.MaxZipEntries, deferred)
	if err != nil {
		return nil, zipError(err)
	}
	z := &zipArchive{Reader: zr, r: r, size: size}
	for _, p := range zr.Problems {
		z.problems = append(z.problems, zipProblem{kind: zipKind(p.Kind), entry: p.Entry, msg: p.Msg})
	}
	return z, nil
}

// zipKind maps a ziplist sentinel to this package's.
func zipKind(k error) error {
	switch k {
	case ziplist.ErrUnsupported:
		return ErrUnsupported
	case ziplist.ErrLimit:
		return ErrLimit
	}
	return ErrCorrupt
}

// zipError turns a ziplist error into an *Error.
func zipError(err error) error {
	var e *ziplist.Error
	if !errors.As(err, &e) {
		return err
	}
	return &Error{Kind: zipKind(e.Kind), Entry: e.Entry, Offset: e.Offset, Msg: e.Msg, Err: e.Err}
}

// readSmall reads a whole small STORED entry and verifies its CRC.
func (z *zipArchive) readSmall(e *zipEntry, max int64) ([]byte, error) {
	b, err := z.ReadAll(e, max)
	return b, zipError(err)
}

// asciiLower folds ASCII letters only, like miniz's name comparison.
func asciiLower(s string) string { return ziplist.FoldName(s) }

// lookup finds a record as torch's reader (miniz) does, without case.
func (z *zipArchive) lookup(name string) *zipEntry { return z.Lookup(name) }

// prefix returns the single top-level folder all entries live in, recording
// a problem if there is none or more than one.
func (z *zipArchive) prefix() string {
	prefix := ""
	for i, e := range z.Entries {
		slash := strings.IndexByte(e.Name, '/')
		if slash <= 0 {
			z.problem(ErrCorrupt, e.Name, "entry is not inside a top-level folder")
			continue
		}
		if i == 0 || prefix == "" {
			prefix = e.Name[:slash]
		} else if e.Name[:slash] != prefix {
			z.problem(ErrCorrupt, e.Name, "entries live under more than one top-level folder (%q and %q)", prefix, e.Name[:slash])
		}
	}
	return prefix
}

// pickleReader returns a ReaderAt and length for decoding entry e. STORED
// entries are read in place; DEFLATE entries are inflated into memory with a
// cap (only used to name dangerous globals before refusing the archive).
func (z *zipArchive) pickleReader(e *zipEntry, max int64) (io.ReaderAt, int64, int64, bool) {
	if e.DataOffset < 0 || e.Flags&ziplist.BadFlags != 0 {
		return nil, 0, 0, false
	}
	switch e.Method {
	case 0:
		return z.r, e.DataOffset, e.Size, true
	case 8:
		// DEFLATE reaches ~1000:1; inflate at most inflateRatio bytes per
		// stored byte so that a small bomb cannot claim MaxPickleBytes of
		// memory. A pickle cut short is still refused (the entry is
		// compressed, and its end is missing), just without naming what
		// lies beyond.
		if c := inflateRatio*e.CompressedSize + 1024; c < max {
			max = c
		}
		fr := flate.NewReader(io.NewSectionReader(z.r, e.DataOffset, e.CompressedSize))
		defer fr.Close()
		var buf bytes.Buffer
		if _, err := io.Copy(&buf, io.LimitReader(fr, max)); err != nil {
			return nil, 0, 0, false
		}
		return bytes.NewReader(buf.Bytes()), 0, int64(buf.Len()), true
	}
	return nil, 0, 0, false
}

func readFull(r io.ReaderAt, p []byte, off int64) error {
	n, err := r.ReadAt(p, off)
	if n == len(p) {
		return nil
	}
	if err == nil || err == io.EOF || err == io.ErrUnexpectedEOF {
		return newError(ErrCorrupt, "", off+int64(n), "unexpected end of file")
	}
	return &Error{Kind: ErrCorrupt, Offset: off + int64(n), Msg: "read failed", Err: err}
}
