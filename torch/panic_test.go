package torch_test

import (
	"bytes"
	"errors"
	"os"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/gosafetensors/safetensors"
	"github.com/gosafetensors/safetensors/torch"
)

// panicAt panics on its k-th read.
type panicAt struct {
	r     *bytes.Reader
	k     int64
	reads atomic.Int64
}

func (p *panicAt) ReadAt(b []byte, off int64) (int, error) {
	if p.reads.Add(1) == p.k {
		panic("injected bug")
	}
	return p.r.ReadAt(b, off)
}

// TestPanicIsInternalError: a panic at any read of Scan or NewReader (the
// zip lister, the pickle walk, the strict decoder) is an error wrapping
// safetensors.ErrInternal that says it is a bug, with no report: never a
// problem in a report (verdict invalid), never ErrCorrupt.
func TestPanicIsInternalError(t *testing.T) {
	for _, file := range []string{"tiny_transformer.bin", "dtypes_legacy.pt"} {
		data, err := os.ReadFile("../testdata/torch/" + file)
		if err != nil {
			t.Fatal(err)
		}
		count := &panicAt{r: bytes.NewReader(data), k: -1}
		if rep, err := torch.Scan(count, int64(len(data)), file); err != nil || rep.Verdict() != torch.VerdictClean {
			t.Fatalf("%s: %v", file, err)
		}
		for k := int64(1); k <= count.reads.Load(); k++ {
			rep, err := torch.Scan(&panicAt{r: bytes.NewReader(data), k: k}, int64(len(data)), file)
			if rep != nil || !errors.Is(err, safetensors.ErrInternal) || !strings.Contains(err.Error(), "bug") || !strings.Contains(err.Error(), file) {
				var v string
				if rep != nil {
					v = rep.Verdict()
				}
				t.Fatalf("%s: Scan, panic at read %d: report %q, error %v", file, k, v, err)
			}
		}
		count = &panicAt{r: bytes.NewReader(data), k: -1}
		if _, err := torch.NewReader(count, int64(len(data)), file); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		for k := int64(1); k <= count.reads.Load(); k++ {
			c, err := torch.NewReader(&panicAt{r: bytes.NewReader(data), k: k}, int64(len(data)), file)
			if c != nil || !errors.Is(err, safetensors.ErrInternal) || errors.Is(err, torch.ErrCorrupt) {
				t.Fatalf("%s: NewReader, panic at read %d: %v", file, k, err)
			}
		}
	}
}
