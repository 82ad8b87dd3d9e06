package convert

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash/maphash"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/gosafetensors/safetensors"
	"github.com/gosafetensors/safetensors/torch"
	"github.com/gosafetensors/safetensors/torch/torchtest"
)

type indexEntry struct {
	File            string                  `json:"file"`
	Sidecar         string                  `json:"sidecar"`
	Expect          string                  `json:"expect"`
	MustNameOneOf   []string                `json:"must_name_one_of"`
	ExpectedTensors map[string]tensorDigest `json:"expected_tensors"`
}

type tensorDigest struct {
	DType         string  `json:"dtype"`
	Shape         []int64 `json:"shape"`
	SHA256        string  `json:"sha256"`
	StorageKey    string  `json:"storage_key"`
	StorageOffset int64   `json:"storage_offset"`
	Stride        []int64 `json:"stride"`
}

type reference struct {
	File    string `json:"file"`
	Error   string `json:"error"`
	Summary struct {
		Metadata map[string]string       `json:"metadata"`
		Tensors  map[string]tensorDigest `json:"tensors"`
	} `json:"summary"`
}

type sidecar struct {
	Tensors       map[string]tensorDigest `json:"tensors"`
	StateDictPath string                  `json:"state_dict_path"`
	MustRefuse    []string                `json:"must_refuse_naming_one_of"`
	References    map[string]reference    `json:"safetensors_references"`
}

