package download

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"os"
	"strconv"
	"strings"
)

// A journal records which bytes of a partial file are on disk. It is a
// text file beside the partial (<partial>.journal): a header line naming
// the object (its identity: a blob digest, a URL and its validator) and its
// size, then one line per span "OFF END" made durable. Each line ends with
// the CRC-32C of its text, so a line torn by a crash is recognised and
// dropped. A span is appended only after the partial file was synced with
// its bytes in it (fdatasync), and the journal is synced after: whatever
// the journal says is on disk, is.
type journal struct {
	path    string
	f       *os.File
	records int
}

// journalHeader is the journal's first line.
type journalHeader struct {
	Format  string `json:"format"`
	Version int    `json:"version"`
	Size    int64  `json:"size"`
	Object  string `json:"object"`
}

const (
	journalFormat = "gosafetensors-download"
	// maxJournalBytes bounds a journal read back: beyond it the partial
	// is discarded (a journal is compacted long before).
	maxJournalBytes = 16 << 20
	// compactAfter rewrites a journal holding more records than this.
	compactAfter = 4096
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func journalLine(text string) string {
	return fmt.Sprintf("%s %08x\n", text, crc32.Checksum([]byte(text), castagnoli))
}

// errStale marks a partial that cannot be resumed (another object, a
// damaged journal): it is discarded and the file downloaded again.
var errStale = errors.New("partial download cannot be resumed")

// readJournal returns the spans a journal records for the object of the
// given identity and size; errStale if it is of another object or damaged
// before its last line.
func readJournal(path, object string, size int64) (*rangeSet, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if st.Size() > maxJournalBytes {
		return nil, fmt.Errorf("%w: journal of %d bytes", errStale, st.Size())
	}
	b, err := io.ReadAll(f)
	if err != nil {
		return nil, err
	}
	lines := strings.SplitAfter(string(b), "\n")
	var set rangeSet
	for i, l := range lines {
		if l == "" {
			continue
		}
		text, ok := checkLine(l)
		if !ok {
			if i == len(lines)-1 { // torn last line: the crash was writing it
				break
			}
			return nil, fmt.Errorf("%w: journal line %d is damaged", errStale, i+1)
		}
		if i == 0 {
			var h journalHeader
			if err := json.Unmarshal([]byte(text), &h); err != nil || h.Format != journalFormat || h.Version != 1 {
				return nil, fmt.Errorf("%w: not a journal", errStale)
			}
			if h.Size != size || h.Object != object {
				return nil, fmt.Errorf("%w: the journal is of %s (%d bytes), not %s (%d bytes)", errStale, h.Object, h.Size, object, size)
			}
			continue
		}
		a, e, ok := strings.Cut(text, " ")
		off, err1 := strconv.ParseInt(a, 10, 64)
		end, err2 := strconv.ParseInt(e, 10, 64)
		if !ok || err1 != nil || err2 != nil || off < 0 || end <= off || end > size {
			return nil, fmt.Errorf("%w: journal line %d: bad span %q", errStale, i+1, text)
		}
		set.add(off, end)
	}
	if len(lines) == 0 || !strings.HasSuffix(lines[0], "\n") {
		return nil, fmt.Errorf("%w: the journal has no header", errStale)
	}
	return &set, nil
}

// checkLine returns a line's text if its checksum is right.
func checkLine(l string) (string, bool) {
	l, ok := strings.CutSuffix(l, "\n")
	if !ok {
		return "", false
	}
	i := strings.LastIndexByte(l, ' ')
	if i < 0 {
		return "", false
	}
	sum, err := strconv.ParseUint(l[i+1:], 16, 32)
	if err != nil || len(l)-i-1 != 8 || uint32(sum) != crc32.Checksum([]byte(l[:i]), castagnoli) {
		return "", false
	}
	return l[:i], true
}

// createJournal writes a new journal with its header and the spans given
// (a compaction), synced, replacing any old one atomically.
func createJournal(path, object string, size int64, spans []span) (*journal, error) {
	h, err := json.Marshal(journalHeader{Format: journalFormat, Version: 1, Size: size, Object: object})
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	b.WriteString(journalLine(string(h)))
	for _, s := range spans {
		b.WriteString(journalLine(fmt.Sprintf("%d %d", s.Off, s.End)))
	}
	tmp := path + ".new"
	if err := writeSynced(tmp, b.Bytes()); err != nil {
		return nil, err
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return nil, err
	}
	return openJournal(path, len(spans))
}

func openJournal(path string, records int) (*journal, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return nil, err
	}
	return &journal{path: path, f: f, records: records}, nil
}

// append records spans durably.
func (j *journal) append(spans []span) error {
	var b bytes.Buffer
	w := bufio.NewWriter(&b)
	for _, s := range spans {
		w.WriteString(journalLine(fmt.Sprintf("%d %d", s.Off, s.End)))
	}
	w.Flush()
	if _, err := j.f.Write(b.Bytes()); err != nil {
		return err
	}
	j.records += len(spans)
	return j.f.Sync()
}

func (j *journal) close() error { return j.f.Close() }

// writeSynced writes a new file and syncs it.
func writeSynced(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o666)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// removeIfExists removes path, ignoring its absence.
func removeIfExists(path string) error {
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}
