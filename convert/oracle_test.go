package convert_test

// Conversion judged by real torch: for every checkpoint torch.load loads
// with allowlisted globals only (internal/torchoracle), every tensor convert
// writes equals the one torch yields under the same name (dtype, shape and
// the SHA-256 of its C-contiguous bytes, read back from the output file),
// and every tensor torch yields is written, dropped as an alias of a written
// identical view, or reported as skipped. The real checkpoints of
// testdata/torch, testdata/oracle, testdata/crafted and testdata/unsupported
// are judged, then mutants of the real ones that scan calls clean
// (GOSAFETENSORS_ORACLE_CONVERT_MUTANTS of them, default 15).

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/gosafetensors/safetensors"
	"github.com/gosafetensors/safetensors/convert"
	"github.com/gosafetensors/safetensors/internal/torchoracle"
	"github.com/gosafetensors/safetensors/torch"
)

// convertAgainstTorch converts path and compares the output with what the
// oracle saw; it returns "" when they agree, a note when the comparison
// does not apply (torch did not load it with allowlisted globals, convert
// refused), or a failure.
func convertAgainstTorch(t *testing.T, path string, r *torchoracle.Result, opts ...convert.Option) (fail, note string) {
	t.Helper()
	if r.Timeout || !r.Loaded || r.OffAllowlist() || r.TorchScript {
		return "", "torch does not load it with allowlisted globals only: " + r.Error
	}
	if len(r.Events) > 0 {
		return fmt.Sprintf("the oracle's backstop fired: %v", r.Events), ""
	}
	out := filepath.Join(t.TempDir(), "out.safetensors")
	rep, err := convert.File(context.Background(), path, out, opts...)
	if err != nil {
		return "", "convert refuses what torch loads: " + err.Error()
	}
	byName := map[string]torchoracle.Tensor{}
	for _, tn := range r.Tensors {
		byName[tn.Name] = tn
	}
	f, err := safetensors.Open(out)
	if err != nil {
		return fmt.Sprintf("output does not open: %v", err), ""
	}
	defer f.Close()
	var fails []string
	accounted := map[string]bool{}
	check := func(source string, tr convert.TensorReport) {
		want, ok := byName[source]
		if !ok {
			fails = append(fails, fmt.Sprintf("%q written (from %q) but torch yields no tensor %q", tr.Name, source, source))
			return
		}
		accounted[source] = true
		if want.OptimizerState {
			fails = append(fails, fmt.Sprintf("%q written (from %q), which torch's objects show is optimizer state", tr.Name, source))
		}
		st, err := f.Tensor(tr.Name)
		if err != nil {
			fails = append(fails, fmt.Sprintf("%q: %v", tr.Name, err))
			return
		}
		b, err := st.Copy()
		if err != nil {
			fails = append(fails, fmt.Sprintf("%q: %v", tr.Name, err))
			return
		}
		sum := sha256.Sum256(b)
		got := hex.EncodeToString(sum[:])
		if st.DType.String() != want.DType || !slices.Equal(st.Shape, want.Shape) || got != want.SHA256 {
			fails = append(fails, fmt.Sprintf("%q (from %q): wrote %s %v sha256 %.12s, torch yields %s %v sha256 %.12s",
				tr.Name, source, st.DType, st.Shape, got, want.DType, want.Shape, want.SHA256))
		}
	}
	written := map[string]convert.TensorReport{}
	for _, tr := range rep.Tensors {
		written[tr.Name] = tr
		check(tr.Source, tr)
	}
	for _, a := range rep.Removed {
		kept, ok := written[a.Kept]
		if !ok {
			fails = append(fails, fmt.Sprintf("alias %q -> %q: kept name not written", a.Name, a.Kept))
			continue
		}
		source := a.Name
		if rep.Unwrapped != "" {
			source = rep.Unwrapped + "." + a.Name
		}
		check(source, kept)
	}
	for _, s := range rep.Skipped {
		if s.Kind == "tensor" {
			accounted[s.Name] = true
		}
	}
	var missing []string
	for _, tn := range r.Tensors {
		if !accounted[tn.Name] {
			missing = append(missing, tn.Name)
		}
	}
	if len(missing) > 0 {
		fails = append(fails, fmt.Sprintf("torch yields %q, neither written, aliased nor reported skipped", missing))
	}
	return strings.Join(fails, "; "), ""
}