func readJSON(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

func readIndexJSON(t *testing.T, dir string) []indexEntry {
	var idx []indexEntry
	readJSON(t, filepath.Join(dir, "INDEX.json"), &idx)
	if len(idx) == 0 {
		t.Fatalf("%s/INDEX.json lists nothing", dir)
	}
	return idx
}

// outTensor is a tensor read back from an output file.
type outTensor struct {
	DType  string
	Shape  []int64
	SHA256 string
	Data   []byte
}

func readOutput(t *testing.T, path string) (map[string]outTensor, map[string]string) {
	t.Helper()
	f, err := safetensors.Open(path)
	if err != nil {
		t.Fatalf("reopening output: %v", err)
	}
	defer f.Close()
	out := map[string]outTensor{}
	for _, name := range f.Names() {
		tt, err := f.Tensor(name)
		if err != nil {
			t.Fatal(err)
		}
		b, err := tt.Copy()
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(b)
		out[name] = outTensor{DType: tt.DType.String(), Shape: tt.Shape, SHA256: hex.EncodeToString(sum[:]), Data: b}
	}
	return out, f.Metadata
}

func shapeEq(a, b []int64) bool { return len(a) == len(b) && (len(a) == 0 || slices.Equal(a, b)) }

// hfDifferences documents, per fixture, the names Hugging Face's convert.py
// drops but this package writes: views of a shared storage that are not the
// identical view of the kept name. Writing them loses nothing; dropping
// them (as convert.py does) loses the view's shape.
var hfDifferences = map[string][]string{
	// lm_head.bias_view is a [2,5] view of the [10] lm_head.bias storage.
	// convert.py keeps lm_head.bias and records "lm_head.bias_view":
	// "lm_head.bias" although the shapes differ; we write both.
	"tied_weights.pt":        {"lm_head.bias_view"},
	"tied_weights_legacy.pt": {"lm_head.bias_view"},
}

// renamedByUs documents names this package writes differently from the
// shared fixtures' references: a bare tensor root is "" there and "tensor"
// here (issue 14.5: a name of "" is legal but useless).
var renamedByUs = map[string]map[string]string{"bare_tensor.pt": {"": "tensor"}}

func renameKeys[V any](m map[string]V, ren map[string]string) map[string]V {
	for from, to := range ren {
		if v, ok := m[from]; ok {
			delete(m, from)
			m[to] = v
		}
	}
	return m
}

func TestConvertFixtures(t *testing.T) {
	dir := "../testdata/torch"
	for _, e := range readIndexJSON(t, dir) {
		if e.Expect != "convert" {
			continue
		}
		t.Run(e.File, func(t *testing.T) {
			var sc sidecar
			readJSON(t, filepath.Join(dir, e.Sidecar), &sc)
			renameKeys(sc.Tensors, renamedByUs[e.File])
			in := filepath.Join(dir, e.File)
			tmp := t.TempDir()

			// Default policy.
			out := filepath.Join(tmp, "default.safetensors")
			rep, err := File(context.Background(), in, out, WithDigests(true))
			if err != nil {
				t.Fatalf("convert: %v", err)
			}
			if !rep.Verified {
				t.Error("report says not verified")
			}
			if rep.Unwrapped != sc.StateDictPath {
				t.Errorf("unwrapped %q, sidecar state_dict_path %q", rep.Unwrapped, sc.StateDictPath)
			}
			got, md := readOutput(t, out)
			checkAgainstSidecar(t, sc, got, md, rep)

			hf, hasHF := sc.References["hf_convert"]
			mat, hasMat := sc.References["materialized"]
			switch {
			case hasHF && hf.File != "":
				// convert.py succeeded: equal to its output except the
				// documented differences.
				ref := renameKeys(readRef(t, dir, hf.File), renamedByUs[e.File])
				extra := hfDifferences[e.File]
				wantMD := maps.Clone(hf.Summary.Metadata)
				for _, x := range extra {
					delete(wantMD, x)
				}
				compareTensors(t, "hf reference", ref, got, extra)
				if !maps.Equal(md, wantMD) {
					t.Errorf("metadata %v, want %v (hf %v minus documented differences)", md, wantMD, hf.Summary.Metadata)
				}
			case hasMat && mat.File != "":
				// convert.py failed (views that are not complete, or not a
				// dict); our default output is the materialized reference
				// minus the identical aliases we dropped, recorded in
				// __metadata__.
				ref := renameKeys(readRef(t, dir, mat.File), renamedByUs[e.File])
				wantMD := map[string]string{"format": "pt"}
				for _, a := range rep.Removed {
					delete(ref, a.Name)
					wantMD[a.Name] = a.Kept
				}
				compareTensors(t, "materialized reference", ref, got, nil)
				if !maps.Equal(md, wantMD) {
					t.Errorf("metadata %v, want %v", md, wantMD)
				}
			default:
				t.Fatal("sidecar has no usable reference")
			}

			// KeepAliases: the materialized reference, exactly.
			out2 := filepath.Join(tmp, "keep.safetensors")
			rep2, err := File(context.Background(), in, out2, WithKeepAliases(true))
			if err != nil {
				t.Fatalf("convert --keep-aliases: %v", err)
			}
			if len(rep2.Removed) != 0 {
				t.Errorf("keep-aliases removed %v", rep2.Removed)
			}
			got2, md2 := readOutput(t, out2)
			refFile := mat.File
			if refFile == "" {
				refFile = hf.File // no aliases in this fixture: both policies agree
				if len(hf.Summary.Metadata) != 1 {
					t.Fatalf("no materialized reference, and the hf one dropped aliases: %v", hf.Summary.Metadata)
				}
			}
			compareTensors(t, "materialized reference", renameKeys(readRef(t, dir, refFile), renamedByUs[e.File]), got2, nil)
			if !maps.Equal(md2, map[string]string{"format": "pt"}) {
				t.Errorf("keep-aliases metadata %v", md2)
			}
		})
	}
}

func readRef(t *testing.T, dir, file string) map[string]outTensor {
	t.Helper()
	ref, _ := readOutput(t, filepath.Join(dir, file))
	return ref
}

// compareTensors checks that got holds exactly want's tensors (names, dtype,
// shape, bytes) plus the names in extra.
func compareTensors(t *testing.T, what string, want, got map[string]outTensor, extra []string) {
	t.Helper()
	for name, w := range want {
		g, ok := got[name]
		if !ok {
			t.Errorf("%s: tensor %q missing from the output", what, name)
			continue
		}
		if g.DType != w.DType || !shapeEq(g.Shape, w.Shape) || string(g.Data) != string(w.Data) {
			t.Errorf("%s: tensor %q: got %s %v %s, want %s %v %s", what, name, g.DType, g.Shape, g.SHA256[:12], w.DType, w.Shape, w.SHA256[:12])
		}
	}
	for name := range got {
		if _, ok := want[name]; !ok && !slices.Contains(extra, name) {
			t.Errorf("%s: unexpected tensor %q in the output", what, name)
		}
	}
}

// checkAgainstSidecar checks every output tensor against the sidecar and
// that every sidecar tensor of the state dict is either written or an
// identical alias of a written one.
func checkAgainstSidecar(t *testing.T, sc sidecar, got map[string]outTensor, md map[string]string, rep *Report) {
	t.Helper()
	full := func(name string) string {
		if sc.StateDictPath == "" {
			return name
		}
		return sc.StateDictPath + "." + name
	}
	for name, g := range got {
		want, ok := sc.Tensors[full(name)]
		if !ok {
			t.Errorf("output tensor %q is not in the sidecar", name)
			continue
		}
		if g.DType != want.DType || !shapeEq(g.Shape, want.Shape) || g.SHA256 != want.SHA256 {
			t.Errorf("tensor %q: got %s %v %s, sidecar %s %v %s", name, g.DType, g.Shape, g.SHA256, want.DType, want.Shape, want.SHA256)
		}
	}
	for _, r := range rep.Tensors {
		if g := got[r.Name]; r.SHA256 != g.SHA256 {
			t.Errorf("report digest of %q %s, file %s", r.Name, r.SHA256, g.SHA256)
		}
	}
	for full, want := range sc.Tensors {
		name, ok := strings.CutPrefix(full, sc.StateDictPath+".")
		if sc.StateDictPath == "" {
			name, ok = full, !strings.HasPrefix(full, "optimizer.")
		}
		if !ok {
			continue
		}
		if _, written := got[name]; written {
			continue
		}
		kept, ok := md[name]
		if !ok {
			t.Errorf("sidecar tensor %q neither written nor recorded as an alias", full)
			continue
		}
		k := sc.Tensors[fullName(sc, kept)]
		if k.StorageKey != want.StorageKey || k.StorageOffset != want.StorageOffset || !shapeEq(k.Shape, want.Shape) ||
			!shapeEq(k.Stride, want.Stride) || k.SHA256 != want.SHA256 {
			t.Errorf("alias %q -> %q is not the identical view", name, kept)
		}
	}
}

func fullName(sc sidecar, name string) string {
	if sc.StateDictPath == "" {
		return name
	}
	return sc.StateDictPath + "." + name
}

func TestSkippedEntries(t *testing.T) {
	rep, err := PlanFile(context.Background(), "../testdata/torch/checkpoint_nested.pt")
	if err != nil {
		t.Fatal(err)
	}
	reasons := map[string]string{}
	for _, s := range rep.Skipped {
		reasons[s.Name] = s.Reason
	}
	if reasons["epoch"] == "" || reasons["optimizer.state.0.exp_avg"] != "optimizer state" {
		t.Errorf("skipped: %+v", rep.Skipped)
	}
	if rep.Output != "" || rep.Tensors[0].SHA256 != "" {
		t.Error("a plan has an output or digests")
	}
	rep, err = PlanFile(context.Background(), "../testdata/torch/non_tensor_values.pt")
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]string{}
	for _, s := range rep.Skipped {
		kinds[s.Name] = s.Kind
	}
	for name, kind := range map[string]string{"blob": "bytes", "name": "str", "pi": "float", "big": "int", "none": "none", "flag": "bool"} {
		if kinds[name] != kind {
			t.Errorf("skipped %q kind %q, want %q (all: %v)", name, kinds[name], kind, kinds)
		}
	}
}

