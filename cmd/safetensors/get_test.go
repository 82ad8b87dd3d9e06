package main

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/gosafetensors/safetensors"
	"github.com/gosafetensors/safetensors/internal/npy"
)

// tensorBytes returns the bytes of a tensor, sliced when spec is not empty.
func tensorBytes(t *testing.T, file, name, spec string) (*safetensors.Tensor, []byte) {
	t.Helper()
	f, err := safetensors.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	tn, err := f.Tensor(name)
	if err != nil {
		t.Fatal(err)
	}
	if spec != "" {
		idx, err := safetensors.ParseSlice(spec)
		if err != nil {
			t.Fatal(err)
		}
		if tn, err = tn.Slice(idx...); err != nil {
			t.Fatal(err)
		}
	}
	b, err := tn.Copy()
	if err != nil {
		t.Fatal(err)
	}
	return tn, b
}

// readNpy parses an .npy file written by get.
func readNpy(t *testing.T, path string) (*npy.Header, []byte) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	h, err := npy.ReadHeader(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	if h.DataOffset%64 != 0 {
		t.Errorf("data starts at %d, not on a 64-byte boundary", h.DataOffset)
	}
	return h, b[h.DataOffset:]
}

func TestGetNpy(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		file, name, spec, descr string
		shape                   []int64
	}{
		{torchDir + "tiny_transformer.safetensors", "h.0.fc_in.weight", "", "<f4", []int64{16, 8}},
		{torchDir + "tiny_transformer.safetensors", "h.0.fc_in.weight", "0:3,::2", "<f4", []int64{3, 4}},
		{torchDir + "tiny_transformer.safetensors", "h.0.fc_in.weight", "-1", "<f4", []int64{8}},
		{torchDir + "tiny_transformer.safetensors", "position_ids", "", "<i8", []int64{1, 16}},
		{torchDir + "dtypes.safetensors", "c64", "", "<c8", []int64{3}},
		{torchDir + "dtypes.safetensors", "bool", "", "|b1", []int64{5}},
		{torchDir + "dtypes.safetensors", "f16", "", "<f2", []int64{6}},
		{filesDir + "scalar.safetensors", "", "", "", nil},
	} {
		if tc.file == filesDir+"scalar.safetensors" {
			f, err := safetensors.Open(tc.file)
			if err != nil {
				t.Fatal(err)
			}
			ti := f.Tensors[0]
			tc.name, tc.shape = ti.Name, []int64{}
			tc.descr, _ = npy.Descr(ti.DType)
			f.Close()
		}
		out := filepath.Join(dir, "out.npy")
		args := []string{"get", tc.file, tc.name, "-o", out, "--force"}
		if tc.spec != "" {
			args = append(args, "--slice", tc.spec)
		}
		code, _, errOut := runCLI(t, args...)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, errOut)
		}
		h, data := readNpy(t, out)
		_, want := tensorBytes(t, tc.file, tc.name, tc.spec)
		if h.Descr != tc.descr || h.FortranOrder || !slices.Equal(h.Shape, tc.shape) {
			t.Errorf("%v: header %+v", args, h)
		}
		if !bytes.Equal(data, want) {
			t.Errorf("%v: data differs", args)
		}
	}
}

func TestGetRawAndConversion(t *testing.T) {
	dir := t.TempDir()
	file := torchDir + "dtypes.safetensors"
	_, want := tensorBytes(t, file, "bf16", "")

	// BF16 has no NumPy dtype: .npy is refused with advice, nothing is left behind.
	out := filepath.Join(dir, "bf16.npy")
	code, _, errOut := runCLI(t, "get", file, "bf16", "-o", out)
	if code != 2 || !strings.Contains(errOut, "--raw") || !strings.Contains(errOut, "--as f32") {
		t.Errorf("bf16 .npy: exit %d, %q", code, errOut)
	}
	assertNoFiles(t, dir)

	for _, args := range [][]string{
		{"-o", filepath.Join(dir, "bf16.bin")},
		{"--raw", "-o", filepath.Join(dir, "bf16.out")},
	} {
		code, _, errOut = runCLI(t, append([]string{"get", file, "bf16"}, args...)...)
		if code != 0 {
			t.Fatalf("%v: exit %d %s", args, code, errOut)
		}
		got, _ := os.ReadFile(args[len(args)-1])
		if !bytes.Equal(got, want) {
			t.Errorf("%v: raw bytes differ", args)
		}
	}

	code, _, errOut = runCLI(t, "get", file, "bf16", "--as", "f32", "-o", out)
	if code != 0 {
		t.Fatalf("--as f32: exit %d %s", code, errOut)
	}
	h, data := readNpy(t, out)
	if h.Descr != "<f4" || !slices.Equal(h.Shape, []int64{2, 2}) || len(data) != 16 {
		t.Errorf("--as f32: %+v, %d bytes", h, len(data))
	}
	// bf16 -> f32 is exact: the high half of each float32 is the bf16.
	for i := range 4 {
		if data[4*i+2] != want[2*i] || data[4*i+3] != want[2*i+1] || data[4*i] != 0 || data[4*i+1] != 0 {
			t.Errorf("--as f32: element %d converted wrongly", i)
		}
	}
}

