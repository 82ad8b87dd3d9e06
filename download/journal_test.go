package download

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestJournal: spans read back as written; a torn last line is dropped; a
// damaged line before it, another object or size, or no header make the
// partial stale.
func TestJournal(t *testing.T) {
	p := filepath.Join(t.TempDir(), "x.partial.journal")
	j, err := createJournal(p, "hub sha256:ab", 1000, []span{{0, 100}})
	if err != nil {
		t.Fatal(err)
	}
	if err := j.append([]span{{200, 300}, {100, 200}}); err != nil {
		t.Fatal(err)
	}
	j.close()
	set, err := readJournal(p, "hub sha256:ab", 1000)
	if err != nil || len(set.s) != 1 || set.s[0] != (span{0, 300}) {
		t.Fatalf("read back %v %v", set, err)
	}
	if m := set.missing(1000); len(m) != 1 || m[0] != (span{300, 1000}) {
		t.Fatalf("missing %v", m)
	}
	b, _ := os.ReadFile(p)
	os.WriteFile(p, append(b, []byte(journalLine("400 500")[:7])...), 0o666) // torn
	if set, err := readJournal(p, "hub sha256:ab", 1000); err != nil || set.bytes() != 300 {
		t.Fatalf("torn last line: %v %v", set, err)
	}
	lines := strings.SplitAfter(string(b), "\n")
	lines[1] = strings.Replace(lines[1], "0 100", "0 900", 1) // checksum no longer matches
	os.WriteFile(p, []byte(strings.Join(lines, "")), 0o666)
	if _, err := readJournal(p, "hub sha256:ab", 1000); !errors.Is(err, errStale) {
		t.Fatalf("damaged line: %v", err)
	}
	os.WriteFile(p, b, 0o666)
	for _, c := range []struct {
		object string
		size   int64
	}{{"hub sha256:cd", 1000}, {"hub sha256:ab", 999}} {
		if _, err := readJournal(p, c.object, c.size); !errors.Is(err, errStale) {
			t.Fatalf("%s %d: %v", c.object, c.size, err)
		}
	}
	os.WriteFile(p, []byte(journalLine("0 100")), 0o666)
	if _, err := readJournal(p, "hub sha256:ab", 1000); !errors.Is(err, errStale) {
		t.Fatalf("no header: %v", err)
	}
	os.WriteFile(p, append(b, []byte(journalLine("900 1001"))...), 0o666)
	if _, err := readJournal(p, "hub sha256:ab", 1000); !errors.Is(err, errStale) {
		t.Fatalf("a span past the end: %v", err)
	}
}

// TestRangeSet: spans merge when they touch or overlap, and what is
// missing is their complement.
func TestRangeSet(t *testing.T) {
	var r rangeSet
	for _, s := range []span{{10, 20}, {30, 40}, {20, 25}, {50, 60}, {24, 31}, {0, 1}} {
		r.add(s.Off, s.End)
	}
	want := []span{{0, 1}, {10, 40}, {50, 60}}
	if len(r.s) != len(want) {
		t.Fatalf("%v", r.s)
	}
	for i := range want {
		if r.s[i] != want[i] {
			t.Fatalf("%v, want %v", r.s, want)
		}
	}
	if r.reach(10) != 40 || r.reach(40) != 40 || r.reach(5) != 5 || r.bytes() != 41 {
		t.Fatalf("reach/bytes: %d %d %d %d", r.reach(10), r.reach(40), r.reach(5), r.bytes())
	}
	if m := r.missing(70); len(m) != 3 || m[0] != (span{1, 10}) || m[2] != (span{60, 70}) {
		t.Fatalf("missing %v", m)
	}
}

// TestJournalCompaction: a journal that grows past compactAfter records is
// rewritten with the merged spans, and reads back the same.
func TestJournalCompaction(t *testing.T) {
	dir := t.TempDir()
	tg := &target{Part: filepath.Join(dir, "x.partial"), Size: 1 << 20, Object: "o"}
	f, err := os.Create(tg.Part)
	if err != nil {
		t.Fatal(err)
	}
	tg.f = f
	if tg.j, err = createJournal(tg.journalPath(), tg.Object, tg.Size, nil); err != nil {
		t.Fatal(err)
	}
	n := compactAfter * 3 / 5
	for half := range int64(2) { // the even pairs of bytes, then the odd ones: they merge into one span
		for i := range int64(n) {
			tg.pending.add(4*i+2*half, 4*i+2*half+2)
		}
		if _, err := tg.commit(false); err != nil {
			t.Fatal(err)
		}
	}
	tg.j.close()
	f.Close()
	if tg.j.records != 1 {
		t.Fatalf("%d records after compaction, want 1", tg.j.records)
	}
	set, err := readJournal(tg.journalPath(), "o", tg.Size)
	if err != nil || len(set.s) != 1 || set.bytes() != int64(4*n) {
		t.Fatalf("read back %v (%v)", set.s, err)
	}
}