func checkpointFiles(t *testing.T) []string {
	var paths []string
	for _, dir := range []string{"torch", "oracle", "crafted", "unsupported"} {
		m, err := filepath.Glob(filepath.Join("..", "testdata", dir, "*"))
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range m {
			if ext := filepath.Ext(p); ext == ".json" || ext == ".safetensors" || ext == ".py" || ext == ".md" {
				continue
			}
			if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() {
				paths = append(paths, p)
			}
		}
	}
	sort.Strings(paths)
	return paths
}

func TestConvertMatchesTorch(t *testing.T) {
	o := torchoracle.Shared(t, torchoracle.Options{Allow: torchoracle.ScanAllowlist})
	compared := 0
	for _, p := range checkpointFiles(t) {
		r, err := o.Load(p)
		if err != nil {
			t.Fatal(err)
		}
		fail, note := convertAgainstTorch(t, p, r)
		rel := strings.TrimPrefix(p, "../testdata/")
		switch {
		case fail != "":
			t.Errorf("%s: %s", rel, fail)
		case note == "":
			compared++
		case !strings.HasPrefix(note, "torch does not load"):
			t.Logf("note: %s: %s", rel, note)
		}
	}
	t.Logf("%d checkpoints converted and compared with torch", compared)
	if compared < 20 {
		t.Errorf("only %d checkpoints compared: the corpus or the oracle is broken", compared)
	}
}

// TestConvertMatchesTorchAllow: with globals allowed beyond the allowlist
// (torch's hook allows them too), the tensors convert writes are torch's.
func TestConvertMatchesTorchAllow(t *testing.T) {
	cases := []struct {
		file  string
		allow []string
	}{
		{"argparse_namespace.pt", []string{"argparse.Namespace"}},
		{"numpy_scalar.pt", []string{"numpy.core.multiarray.scalar", "numpy.dtype"}},
		{"numpy_array.pt", []string{"numpy.core.multiarray._reconstruct", "numpy.ndarray", "numpy.dtype"}},
	}
	allow := slices.Clone(torchoracle.ScanAllowlist)
	for _, c := range cases {
		allow = append(allow, c.allow...)
	}
	o := torchoracle.Shared(t, torchoracle.Options{Allow: allow})
	for _, c := range cases {
		p := "../testdata/oracle/" + c.file
		r, err := o.Load(p)
		if err != nil {
			t.Fatal(err)
		}
		if !r.Loaded {
			t.Fatalf("%s: torch does not load it with %v allowed: %s", c.file, c.allow, r.Error)
		}
		fail, note := convertAgainstTorch(t, p, r, convert.WithAllow(c.allow...))
		if fail != "" || note != "" {
			t.Errorf("%s: %s%s", c.file, fail, note)
		}
	}
}

// TestConvertMatchesTorchMutants converts mutants of real checkpoints that
// scan calls clean and compares them with torch.
func TestConvertMatchesTorchMutants(t *testing.T) {
	want := 15
	if s := os.Getenv("GOSAFETENSORS_ORACLE_CONVERT_MUTANTS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 {
			t.Fatalf("GOSAFETENSORS_ORACLE_CONVERT_MUTANTS=%q: want a count", s)
		}
		want = n
	}
	if want == 0 {
		t.Skip("GOSAFETENSORS_ORACLE_CONVERT_MUTANTS=0")
	}
	o := torchoracle.Shared(t, torchoracle.Options{Allow: torchoracle.ScanAllowlist})
	bases, err := torchoracle.LoadBases(torchoracle.CorpusPaths("../testdata"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	const seed = 7
	found, compared := 0, 0
	for i := 0; found < want && i < 40*want; i++ {
		data, desc := torchoracle.Mutant(seed, i, bases)
		p := filepath.Join(dir, fmt.Sprintf("mutant-%d-%d.pt", seed, i))
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		rep, err := torch.ScanFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if rep.Verdict() != torch.VerdictClean {
			continue
		}
		found++
		r, err := o.Load(p)
		if err != nil {
			t.Fatal(err)
		}
		fail, note := convertAgainstTorch(t, p, r)
		switch {
		case fail != "":
			t.Errorf("mutant %d of seed %d: %s\n\tmutations: %s", i, seed, fail, desc)
		case note != "":
			t.Logf("note: mutant %d: %s (%s)", i, note, desc)
		default:
			compared++
		}
	}
	t.Logf("%d clean mutants, %d converted and compared with torch", found, compared)
	if found < want {
		t.Errorf("only %d clean mutants found", found)
	}
}

func TestMain(m *testing.M) {
	code := m.Run()
	torchoracle.CloseShared()
	os.Exit(code)
}