// TestGetLeavesNoTempOnFailure makes the final rename fail (the output is
// an existing directory) and checks that no temporary file remains.
func TestGetLeavesNoTempOnFailure(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "x.npy")
	if err := os.Mkdir(out, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(out, "keep"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, errOut := runCLI(t, "get", torchDir+"tiny_transformer.safetensors", "ln_f.bias", "-o", out)
	if code != 2 {
		t.Errorf("exit %d, %q", code, errOut)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 || entries[0].Name() != "x.npy" {
		t.Errorf("left behind: %v", entries)
	}
}

func assertNoFiles(t *testing.T, dir string) {
	t.Helper()
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("files left in %s: %v", dir, entries)
	}
}

func TestGetPrint(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		// numpy's array2string(x, separator=", ") (TestGetPrintsLikeNumpy
		// compares with numpy itself)
		{[]string{torchDir + "dtypes.safetensors", "f32"}, "[[ 0.0e+00, -0.0e+00,  1.5e+00,      inf],\n [    -inf,      nan,  1.4e-45,  3.4e+38]]\n"},
		{[]string{torchDir + "dtypes.safetensors", "bool"}, "[ True, False, False,  True,  True]\n"},
		{[]string{torchDir + "dtypes.safetensors", "i8"}, "[-128,   -1,    0,    1,  127]\n"},
		{[]string{torchDir + "dtypes.safetensors", "c64"}, "[ 1. +2.j  , -0.5-1.25j,  inf+0.j  ]\n"},
		{[]string{torchDir + "dtypes.safetensors", "f32", "--slice", "1,2"}, "1.e-45\n"},
		{[]string{torchDir + "dtypes.safetensors", "f32", "--slice", "[1, 2]"}, "1.e-45\n"},
		{[]string{torchDir + "dtypes.safetensors", "f32", "--slice", "..., 2"}, "[1.5e+00, 1.4e-45]\n"},
		{[]string{torchDir + "dtypes.safetensors", "f32", "--slice", "0:0"}, "[]\n"},
		{[]string{torchDir + "tiny_transformer.safetensors", "position_ids", "--slice", "0, 2:5", "--as", "f32"}, "[2., 3., 4.]\n"},
	} {
		code, out, errOut := runCLI(t, append([]string{"get"}, tc.args...)...)
		if code != 0 || out != tc.want {
			t.Errorf("get %v: exit %d\n%s\nwant\n%s%s", tc.args, code, out, tc.want, errOut)
		}
	}
	// Over the limit: summarised with "...", and said so on stderr.
	code, out, errOut := runCLI(t, "get", torchDir+"tiny_transformer.safetensors", "h.0.fc_in.weight", "--limit", "10")
	if code != 0 || !strings.Contains(out, " ...,\n") || strings.Count(out, "\n") != 13 || !strings.Contains(errOut, "summarised") {
		t.Errorf("large tensor: exit %d\n%s%s", code, out, errOut)
	}
}

// A summarised print reads only the elements it shows: printing a 16 MiB
// tensor over HTTP moves a few KiB of it.
func TestGetPrintReadsOnlyWhatItShows(t *testing.T) {
	dir := t.TempDir()
	data := make([]byte, 2048*2048*4)
	if err := safetensors.WriteFile(filepath.Join(dir, "big.safetensors"), []safetensors.TensorData{{Name: "w", DType: safetensors.F32, Shape: []int64{2048, 2048}, Data: data}}, nil); err != nil {
		t.Fatal(err)
	}
	var sent atomic.Int64
	files := withETag(dir)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		files.ServeHTTP(countingResponse{w, &sent}, r)
	}))
	defer srv.Close()
	code, out, errOut := runCLI(t, "get", srv.URL+"/big.safetensors", "w")
	if code != 0 || !strings.Contains(out, "...") {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
	if n := sent.Load(); n > 256<<10 {
		t.Errorf("printing 36 values moved %d bytes of a %d-byte tensor", n, len(data))
	}
}