func TestKeyOption(t *testing.T) {
	rep, err := PlanFile(context.Background(), "../testdata/torch/checkpoint_nested.pt", WithKey("optimizer.state"))
	if err != nil {
		t.Fatal(err)
	}
	if rep.Unwrapped != "optimizer.state" || len(rep.Tensors) == 0 || !strings.HasPrefix(rep.Tensors[0].Name, "0.") && !strings.Contains(rep.Tensors[0].Name, ".") {
		t.Errorf("unwrapped %q tensors %v", rep.Unwrapped, rep.Tensors)
	}
	_, err = PlanFile(context.Background(), "../testdata/torch/checkpoint_nested.pt", WithKey("nope"))
	if !errors.Is(err, ErrInput) || !strings.Contains(err.Error(), `"state_dict"`) {
		t.Errorf("missing key: %v", err)
	}
	// The root of a plain state dict whose names start with "model." is not
	// unwrapped.
	rep, err = PlanFile(context.Background(), "../testdata/torch/tied_weights.pt")
	if err != nil || rep.Unwrapped != "" {
		t.Errorf("tied_weights unwrapped %q, %v", rep.Unwrapped, err)
	}
}

func TestPreferDiscard(t *testing.T) {
	in := "../testdata/torch/tied_weights.pt"
	for _, tc := range []struct {
		opt  []Option
		kept string
	}{
		{nil, "lm_head.weight"},
		{[]Option{WithPrefer("model.embed_tokens.weight")}, "model.embed_tokens.weight"},
		{[]Option{WithDiscard("lm_head.weight")}, "model.embed_tokens.weight"},
		{[]Option{WithDiscard("lm_head.weight", "model.embed_tokens.weight")}, "lm_head.weight"},
		{[]Option{WithDiscard("lm_head.weight"), WithDiscard("model.embed_tokens.weight")}, "lm_head.weight"},
		{[]Option{WithPrefer("lm_head.weight"), WithDiscard("model.embed_tokens.weight")}, "lm_head.weight"},
	} {
		out := filepath.Join(t.TempDir(), "x.safetensors")
		rep, err := File(context.Background(), in, out, tc.opt...)
		if err != nil {
			t.Fatal(err)
		}
		if len(rep.Removed) != 1 || rep.Removed[0].Kept != tc.kept {
			t.Errorf("%+v: removed %v, want kept %s", tc.opt, rep.Removed, tc.kept)
		}
		_, md := readOutput(t, out)
		if len(md) != 2 || md[rep.Removed[0].Name] != tc.kept {
			t.Errorf("%+v: metadata %v", tc.opt, md)
		}
	}
}

