package torch_test

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/gosafetensors/safetensors/torch"
)

// failingReader reads from r until a read reaches past the first ok
// bytes, then fails with err.
type failingReader struct {
	r   io.ReaderAt
	ok  int64
	err error
}

func (f *failingReader) ReadAt(p []byte, off int64) (int, error) {
	if off+int64(len(p)) > f.ok {
		return 0, f.err
	}
	return f.r.ReadAt(p, off)
}

// A read that fails part-way is not a finding about the bytes: Scan
// returns the report of what was read with an error wrapping the failure
// (an error, or an end before the file's size), and a verdict of
// "dangerous" found before it still stands. Reads past the end that a
// truncated file asks for are no failure.
func TestScanReadFailure(t *testing.T) {
	diskOnFire := errors.New("disk on fire")
	for _, tc := range []struct {
		file      string
		dangerous bool
	}{
		{"torch/tiny_transformer.bin", false},
		{"torch/tiny_transformer_legacy.bin", false},
		{"malicious/torch_zip_os_system.bin", true},
	} {
		b, err := os.ReadFile(filepath.Join("..", "testdata", tc.file))
		if err != nil {
			t.Fatal(err)
		}
		rep, err := torch.Scan(bytes.NewReader(b), int64(len(b)), tc.file)
		if err != nil || rep.Verdict() == torch.VerdictInvalid {
			t.Fatalf("%s: %v %v", tc.file, rep.Verdict(), err)
		}
		for _, cause := range []error{diskOnFire, io.EOF} {
			ok := int64(len(b)) - 200 // the zip directory and the legacy storages are read late
			if tc.dangerous {
				ok = int64(len(b)) - 1 // the last byte is read only by some paths, after the pickle
			}
			rep, err := torch.Scan(&failingReader{bytes.NewReader(b), ok, cause}, int64(len(b)), tc.file)
			if rep == nil || err == nil {
				t.Errorf("%s, %v: %v %v, want a report and an error", tc.file, cause, rep, err)
				continue
			}
			want := cause
			if cause == io.EOF {
				want = io.ErrUnexpectedEOF
			}
			if !errors.Is(err, want) || !bytes.Contains([]byte(err.Error()), []byte(tc.file)) {
				t.Errorf("%s, %v: %v", tc.file, cause, err)
			}
			if tc.dangerous && rep.Verdict() != torch.VerdictDangerous {
				t.Errorf("%s, %v: %s, want dangerous still", tc.file, cause, rep.Verdict())
			}
		}
	}
	b, err := os.ReadFile(filepath.Join("..", "testdata", "broken", "truncated_zip_half.bin"))
	if err != nil {
		t.Fatal(err)
	}
	if rep, err := torch.Scan(bytes.NewReader(b), int64(len(b)), "half.bin"); err != nil || rep.Verdict() != torch.VerdictInvalid {
		t.Errorf("a truncated file: %v %v, want invalid and no error", rep.Verdict(), err)
	}
}
