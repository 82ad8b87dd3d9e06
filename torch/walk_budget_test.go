package torch

import (
	"bytes"
	"encoding/binary"
	"errors"
	"slices"
	"strings"
	"testing"
)

// frameOverrunBomb is the red-team's walk-budget denial of service (issue
// 14 item 12): n tiny pickles whose FRAMEs run past their STOP, each to
// another offset of a memo-heavy tail of tail bytes (NONE MEMOIZE, with
// no STOP until the end). The next pickle may start after each STOP or at
// its frame end, so the tail is walked from every one of them: without a
// budget that cannot be amplified, n x tail bytes of memo-heavy walking.
func frameOverrunBomb(n, tail int) []byte {
	head := 13 * n // PROTO 4, FRAME, NONE, STOP
	tailStart := head
	var b []byte
	for i := range n {
		at := 13 * i
		frameStart := at + 11
		end := tailStart + 2 + 2*(i%(tail/2-2))
		b = append(b, 0x80, 4, 0x95)
		b = binary.LittleEndian.AppendUint64(b, uint64(end-frameStart))
		b = append(b, 'N', '.')
	}
	b = append(b, 0x80, 4)
	b = append(b, bytes.Repeat([]byte("N\x94"), (tail-3)/2)...)
	return append(b, '.')
}

func budgetCraftedFiles() []craftedEntry {
	return []craftedEntry{{Name: "dos_frame_overruns_memo_tail.pkl", Class: "caps",
		Attack:      "10,000 tiny pickles whose FRAMEs run past their STOP to 10,000 offsets of a 100 KB memo-heavy tail (NONE MEMOIZE): every frame end is a place the next pickle may start, so an unbounded scan walks the tail 10,000 times (issue 14 item 12: 50-80 s); torch refuses the file at once (not the legacy magic)",
		ScanVerdict: "invalid", Convert: "refuse", ConvertErr: "corrupt", data: frameOverrunBomb(10000, 100000)}}
}

// TestWalkBudget scans and opens (as convert does) the frame-overrun bomb
// and counts the work: the opcodes, skipped bytes and memo entries every
// walk stepped over. Unbounded, the scan walks the tail from each of the
// 10,000 frame ends (400 million units, 35-80 s); within the budget it
// stops at walkBudget (about a second for a file under 1 MB) and says so,
// so the file is never clean.
func TestWalkBudget(t *testing.T) {
	b := frameOverrunBomb(10000, 100000)
	size := int64(len(b))
	lim := DefaultLimits()
	for name, run := range map[string]func() (*ScanReport, error){
		"scan": func() (*ScanReport, error) {
			rep, _, err := analyze(bytes.NewReader(b), size, "bomb", &lim)
			return rep, err
		},
		"convert": func() (*ScanReport, error) {
			rep, c, err := analyzeForOpen(bytes.NewReader(b), size, "bomb", &lim)
			if c != nil {
				t.Errorf("convert: opened")
			}
			return rep, err
		},
	} {
		rep, err := run()
		if err != nil {
			t.Fatal(err)
		}
		work := rep.walker().Work()
		t.Logf("%s: %d bytes, %d units of walk work, verdict %s", name, size, work, rep.Verdict())
		if max := walkBudget(size); work > max {
			t.Errorf("%s: %d units of walk work for %d bytes (budget %d)", name, work, size, max)
		}
		if rep.Verdict() == VerdictClean || !rep.walker().Spent() || !slices.ContainsFunc(rep.Problems, func(p string) bool { return strings.Contains(p, "walk budget") }) {
			t.Errorf("%s: verdict %s, budget spent %v", name, rep.Verdict(), rep.walker().Spent())
		}
	}
	if _, err := NewReader(bytes.NewReader(b), size, "bomb"); !errors.Is(err, ErrCorrupt) {
		t.Errorf("NewReader: %v", err)
	}
}
