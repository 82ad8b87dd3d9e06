package torch

import (
	"bytes"
	"slices"
	"strings"
	"testing"
)

// CPython has no MARK limit: a pickle of more MARKs than the decoder and
// the walker keep must still have its globals named, whether they come
// from GLOBAL or from STACK_GLOBAL on memoised strings.
func TestScanManyMarks(t *testing.T) {
	marks := strings.Repeat("(", walkStackBound+walkStackBound/10)
	cases := []struct {
		name string
		data []byte
	}{
		{"bare GLOBAL", cat(marks, systemCall, ".")},
		{"bare proto-4 STACK_GLOBAL from memo", cat(0x80, 4, hStr("posix"), "r\x01\x00\x00\x000", hStr("system"), "r\x02\x00\x00\x000",
			marks, "j\x01\x00\x00\x00j\x02\x00\x00\x00", 0x93, hStr("true"), 0x85, "R.")},
		{"zip data.pkl STACK_GLOBAL from memo", hCheckpoint(cat(0x80, 4, hStr("posix"), "r\x01\x00\x00\x000", hStr("system"), "r\x02\x00\x00\x000",
			marks, "j\x01\x00\x00\x00j\x02\x00\x00\x00", 0x93, hStr("true"), 0x85, "R."), "0", f32s(4))},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rep, err := Scan(bytes.NewReader(c.data), int64(len(c.data)), "marks")
			if err != nil {
				t.Fatal(err)
			}
			if v := rep.Verdict(); v != VerdictDangerous || !slices.Contains(rep.NotAllowed(), "posix.system") {
				t.Fatalf("verdict %s, not allowed %v, problems %q", v, rep.NotAllowed(), rep.Problems)
			}
			if rep.Format == FormatUnknown {
				t.Errorf("a run of MARKs is a pickle: format %q, problems %q", rep.Format, rep.Problems)
			}
		})
	}
}

// walkStackBound is the pickle walker's stack bound (maxWalkStack there):
// more MARKs than it keeps.
const walkStackBound = 1 << 20
