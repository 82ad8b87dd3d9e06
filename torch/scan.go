package torch

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"strings"
)

// ScanFile is Scan on a file.
func ScanFile(path string) (*ScanReport, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	return Scan(f, fi.Size(), path)
}

// Scan audits a file without failing fast: it decodes every pickle it can
// find (data.pkl records, every other *.pkl member, pickles hidden in other
// members, all five legacy pickles, every pickle of a bare pickle file)
// with the same inert machine and caps as Open, but records each global with
// its verdict, each opcode that would run code, and each container or
// decoding problem instead of stopping at the first one. The error is only
// non-nil if r cannot be read at all.
func Scan(r io.ReaderAt, size int64, name string) (*ScanReport, error) {
	return ScanOptions(r, size, name, Options{})
}

// ScanOptions is Scan with explicit limits.
func ScanOptions(r io.ReaderAt, size int64, name string, opts Options) (rep *ScanReport, err error) {
	lim := opts.Limits.withDefaults()
	rep = &ScanReport{Path: name, Format: "unknown"}
	defer func() {
		// last line of defence, see NewReaderOptions
		if p := recover(); p != nil {
			rep.addProblem(fmt.Sprintf("internal error while scanning: %v", p))
		}
		rep.finish()
	}()
	k, err := sniff(r, size)
	if err != nil {
		return nil, withPath(err, name)
	}
	switch k {
	case kindEmpty:
		rep.addProblem("empty file")
	case kindZip:
		rep.Format = "zip"
		scanZip(r, size, &lim, rep)
	case kindTar:
		rep.Format = "tar"
		rep.addProblem("tar checkpoint (torch < 0.4) is not supported; its members were not scanned")
	default:
		scanStream(r, size, &lim, rep)
	}
	if rep.Format == "zip" || rep.Format == "legacy" {
		// The structural checks of Open (storages present and large
		// enough, views in bounds, version, byte order...) complete the audit.
		c, err := open(r, size, &lim)
		switch {
		case err == nil:
			rep.Tensors = len(c.tensors)
		case !isGlobalRefusal(err):
			rep.addProblem(errMsg(err))
		}
	}
	return rep, nil
}

// scanPickles decodes consecutive pickles in [base, base+n) and returns the
// value of the first one (nil if it failed) and where decoding stopped.
func scanPickles(ra io.ReaderAt, base, start, n int64, entry string, pids pidMode, lim *Limits, rep *ScanReport, maxPickles int, crc *uint32) (first any, firstOK bool, end int64) {
	src := newSource(ra, base, n, entry)
	src.pos = start
	src.hash = crc != nil
	return scanSource(src, entry, pids, lim, rep, maxPickles, crc)
}

// scanSource is scanPickles on an existing source, from its current position.
func scanSource(src *source, entry string, pids pidMode, lim *Limits, rep *ScanReport, maxPickles int, crc *uint32) (first any, firstOK bool, end int64) {
	src.entry = entry
	storages := make(map[string]*storageRef)
	if src.remaining() <= 0 {
		rep.addProblem(entry + ": empty pickle")
	}
	for i := 0; i < maxPickles && src.remaining() > 0; i++ {
		name := entry
		if i > 0 {
			name = fmt.Sprintf("%s (pickle %d)", entry, i+1)
			rep.addProblem(fmt.Sprintf("%s offset %d: another pickle after STOP", entry, src.pos))
		}
		m := newVM(src, lim, name, pids, storages, nil)
		m.scan = &scanSink{rep: rep, entry: name}
		rep.Pickles++
		v, err := m.run()
		if err != nil {
			rep.addProblem(errMsg(err))
			return first, firstOK, src.pos
		}
		if i == 0 {
			first, firstOK = v, true
		}
	}
	if crc != nil {
		if got, err := src.finishCRC(); err != nil {
			rep.addProblem(errMsg(err))
		} else if got != *crc {
			rep.addProblem(fmt.Sprintf("%s: CRC-32 mismatch (stored %08x, computed %08x)", entry, *crc, got))
		}
	}
	return first, firstOK, src.pos
}

