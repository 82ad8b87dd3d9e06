package audit

import (
	"bytes"
	"context"
	"errors"
	"iter"
	"os"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/gosafetensors/safetensors"
	"github.com/gosafetensors/safetensors/source"
)

// panicReader panics on its k-th read (1-based): a bug anywhere under a
// scan or a validation, at every stage of it as k grows.
type panicReader struct {
	r     *bytes.Reader
	k     int64
	reads atomic.Int64
}

func (p *panicReader) ReadAt(b []byte, off int64) (int, error) {
	if p.reads.Add(1) == p.k {
		panic("injected bug")
	}
	return p.r.ReadAt(b, off)
}

// checkInternal requires err to be the error of a recovered panic: it
// wraps safetensors.ErrInternal and says it is a bug.
func checkInternal(t *testing.T, what string, err error) {
	t.Helper()
	if !errors.Is(err, safetensors.ErrInternal) || !strings.Contains(err.Error(), "bug") || !strings.Contains(err.Error(), "injected bug") {
		t.Fatalf("%s: error %v, want one wrapping ErrInternal saying it is a bug", what, err)
	}
}

// TestPanicIsNoVerdict: a panic at any read of a scan (sniffing, listing
// the zip, walking the pickle, the strict decoder) or of a validation is
// verdict Error / unreadable, with an error wrapping ErrInternal: never
// invalid or clean, never a crash of the audit.
func TestPanicIsNoVerdict(t *testing.T) {
	for _, file := range []string{"../testdata/torch/tiny_transformer.bin", "../testdata/torch/tiny_transformer.safetensors"} {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		reads := int64(0)
		{ // how many reads a scan makes
			pr := &panicReader{r: bytes.NewReader(data), k: -1}
			if r := ScanReader(context.Background(), file, pr, int64(len(data))); r.Verdict != Clean {
				t.Fatalf("%s: %v %v", file, r.Verdict, r.Err)
			}
			reads = pr.reads.Load()
		}
		for k := int64(1); k <= reads; k++ {
			pr := &panicReader{r: bytes.NewReader(data), k: k}
			r := ScanReader(context.Background(), file, pr, int64(len(data)))
			if r.Verdict != Error {
				t.Fatalf("%s: panic at read %d of %d: verdict %v (%v), want error", file, k, reads, r.Verdict, r.Problems)
			}
			checkInternal(t, file, r.Err)
		}
		if !strings.HasSuffix(file, ".safetensors") {
			continue
		}
		c, _ := buildConfig([]Option{WithFull(true)})
		validate := func(k int64) (*ValidateReport, int64) {
			pr := &panicReader{r: bytes.NewReader(data), k: -1}
			o, err := source.NewObject(file, pr, int64(len(data)), nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			start := pr.reads.Load()
			pr.k = start + k // the k-th read of the validation
			r := c.validateObject(context.Background(), newValidateReport(file), o)
			return r, pr.reads.Load() - start
		}
		r, reads := validate(-1)
		if r.Status != OK {
			t.Fatalf("validate: %v %v", r.Status, r.Err)
		}
		for k := int64(1); k <= reads; k++ {
			r, _ := validate(k)
			if r.Status != Unreadable || r.Valid {
				t.Fatalf("validate, panic at read %d: status %v (%v)", k, r.Status, r.Err)
			}
			checkInternal(t, "validate", r.Err)
		}
	}
}

// TestPanicWhileListing: a panic in the targets' listing ends the audit
// with an Error report, not a crash.
func TestPanicWhileListing(t *testing.T) {
	c, _ := buildConfig(nil)
	targets := func(yield func(Target, error) bool) {
		if !yield(Target{Location: "a"}, errors.New("first")) {
			return
		}
		panic("injected bug")
	}
	var got []*ScanReport
	for r := range pipeline(context.Background(), c, iter.Seq2[Target, error](targets), func(ctx context.Context, t *Target, err error) *ScanReport {
		return newScanReport(t.Location).fail(err)
	}, func(err error) *ScanReport { return newScanReport("loc").fail(cutShort("loc", err)) }) {
		got = append(got, r)
	}
	if len(got) != 2 || got[1].Verdict != Error {
		t.Fatalf("reports %v", got)
	}
	checkInternal(t, "listing", got[1].Err)
}