func TestOverwriteAndSameFile(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "x.safetensors")
	os.WriteFile(out, []byte("old"), 0o666)
	if _, err := File(context.Background(), "../testdata/torch/dtypes.pt", out); !errors.Is(err, ErrExists) {
		t.Fatalf("existing output: %v", err)
	}
	if b, _ := os.ReadFile(out); string(b) != "old" {
		t.Fatal("existing output changed")
	}
	if _, err := File(context.Background(), "../testdata/torch/dtypes.pt", out, WithOverwrite(true)); err != nil {
		t.Fatal(err)
	}
	in := filepath.Join(dir, "in.pt")
	copyFile(t, "../testdata/torch/dtypes.pt", in)
	if _, err := File(context.Background(), in, in, WithOverwrite(true)); !errors.Is(err, ErrOutputIsInput) {
		t.Errorf("in == out: %v", err)
	}
	assertOnly(t, dir, "in.pt", "x.safetensors")
}

func copyFile(t testing.TB, from, to string) {
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o666); err != nil {
		t.Fatal(err)
	}
}

// assertOnly checks dir holds exactly names (no temporary files).
func assertOnly(t *testing.T, dir string, names ...string) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range ents {
		got = append(got, e.Name())
	}
	slices.Sort(got)
	slices.Sort(names)
	if !slices.Equal(got, names) {
		t.Errorf("%s holds %v, want %v", dir, got, names)
	}
}

func TestCorruptStorageLeavesNothing(t *testing.T) {
	// Flip a byte inside a storage record: the zip CRC-32 check fails while
	// the tensor is being written, and no output may remain.
	dir := t.TempDir()
	in := filepath.Join(dir, "bad.pt")
	b, err := os.ReadFile("../testdata/torch/tiny_transformer.bin")
	if err != nil {
		t.Fatal(err)
	}
	c, err := torch.Open("../testdata/torch/tiny_transformer.bin")
	if err != nil {
		t.Fatal(err)
	}
	sec := c.Tensors()[len(c.Tensors())-1].Storage.Section()
	var off int64
	for {
		r, o, _ := sec.Outer()
		off += o
		inner, ok := r.(*io.SectionReader)
		if !ok {
			break
		}
		sec = inner
	}
	c.Close()
	b[off+1] ^= 0xff
	os.WriteFile(in, b, 0o666)
	out := filepath.Join(dir, "out.safetensors")
	_, err = File(context.Background(), in, out)
	if !errors.Is(err, torch.ErrCorrupt) {
		t.Fatalf("corrupt storage: %v", err)
	}
	assertOnly(t, dir, "bad.pt")
}

const pwnedMarker = "/tmp/pwned_marker"