func scanZip(r io.ReaderAt, size int64, lim *Limits, rep *ScanReport) {
	z, err := readZip(r, size, lim)
	if err != nil {
		rep.addProblem(errMsg(err))
		scanLocalHeaders(r, size, lim, rep)
		return
	}
	z.prefix()
	for _, p := range z.problems {
		rep.addProblem(p.entry + ": " + p.msg)
	}
	nData := 0
	var spent int64 // file bytes decoded so far; see openZip
	overlap := func(e *zipEntry) bool {
		if spent += e.csize; spent > size {
			rep.addProblem(fmt.Sprintf("%s: members overlap (more bytes to decode than the %d-byte file holds); remaining members not scanned", e.name, size))
			return true
		}
		return false
	}
	for _, e := range z.entries {
		if isDataPkl(e.name) {
			nData++
		}
		isPkl := strings.HasSuffix(asciiLower(e.name), ".pkl") // torch matches names case-insensitively
		ra, off, n, ok := z.pickleReader(e, lim.MaxPickleBytes)
		if !ok {
			if isPkl {
				rep.addProblem(e.name + ": pickle record could not be read (encrypted or unknown compression); not scanned")
			}
			continue
		}
		var crc *uint32
		if e.method == 0 {
			crc = &e.crc
		}
		if isPkl {
			if overlap(e) {
				break
			}
			scanPickles(ra, off, 0, n, e.name, pidZip, lim, rep, 1<<20, crc)
			continue
		}
		head := make([]byte, min(n, 2))
		if readFull(ra, head, off) != nil || len(head) < 2 || head[0] != opProto || head[1] < 2 || head[1] > 5 {
			continue
		}
		// Looks like a pickle in a non-.pkl member: scan it separately and
		// only report it if it contains something a pickle scanner cares about.
		if overlap(e) {
			break
		}
		sub := &ScanReport{}
		scanPickles(ra, off, 0, min(n, lim.MaxPickleBytes), e.name, pidZip, lim, sub, 1, nil)
		if len(sub.Globals) > 0 || len(sub.DangerousOpcodes) > 0 {
			rep.addProblem(e.name + ": pickle hidden in a non-.pkl member")
			rep.Globals = append(rep.Globals, sub.Globals...)
			rep.DangerousOpcodes = append(rep.DangerousOpcodes, sub.DangerousOpcodes...)
			rep.Pickles += sub.Pickles
			for i, s := range sub.seen {
				rep.seen[i] = rep.seen[i] || s
			}
		}
	}
	if nData == 0 {
		rep.addProblem("no <prefix>/data.pkl record (not a torch checkpoint)")
	}
}

// scanLocalHeaders walks local file headers of a zip whose central directory
// is missing (a truncated upload) and scans the pickles it finds.
func scanLocalHeaders(r io.ReaderAt, size int64, lim *Limits, rep *ScanReport) {
	rep.addProblem("scanning local headers only (central directory unusable)")
	pos := int64(0)
	var hdr [lenLocal]byte
	for n := 0; n < lim.MaxZipEntries && pos+lenLocal <= size; n++ {
		if readFull(r, hdr[:], pos) != nil || binary.LittleEndian.Uint32(hdr[:]) != sigLocal {
			next := findSig(r, pos+1, size)
			if next < 0 {
				return
			}
			pos = next
			continue
		}
		flags, method := binary.LittleEndian.Uint16(hdr[6:]), binary.LittleEndian.Uint16(hdr[8:])
		csize := int64(binary.LittleEndian.Uint32(hdr[18:]))
		nl, el := int64(binary.LittleEndian.Uint16(hdr[26:])), int64(binary.LittleEndian.Uint16(hdr[28:]))
		name := make([]byte, nl)
		if readFull(r, name, pos+lenLocal) != nil {
			return
		}
		data := pos + lenLocal + nl + el
		if data > size {
			return
		}
		// The member ends at its declared size if there is one, else at the
		// next local header. Scanning each pickle to the end of the file
		// instead would cost (headers x file size) for a file of many
		// headers glued into one long pickle.
		end := int64(-1)
		if flags&0x8 == 0 && csize > 0 && csize <= size-data {
			end = data + csize
		} else {
			end = findSig(r, data, size)
		}
		if end < 0 {
			end = size
		}
		if strings.HasSuffix(asciiLower(string(name)), ".pkl") && method == 0 && flags&badZipFlags == 0 {
			scanPickles(r, data, 0, end-data, string(name), pidZip, lim, rep, 1, nil)
		}
		if end >= size {
			return
		}
		pos = end
	}
}

// findSig returns the offset of the next local header signature at or after
// from, or -1.
func findSig(r io.ReaderAt, from, size int64) int64 {
	sig := []byte("PK\x03\x04")
	// start small and grow to 64 KiB: headers are usually close together,
	// and reading a whole window per header is (headers x 64 KiB) of work
	var buf []byte
	chunk := int64(256)
	for from < size {
		n := min(chunk, size-from)
		chunk = min(2*chunk, 64<<10)
		if int64(len(buf)) < n {
			buf = make([]byte, n)
		}
		if readFull(r, buf[:n], from) != nil {
			return -1
		}
		if i := bytes.Index(buf[:n], sig); i >= 0 {
			return from + int64(i)
		}
		if from+n >= size {
			return -1
		}
		from += n - int64(len(sig)) + 1
	}
	return -1
}

func scanStream(r io.ReaderAt, size int64, lim *Limits, rep *ScanReport) {
	// one source for every pickle (see openStream)
	src := newSource(r, 0, size, "pickle 1")
	first, ok, end := scanSource(src, "pickle 1", pidNone, lim, rep, 1, nil)
	if !ok {
		rep.addProblem("not a PyTorch checkpoint (neither a zip archive nor a pickle)")
		return
	}
	if isLegacyMagic(first) {
		rep.Format = "legacy"
		for i := 2; i <= 5 && end < size; i++ {
			mode := pidNone
			if i == 4 {
				mode = pidLegacy
			}
			var ok bool
			if _, ok, end = scanSource(src, fmt.Sprintf("pickle %d", i), mode, lim, rep, 1, nil); !ok {
				return
			}
		}
		return
	}
	rep.Format = "pickle"
	rep.addProblem("not a PyTorch checkpoint: a bare pickle (torch.load would unpickle it with the full unpickler)")
	for i := 2; end < size; i++ {
		var ok bool
		_, ok, end = scanSource(src, fmt.Sprintf("pickle %d", i), pidNone, lim, rep, 1, nil)
		if !ok {
			return
		}
	}
}
