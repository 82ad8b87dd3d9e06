package torch

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

const testdata = "../testdata"

type indexEntry struct {
	File            string                  `json:"file"`
	Expect          string                  `json:"expect"`
	MustNameOneOf   []string                `json:"must_name_one_of"`
	ExpectedTensors map[string]sidecarEntry `json:"expected_tensors"`
	Sidecar         string                  `json:"sidecar"`
}

type sidecarEntry struct {
	DType   string  `json:"dtype"`
	Shape   []int64 `json:"shape"`
	SHA256  string  `json:"sha256"`
	Stride  []int64 `json:"stride"`
	Offset  int64   `json:"storage_offset"`
	Key     string  `json:"storage_key"`
	IsParam bool    `json:"is_parameter"`
	ReqGrad bool    `json:"requires_grad"`
}

type sidecar struct {
	Tensors          map[string]sidecarEntry `json:"tensors"`
	NonTensorEntries map[string]any          `json:"non_tensor_entries"`
	ZipPrefix        *string                 `json:"zip_prefix"`
	Format           string                  `json:"format"`
	SameObjectGroups [][]string              `json:"same_object_groups"`
	MustRefuseNaming []string                `json:"must_refuse_naming_one_of"`
}

func readIndex(t testing.TB, dir string) []indexEntry {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(testdata, dir, "INDEX.json"))
	if err != nil {
		t.Fatal(err)
	}
	var idx []indexEntry
	if err := json.Unmarshal(b, &idx); err != nil {
		t.Fatal(err)
	}
	return idx
}

func readSidecar(t testing.TB, path string) sidecar {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var s sidecar
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatal(err)
	}
	return s
}

func tensorSHA(t testing.TB, tn *Tensor) string {
	t.Helper()
	h := sha256.New()
	n, err := tn.WriteTo(h)
	if err != nil {
		t.Fatalf("%s: WriteTo: %v", tn.Name, err)
	}
	if n != tn.NBytes() {
		t.Fatalf("%s: WriteTo wrote %d bytes, want %d", tn.Name, n, tn.NBytes())
	}
	return hex.EncodeToString(h.Sum(nil))
}

func checkTensors(t *testing.T, c *Checkpoint, want map[string]sidecarEntry, layout bool) {
	t.Helper()
	byName := map[string]Entry{}
	for _, e := range c.Entries {
		byName[e.Name] = e
	}
	for name, w := range want {
		e, ok := byName[name]
		if !ok || e.Tensor == nil {
			t.Errorf("tensor %q missing (entry %+v)", name, e)
			continue
		}
		tn := e.Tensor
		if tn.Name != name {
			t.Errorf("tensor %q has Name %q", name, tn.Name)
		}
		if tn.DType.String() != w.DType || !equalInts(tn.Shape, w.Shape) {
			t.Errorf("%q: got %s %v, want %s %v", name, tn.DType, tn.Shape, w.DType, w.Shape)
			continue
		}
		if layout && w.Stride != nil {
			if !equalInts(tn.Stride, w.Stride) || tn.Offset != w.Offset || tn.IsParameter != w.IsParam || tn.RequiresGrad != w.ReqGrad {
				t.Errorf("%q: layout stride %v offset %d param %v grad %v, want %v %d %v %v", name, tn.Stride, tn.Offset, tn.IsParameter, tn.RequiresGrad, w.Stride, w.Offset, w.IsParam, w.ReqGrad)
			}
		}
		if got := tensorSHA(t, tn); got != w.SHA256 {
			t.Errorf("%q: sha256 %s, want %s (contiguous=%v)", name, got, w.SHA256, tn.Contiguous())
		}
	}
	if n := len(c.Tensors()); n != len(want) {
		t.Errorf("%d tensors, want %d", n, len(want))
	}
}