func TestRefuse(t *testing.T) {
	if _, err := os.Stat(pwnedMarker); err == nil {
		t.Fatalf("%s exists before the test; remove it", pwnedMarker)
	}
	defer func() {
		if _, err := os.Stat(pwnedMarker); err == nil {
			t.Errorf("%s was created", pwnedMarker)
		}
	}()
	for _, cat := range []string{"malicious", "unsupported", "broken"} {
		dir := filepath.Join("../testdata", cat)
		for _, e := range readIndexJSON(t, dir) {
			t.Run(cat+"/"+e.File, func(t *testing.T) {
				tmp := t.TempDir()
				out := filepath.Join(tmp, "out.safetensors")
				rep, err := File(context.Background(), filepath.Join(dir, e.File), out)
				names := e.MustNameOneOf
				if e.Sidecar != "" || cat == "unsupported" {
					var sc sidecar
					readJSON(t, filepath.Join(dir, e.File+".json"), &sc)
					names = append(names, sc.MustRefuse...)
				}
				switch e.Expect {
				case "convert_or_refuse":
					if err != nil {
						checkClearError(t, err)
						assertOnly(t, tmp)
						return
					}
					got, _ := readOutput(t, out)
					if len(got) != len(e.ExpectedTensors) {
						t.Errorf("got %d tensors, want %d", len(got), len(e.ExpectedTensors))
					}
					for name, w := range e.ExpectedTensors {
						g := got[name]
						if g.DType != w.DType || !shapeEq(g.Shape, w.Shape) || g.SHA256 != w.SHA256 {
							t.Errorf("tensor %q: got %+v, want %+v", name, g, w)
						}
					}
				case "refuse_or_tolerate":
					if err != nil {
						checkClearError(t, err)
						assertOnly(t, tmp)
					} else if rep == nil {
						t.Error("no error and no report")
					}
				default:
					if err == nil {
						t.Fatalf("converted (%d tensors), want refusal (%s)", len(rep.Tensors), e.Expect)
					}
					checkClearError(t, err)
					assertOnly(t, tmp)
					if len(names) > 0 && !slices.ContainsFunc(names, func(n string) bool { return strings.Contains(err.Error(), n) }) {
						t.Errorf("error does not name one of %v: %v", names, err)
					}
					switch e.Expect {
					case "refuse_global":
						if !errors.Is(err, torch.ErrNotAllowed) && !errors.Is(err, torch.ErrUnsupported) {
							t.Errorf("refuse_global: error kind: %v", err)
						}
					case "refuse_unsupported":
						if !errors.Is(err, torch.ErrUnsupported) && !errors.Is(err, torch.ErrNotAllowed) {
							t.Errorf("refuse_unsupported: error kind: %v", err)
						}
					case "refuse_corrupt":
						if !errors.Is(err, torch.ErrCorrupt) && !errors.Is(err, torch.ErrUnsupported) && !errors.Is(err, torch.ErrLimit) {
							t.Errorf("refuse_corrupt: error kind: %v", err)
						}
					}
				}
			})
		}
	}
}

func checkClearError(t *testing.T, err error) {
	t.Helper()
	var te *torch.Error
	if !errors.As(err, &te) && !errors.Is(err, ErrInput) {
		t.Errorf("not a *torch.Error or ErrInput: %T %v", err, err)
	}
	if len(err.Error()) < 10 {
		t.Errorf("unhelpful error %q", err)
	}
}

func TestOutputName(t *testing.T) {
	for in, want := range map[string]string{
		"pytorch_model.bin":                   "model.safetensors",
		"pytorch_model-00001-of-00002.bin":    "model-00001-of-00002.safetensors",
		"dir/x.pt":                            "dir/x.safetensors",
		"a.pth":                               "a.safetensors",
		"b.ckpt":                              "b.safetensors",
		"weights":                             "weights.safetensors",
		"v1.5.model.BIN":                      "v1.5.model.safetensors",
		"consolidated.00.pth":                 "consolidated.00.safetensors",
		"pytorch_model.bin.index.json":        "model.safetensors.index.json",
		"sub/pytorch_model.pt.index.json":     "sub/model.safetensors.index.json",
		"diffusion_pytorch_model.bin":         "diffusion_pytorch_model.safetensors",
		"diffusion_pytorch_model.bin.ignored": "diffusion_pytorch_model.bin.ignored.safetensors",
	} {
		got := OutputName(in)
		if strings.HasSuffix(in, ".index.json") {
			got = IndexOutputName(in)
		}
		if got != want {
			t.Errorf("%s -> %s, want %s", in, got, want)
		}
	}
}

func TestProgress(t *testing.T) {
	var last, total int64
	calls := 0
	rep, err := File(context.Background(), "../testdata/torch/many_tensors.pt", filepath.Join(t.TempDir(), "x.safetensors"), WithProgress(func(w, tot int64) { calls++; last, total = w, tot }))
	if err != nil {
		t.Fatal(err)
	}
	if calls == 0 || last != rep.Bytes || total != rep.Bytes {
		t.Errorf("progress: %d calls, last %d/%d, bytes %d", calls, last, total, rep.Bytes)
	}
}

