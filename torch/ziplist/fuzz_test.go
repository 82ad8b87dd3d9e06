package ziplist

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// FuzzReader reads arbitrary bytes as an archive: no panic, bounded work,
// entries whose data lies inside the file, lookups that find every listed
// name, gaps in order inside the file, and the fallback functions safe on
// anything.
func FuzzReader(f *testing.F) {
	for _, c := range minizCases() {
		f.Add(c)
	}
	for _, glob := range []string{"../../testdata/crafted/*", "../../testdata/torch/*.pt"} {
		paths, _ := filepath.Glob(glob)
		for _, p := range paths {
			if b, err := os.ReadFile(p); err == nil && bytes.HasPrefix(b, []byte("PK")) && len(b) < 64<<10 {
				f.Add(b)
			}
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		hang := time.AfterFunc(10*time.Second, func() { panic(fmt.Sprintf("reading took more than 10s: %q", b)) })
		defer hang.Stop()
		r, size := bytes.NewReader(b), int64(len(b))
		const maxEntries = 1000
		for _, d := range CandidateDirectories(r, size) {
			if d.Offset < 0 || d.Size > size-d.Offset {
				t.Fatalf("candidate directory %+v outside %d bytes", d, size)
			}
			ParseDirectory(b[d.Offset:d.Offset+d.Size], maxEntries)
		}
		for p := NextLocalHeader(r, 0, size); p >= 0; p = NextLocalHeader(r, p+1, size) {
			if h, ok := ReadLocalHeader(r, size, p); ok && h.Offset != p {
				t.Fatalf("local header at %d read at %d", p, h.Offset)
			}
		}
		z, err := NewReader(r, size, maxEntries)
		if err != nil {
			if _, ok := err.(*Error); !ok {
				t.Fatalf("error %T %v is not an *Error", err, err)
			}
			return
		}
		if len(z.Entries) > maxEntries {
			t.Fatalf("%d entries", len(z.Entries))
		}
		for _, e := range z.Entries {
			if e.DataOffset >= 0 && (e.DataOffset > size || e.CompressedSize > size-e.DataOffset) {
				t.Fatalf("entry %q: %d bytes at %d in %d", e.Name, e.CompressedSize, e.DataOffset, size)
			}
			if l := z.Lookup(e.Name); l == nil || FoldName(l.Name) != FoldName(e.Name) {
				t.Fatalf("Lookup(%q) = %v", e.Name, l)
			}
			if e.Method == 0 && e.Flags&BadFlags == 0 && e.DataOffset >= 0 {
				z.ReadAll(e, 1<<20)
			}
		}
		last := int64(0)
		for _, g := range z.Gaps() {
			if g.Offset < last || g.Len <= 0 || g.Offset+g.Len > size {
				t.Fatalf("gap %+v after %d in %d bytes", g, last, size)
			}
			last = g.Offset + g.Len
		}
	})
}