type countingResponse struct {
	http.ResponseWriter
	n *atomic.Int64
}

func (c countingResponse) Write(p []byte) (int, error) {
	c.n.Add(int64(len(p)))
	return c.ResponseWriter.Write(p)
}

func TestGetErrors(t *testing.T) {
	code, _, errOut := runCLI(t, "get", torchDir+"tiny_transformer.safetensors", "fc_in")
	if code != 2 || !strings.Contains(errOut, "TensorNotFound") || !strings.Contains(errOut, "did you mean: h.0.fc_in.bias") {
		t.Errorf("missing tensor: exit %d %q", code, errOut)
	}
	code, _, errOut = runCLI(t, "get", torchDir+"tiny_transformer.safetensors", "ln_f.bias", "--slice", "9")
	if code != 2 || !strings.Contains(errOut, "SliceOutOfRange") {
		t.Errorf("slice out of range: exit %d %q", code, errOut)
	}
	code, _, errOut = runCLI(t, "get", torchDir+"tiny_transformer.safetensors", "ln_f.bias", "--slice", "a:b")
	if code != 2 || !strings.Contains(errOut, "--slice") {
		t.Errorf("bad slice: exit %d %q", code, errOut)
	}
	code, _, _ = runCLI(t, "get", filesDir+"offsets_gap.safetensors", "b")
	if code != 1 {
		t.Errorf("invalid file: exit %d", code)
	}
	code, _, _ = runCLI(t, "get", filesDir+"missing.safetensors", "b")
	if code != 2 {
		t.Errorf("missing file: exit %d", code)
	}
}

func TestGetStdout(t *testing.T) {
	code, out, _ := runCLI(t, "get", torchDir+"dtypes.safetensors", "i8", "-o", "-", "--raw")
	if code != 0 || out != "\x80\xff\x00\x01\x7f" {
		t.Errorf("raw to stdout: exit %d %q", code, out)
	}
	code, out, _ = runCLI(t, "get", torchDir+"dtypes.safetensors", "i8", "-o", "-")
	if code != 0 || !strings.HasPrefix(out, npy.Magic) || !strings.HasSuffix(out, "\x80\xff\x00\x01\x7f") {
		t.Errorf("npy to stdout: exit %d %q", code, out)
	}
}

func TestGetOverwriteRuleAndDevices(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "x.npy")
	os.WriteFile(out, []byte("keep"), 0o644)
	code, _, errOut := runCLI(t, "get", torchDir+"tiny_transformer.safetensors", "ln_f.bias", "-o", out)
	if b, _ := os.ReadFile(out); code != 2 || string(b) != "keep" || !strings.Contains(errOut, "--force") {
		t.Fatalf("existing output: exit %d %q, file %q", code, errOut, b)
	}
	if code, _, errOut := runCLI(t, "get", torchDir+"tiny_transformer.safetensors", "ln_f.bias", "-o", out, "-f"); code != 0 {
		t.Fatalf("--force: exit %d %q", code, errOut)
	}
	// a symlink to a device is written through, never replaced
	link := filepath.Join(dir, "stdout")
	if err := os.Symlink("/dev/null", link); err != nil {
		t.Skip(err)
	}
	if code, _, errOut := runCLI(t, "get", torchDir+"tiny_transformer.safetensors", "ln_f.bias", "-o", link, "--raw"); code != 0 {
		t.Fatalf("-o symlink to /dev/null: exit %d %q", code, errOut)
	}
	if st, err := os.Lstat(link); err != nil || st.Mode()&os.ModeSymlink == 0 {
		t.Fatal("the symlink was replaced by a regular file")
	}
}

// A tied weight removed on conversion is found through __metadata__.
func TestGetRemovedAlias(t *testing.T) {
	code, out, errOut := runCLI(t, "get", torchDir+"tied_weights.safetensors", "model.embed_tokens.weight", "--slice", "0")
	if code != 0 || !strings.Contains(errOut, "lm_head.weight") {
		t.Fatalf("exit %d %q %q", code, out, errOut)
	}
}