func equalInts(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestFixturesConvert(t *testing.T) {
	for _, ie := range readIndex(t, "torch") {
		if ie.Expect != "convert" {
			continue
		}
		t.Run(ie.File, func(t *testing.T) {
			path := filepath.Join(testdata, "torch", ie.File)
			sc := readSidecar(t, path+".json")
			c, err := Open(path)
			if err != nil {
				t.Fatalf("Open: %v", err)
			}
			defer c.Close()
			if c.Format.String() != sc.Format {
				t.Errorf("format %q, want %q", c.Format, sc.Format)
			}
			if sc.ZipPrefix != nil && c.Prefix != *sc.ZipPrefix {
				t.Errorf("prefix %q, want %q", c.Prefix, *sc.ZipPrefix)
			}
			checkTensors(t, c, sc.Tensors, true)
			// non-tensor entries: every reported leaf must live under a non-tensor key
			for _, e := range c.Entries {
				if e.Tensor != nil {
					continue
				}
				found := false
				for k := range sc.NonTensorEntries {
					if e.Name == k || strings.HasPrefix(e.Name, k+".") {
						found = true
					}
				}
				if !found {
					t.Errorf("unexpected non-tensor entry %q (%s %v)", e.Name, e.Kind, e.Value)
				}
			}
			for k := range sc.NonTensorEntries {
				found := false
				for _, e := range c.Entries {
					if e.Tensor == nil && (e.Name == k || strings.HasPrefix(e.Name, k+".")) {
						found = true
					}
				}
				if !found {
					t.Errorf("non-tensor entry %q not reported", k)
				}
			}
			// the same pickled object under several names: SameView and SameAs
			byName := map[string]Entry{}
			for _, e := range c.Entries {
				byName[e.Name] = e
			}
			order := map[string]int{}
			for i, e := range c.Entries {
				order[e.Name] = i
			}
			for _, g := range sc.SameObjectGroups {
				g = append([]string(nil), g...)
				sort.Slice(g, func(i, j int) bool { return order[g[i]] < order[g[j]] })
				first := byName[g[0]]
				if first.SameAs != "" {
					t.Errorf("%q SameAs %q, want none", g[0], first.SameAs)
				}
				for _, n := range g[1:] {
					e := byName[n]
					if e.Tensor == nil || first.Tensor == nil || !e.Tensor.SameView(first.Tensor) {
						t.Errorf("%q and %q should be the same view", g[0], n)
					}
					if e.SameAs != g[0] {
						t.Errorf("%q SameAs %q, want %q", n, e.SameAs, g[0])
					}
				}
			}
			rep, err := ScanFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if !rep.Safe() {
				t.Errorf("Scan says unsafe: globals %v opcodes %v problems %v", rep.NotAllowed(), rep.DangerousOpcodes, rep.Problems)
			}
		})
	}
}

func TestFixturesMalicious(t *testing.T) {
	os.Remove("/tmp/pwned_marker")
	for _, ie := range readIndex(t, "malicious") {
		t.Run(ie.File, func(t *testing.T) {
			path := filepath.Join(testdata, "malicious", ie.File)
			c, err := Open(path)
			if err == nil {
				c.Close()
				t.Fatalf("Open succeeded; want refusal naming %v", ie.MustNameOneOf)
			}
			if !errors.Is(err, ErrNotAllowed) {
				t.Errorf("error %v is not ErrNotAllowed", err)
			}
			if !containsAny(err.Error(), ie.MustNameOneOf) {
				t.Errorf("error %q names none of %v", err, ie.MustNameOneOf)
			}
			var te *Error
			if !errors.As(err, &te) || !containsAny(te.Global, ie.MustNameOneOf) {
				t.Errorf("Error.Global = %q, want one of %v", te.Global, ie.MustNameOneOf)
			}
			t.Logf("Open: %v", err)
			rep, err := ScanFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if rep.Safe() {
				t.Errorf("Scan says safe")
			}
			if !containsAny(strings.Join(rep.NotAllowed(), " "), ie.MustNameOneOf) {
				t.Errorf("Scan globals %v name none of %v", rep.NotAllowed(), ie.MustNameOneOf)
			}
		})
	}
	if _, err := os.Stat("/tmp/pwned_marker"); err == nil {
		t.Fatal("/tmp/pwned_marker exists")
	}
}

func containsAny(s string, subs []string) bool {
	for _, x := range subs {
		if strings.Contains(s, x) {
			return true
		}
	}
	return false
}

func TestFixturesUnsupported(t *testing.T) {
	for _, ie := range readIndex(t, "unsupported") {
		t.Run(ie.File, func(t *testing.T) {
			path := filepath.Join(testdata, "unsupported", ie.File)
			sc := readSidecar(t, path+".json")
			c, err := Open(path)
			if err == nil {
				c.Close()
				t.Fatal("Open succeeded")
			}
			t.Logf("%v", err)
			switch ie.Expect {
			case "refuse_global":
				if !errors.Is(err, ErrNotAllowed) {
					t.Errorf("want ErrNotAllowed, got %v", err)
				}
				var te *Error
				if !errors.As(err, &te) || te.Global == "" {
					t.Errorf("no global named: %v", err)
				}
			case "refuse_unsupported":
				if !errors.Is(err, ErrUnsupported) {
					t.Errorf("want ErrUnsupported, got %v", err)
				}
			}
			if len(sc.MustRefuseNaming) > 0 && !containsAny(err.Error(), sc.MustRefuseNaming) {
				t.Errorf("error names none of %v", sc.MustRefuseNaming)
			}
			if _, err := ScanFile(path); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestFixturesBroken(t *testing.T) {
	for _, ie := range readIndex(t, "broken") {
		t.Run(ie.File, func(t *testing.T) {
			path := filepath.Join(testdata, "broken", ie.File)
			c, err := Open(path)
			switch ie.Expect {
			case "refuse_corrupt", "refuse_unsupported":
				if err == nil {
					c.Close()
					t.Fatal("Open succeeded")
				}
				want := ErrCorrupt
				if ie.Expect == "refuse_unsupported" {
					want = ErrUnsupported
				}
				if !errors.Is(err, want) && !errors.Is(err, ErrLimit) {
					t.Errorf("want %v, got %v", want, err)
				}
			case "convert_or_refuse":
				if err == nil {
					checkTensors(t, c, ie.ExpectedTensors, false)
					c.Close()
				}
			case "refuse_or_tolerate":
				if err == nil {
					c.Close()
				}
			}
			if err != nil {
				var te *Error
				if !errors.As(err, &te) {
					t.Errorf("error is not *Error: %v", err)
				}
				if !strings.HasPrefix(err.Error(), path+": ") {
					t.Errorf("error does not start with the file name: %v", err)
				}
			}
			t.Logf("%v", err)
			rep, serr := ScanFile(path)
			if serr != nil {
				t.Fatal(serr)
			}
			if ie.Expect != "convert_or_refuse" && ie.Expect != "refuse_or_tolerate" && rep.Safe() {
				t.Errorf("scan has no findings for a refused file: %+v", rep)
			}
		})
	}
}