func TestDirSharded(t *testing.T) {
	dir := t.TempDir()
	shard1, shard2 := "pytorch_model-00001-of-00002.bin", "pytorch_model-00002-of-00002.bin"
	copyFile(t, "../testdata/torch/tiny_transformer.bin", filepath.Join(dir, shard1))
	writeTorchZip(t, filepath.Join(dir, shard2), []torchtest.Tensor{synth("extra.a", "F32", 1, 3, 4), synth("extra.b", "BF16", 2, 5)})
	copyFile(t, "../testdata/malicious/raw_pickle_os_system.bin", filepath.Join(dir, "training_args.bin"))
	var sc sidecar
	readJSON(t, "../testdata/torch/tiny_transformer.bin.json", &sc)
	wmap := map[string]string{"extra.a": shard2, "extra.b": shard2}
	for name := range sc.Tensors {
		wmap[name] = shard1
	}
	idx, _ := json.Marshal(map[string]any{"metadata": map[string]any{"total_size": 1, "format": "pt"}, "weight_map": wmap})
	os.WriteFile(filepath.Join(dir, "pytorch_model.bin.index.json"), idx, 0o666)

	rep, err := Dir(context.Background(), dir, dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Files) != 2 || !slices.Equal(rep.Ignored, []string{"training_args.bin"}) || len(rep.Warnings) != 0 {
		t.Errorf("files %d ignored %v warnings %v", len(rep.Files), rep.Ignored, rep.Warnings)
	}
	var got struct {
		Metadata  map[string]any    `json:"metadata"`
		WeightMap map[string]string `json:"weight_map"`
	}
	readJSON(t, filepath.Join(dir, "model.safetensors.index.json"), &got)
	if got.Metadata["total_size"] != float64(rep.Bytes) || got.Metadata["format"] != "pt" {
		t.Errorf("index metadata %v, bytes %d", got.Metadata, rep.Bytes)
	}
	if _, ok := got.WeightMap["wte.weight"]; ok {
		t.Error("dropped alias wte.weight still in weight_map")
	}
	if got.WeightMap["lm_head.weight"] != "model-00001-of-00002.safetensors" || got.WeightMap["extra.b"] != "model-00002-of-00002.safetensors" {
		t.Errorf("weight_map %v", got.WeightMap)
	}
	if len(got.WeightMap) != len(wmap)-1 {
		t.Errorf("weight_map has %d names, want %d", len(got.WeightMap), len(wmap)-1)
	}
	for name, shard := range got.WeightMap {
		out, _ := readOutput(t, filepath.Join(dir, shard))
		if _, ok := out[name]; !ok {
			t.Errorf("%s not in %s", name, shard)
		}
	}
	// Again: the outputs exist now.
	if _, err := Dir(context.Background(), dir, dir); !errors.Is(err, ErrExists) {
		t.Errorf("second run: %v", err)
	}

	// A refused shard stops everything before anything is written.
	bad := t.TempDir()
	copyFile(t, "../testdata/torch/tiny_transformer.bin", filepath.Join(bad, shard1))
	copyFile(t, "../testdata/malicious/torch_zip_os_system.bin", filepath.Join(bad, shard2))
	os.WriteFile(filepath.Join(bad, "pytorch_model.bin.index.json"), idx, 0o666)
	if _, err := Dir(context.Background(), bad, bad); !errors.Is(err, torch.ErrNotAllowed) || !strings.Contains(err.Error(), "posix.system") {
		t.Errorf("malicious shard: %v", err)
	}
	assertOnly(t, bad, shard1, shard2, "pytorch_model.bin.index.json")

	// Two source indexes that both map to model.safetensors.index.json:
	// the second would silently replace the first.
	two := t.TempDir()
	copyFile(t, "../testdata/torch/tiny_transformer.bin", filepath.Join(two, shard1))
	writeTorchZip(t, filepath.Join(two, shard2), []torchtest.Tensor{synth("extra.a", "F32", 1, 3, 4), synth("extra.b", "BF16", 2, 5)})
	os.WriteFile(filepath.Join(two, "pytorch_model.bin.index.json"), idx, 0o666)
	os.WriteFile(filepath.Join(two, "pytorch_model.pt.index.json"), idx, 0o666)
	if _, err := Dir(context.Background(), two, two); !errors.Is(err, ErrInput) || !strings.Contains(err.Error(), "model.safetensors.index.json") {
		t.Errorf("two indexes, one output: %v", err)
	}
	assertOnly(t, two, shard1, shard2, "pytorch_model.bin.index.json", "pytorch_model.pt.index.json")

	// An index may not point outside its directory.
	os.WriteFile(filepath.Join(bad, "pytorch_model.bin.index.json"), []byte(`{"weight_map":{"a":"../x.bin"}}`), 0o666)
	if _, err := Dir(context.Background(), bad, bad); !errors.Is(err, ErrInput) {
		t.Errorf("index with a path: %v", err)
	}
}

