package tarlist

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gosafetensors/safetensors/torch/internal/tartest"
)

// FuzzList lists arbitrary bytes in every variant: no panic, a bounded
// listing in bounded time, members whose offsets lie where tarfile put
// them, links resolved to regular members, sparse views that read within
// their size, and no member in any variant where the first header is
// not what tarfile.open accepts.
func FuzzList(f *testing.F) {
	for _, c := range slices.Concat(tartest.ListCases(), tartest.LinkCases(), tartest.NegCases(), tartest.NegGoCases(),
		tartest.SparseCases(), tartest.ExtractCases(), tartest.HeaderCases()) {
		f.Add(c)
	}
	crafted, _ := filepath.Glob("../../testdata/crafted/*tar*")
	for _, p := range crafted {
		if b, err := os.ReadFile(p); err == nil && len(b) < 1<<20 {
			f.Add(b)
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		hang := time.AfterFunc(10*time.Second, func() { panic(fmt.Sprintf("listing took more than 10s: %q", b)) })
		defer hang.Stop()
		r := bytes.NewReader(b)
		size := int64(len(b))
		const maxMembers = 1000
		lists, _ := ListAll(r, size, maxMembers)
		isTar := IsTar(r, size)
		if len(b) >= BlockSize {
			_, _ = ParseHeader(b[:BlockSize])
		}
		for vi, ms := range lists {
			if len(ms) > maxMembers {
				t.Fatalf("variant %d: %d members", vi, len(ms))
			}
			if len(ms) > 0 && !isTar {
				t.Fatalf("variant %d lists %d members of a file tarfile.open refuses", vi, len(ms))
			}
			x := NewIndex(ms)
			for i, m := range ms {
				if m.HeaderOffset < 0 || m.HeaderOffset+BlockSize > size || m.DataOffset < m.HeaderOffset+BlockSize {
					t.Fatalf("member %d %q: header at %d, data at %d in %d bytes", i, m.Name, m.HeaderOffset, m.DataOffset, size)
				}
				out, _, _ := x.Resolve(i, "storages")
				for _, j := range out {
					if j < 0 || j >= len(ms) || !ms[j].IsRegular() {
						t.Fatalf("resolved %d to %d", i, j)
					}
				}
				if !m.HasSparse {
					continue
				}
				if v, ok := NewSparseView(r, m.DataOffset, max(m.Size, 0), m.Sparse); ok {
					readAll(t, v)
				}
				if v, _, ok := NewExtractView(r, size, m.DataOffset, m.Size, m.Sparse); ok {
					readAll(t, v)
				}
			}
		}
	})
}

// readAll reads a sparse view in full, as a scanner would.
func readAll(t *testing.T, v *SparseView) {
	if v.Size() > 64<<20 {
		return
	}
	p := make([]byte, v.Size())
	if n, err := v.ReadAt(p, 0); err != nil && !(n == len(p) || strings.Contains(err.Error(), "EOF")) {
		t.Fatalf("sparse view: %d of %d bytes: %v", n, len(p), err)
	}
}