func TestDirSingle(t *testing.T) {
	dir := t.TempDir()
	copyFile(t, "../testdata/torch/tiny_transformer.bin", filepath.Join(dir, "pytorch_model.bin"))
	copyFile(t, "../testdata/torch/dtypes.pt", filepath.Join(dir, "other.pt"))
	out := filepath.Join(dir, "out")
	rep, err := Dir(context.Background(), dir, out)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Files) != 1 || !slices.Equal(rep.Ignored, []string{"other.pt"}) {
		t.Errorf("files %d ignored %v", len(rep.Files), rep.Ignored)
	}
	assertOnly(t, out, "model.safetensors")
	os.Remove(filepath.Join(dir, "pytorch_model.bin"))
	rep, err = Dir(context.Background(), dir, out)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Files) != 1 || len(rep.Ignored) != 0 {
		t.Errorf("files %d ignored %v", len(rep.Files), rep.Ignored)
	}
	assertOnly(t, out, "model.safetensors", "other.safetensors")
	if _, err := Dir(context.Background(), t.TempDir(), out); !errors.Is(err, ErrNoCheckpoint) {
		t.Errorf("empty dir: %v", err)
	}
}

// TestOutputCap refuses a checkpoint whose zero-stride views would expand a
// few stored bytes into gigabytes of output, unless the cap is lifted.
func TestOutputCap(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "expand.pt")
	err := torchtest.WriteFile(in, []torchtest.Tensor{
		{Name: "big", DType: "F32", Shape: []int64{1 << 20, 1 << 10}, Stride: []int64{0, 0}, Data: []byte{0, 0, 128, 63}},
	}, torchtest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out.safetensors")
	if _, err := File(context.Background(), in, out); !errors.Is(err, ErrInput) || !strings.Contains(err.Error(), "zero strides") {
		t.Fatalf("4 GiB from 4 bytes: %v", err)
	}
	if _, err := os.Stat(out); err == nil {
		t.Fatal("output left behind")
	}
	small := filepath.Join(dir, "small.pt")
	if err := torchtest.WriteFile(small, []torchtest.Tensor{{Name: "w", DType: "F32", Shape: []int64{64}, Data: make([]byte, 256)}}, torchtest.Options{}); err != nil {
		t.Fatal(err)
	}
	if _, err := File(context.Background(), small, out, WithMaxOutputBytes(100)); !errors.Is(err, ErrInput) {
		t.Fatalf("explicit cap: %v", err)
	}
	if _, err := File(context.Background(), small, out, WithMaxOutputBytes(256)); err != nil {
		t.Fatalf("at the cap: %v", err)
	}
}

// TestVerifyCatchesDifferences tampers with a converted file and checks that
// verification names the tensor and the first differing byte.
func TestVerifyCatchesDifferences(t *testing.T) {
	in := "../testdata/torch/noncontiguous.pt"
	c, err := torch.Open(in)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	p, err := NewPlan(c)
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "out.safetensors")
	r, err := p.Write(context.Background(), out)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	good, err := safetensors.NewReader(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		t.Fatal(err)
	}
	if err := verify(context.Background(), good, r, p.sources, true, nil); err != nil {
		t.Fatalf("untouched file: %v", err)
	}
	// the hashes of what was copied (WithVerifyFromCopy)
	copied := &copySums{seed: maphash.MakeSeed(), sums: map[string]uint64{}}
	for _, ti := range good.Tensors {
		tn, _ := good.Tensor(ti.Name)
		data, _ := tn.Copy()
		copied.sums[ti.Name] = maphash.Bytes(copied.seed, data)
	}
	if err := verify(context.Background(), good, r, p.sources, true, copied); err != nil {
		t.Fatalf("untouched file, from the copy: %v", err)
	}
	victim := good.Tensors[len(good.Tensors)-1]
	b[good.DataOffset()+victim.DataOffsets[0]+1] ^= 0xff
	bad, err := safetensors.NewReader(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		t.Fatal(err)
	}
	err = verify(context.Background(), bad, r, p.sources, false, nil)
	if !errors.Is(err, ErrVerify) || !strings.Contains(err.Error(), victim.Name) || !strings.Contains(err.Error(), "byte 1 differs") {
		t.Fatalf("tampered file: %v", err)
	}
	err = verify(context.Background(), bad, r, p.sources, false, copied)
	if !errors.Is(err, ErrVerify) || !strings.Contains(err.Error(), victim.Name) || !strings.Contains(err.Error(), "differs from the bytes copied into it") {
		t.Fatalf("tampered file, from the copy: %v", err)
	}
}

// countingReaderAt counts the bytes read through it.
type countingReaderAt struct {
	r io.ReaderAt
	n atomic.Int64
}

func (c *countingReaderAt) ReadAt(p []byte, off int64) (int, error) {
	n, err := c.r.ReadAt(p, off)
	c.n.Add(int64(n))
	return n, err
}

// TestVerifyFromCopyReadsOnce: a verified conversion reads every stored
// byte of the checkpoint twice, once to copy and once to compare; with
// WithVerifyFromCopy (what the CLI uses for remote checkpoints), once.
func TestVerifyFromCopyReadsOnce(t *testing.T) {
	in := "../testdata/torch/tiny_transformer.bin"
	f, err := os.Open(in)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, _ := f.Stat()
	var read [2]int64
	for i, fromCopy := range []bool{false, true} {
		cr := &countingReaderAt{r: f}
		c, err := torch.NewReader(cr, st.Size(), in)
		if err != nil {
			t.Fatal(err)
		}
		// the record checks deferred to each storage's first read are not
		// stored bytes: count from after them
		if err := c.Check(); err != nil {
			t.Fatal(err)
		}
		opened := cr.n.Load()
		p, err := NewPlan(c)
		if err != nil {
			t.Fatal(err)
		}
		out := filepath.Join(t.TempDir(), "out.safetensors")
		r, err := p.Write(context.Background(), out, WithVerifyFromCopy(fromCopy), WithDigests(true))
		if err != nil {
			t.Fatal(err)
		}
		read[i] = cr.n.Load() - opened
		if !r.Verified || r.Tensors[0].SHA256 == "" {
			t.Fatalf("from copy %v: verified %v, digest %q", fromCopy, r.Verified, r.Tensors[0].SHA256)
		}
	}
	if read[1]*2 > read[0]+read[0]/10 || read[1] == 0 {
		t.Fatalf("bytes read from the checkpoint: %d verifying by a second read, %d from the copy", read[0], read[1])
	}
	t.Logf("bytes read from the checkpoint: %d verifying by a second read, %d from the copy", read[0], read[1])
}

// Cancelling the context stops a conversion part-way: the error is the
// context's, and no output or temporary file is left, for File, FromReaderAt
// and Dir.
func TestCancelLeavesNothing(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "in")
	os.Mkdir(in, 0o755)
	var tensors []torchtest.Tensor
	for i := range 8 {
		tensors = append(tensors, synth(fmt.Sprintf("layer.%d.weight", i), "F32", byte(i), 256, 256))
	}
	writeTorchZip(t, filepath.Join(in, "pytorch_model.bin"), tensors)
	out := filepath.Join(dir, "out")
	os.Mkdir(out, 0o755)
	for name, conv := range map[string]func(ctx context.Context, o ...Option) error{
		"File": func(ctx context.Context, o ...Option) error {
			_, err := File(ctx, filepath.Join(in, "pytorch_model.bin"), filepath.Join(out, "x.safetensors"), o...)
			return err
		},
		"FromReaderAt": func(ctx context.Context, o ...Option) error {
			f, err := os.Open(filepath.Join(in, "pytorch_model.bin"))
			if err != nil {
				return err
			}
			defer f.Close()
			st, _ := f.Stat()
			_, err = FromReaderAt(ctx, f, st.Size(), "pytorch_model.bin", filepath.Join(out, "x.safetensors"), o...)
			return err
		},
		"Dir": func(ctx context.Context, o ...Option) error { _, err := Dir(ctx, in, out, o...); return err },
	} {
		ctx, cancel := context.WithCancel(context.Background())
		calls := 0
		err := conv(ctx, WithProgress(func(written, total int64) {
			if calls++; written > total/3 {
				cancel()
			}
		}))
		cancel()
		if !errors.Is(err, context.Canceled) {
			t.Errorf("%s: %v, want context.Canceled", name, err)
		}
		if calls == 0 {
			t.Errorf("%s: cancelled before writing", name)
		}
		if ents, _ := os.ReadDir(out); len(ents) != 0 {
			t.Errorf("%s left %v behind", name, ents)
		}
	}
}
