package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gosafetensors/safetensors"
)

const viewsDir = "../../testdata/views/"

// runExit runs the CLI, failing the test unless it exits with want.
func runExit(t *testing.T, want int, args ...string) (string, string) {
	t.Helper()
	code, out, errOut := runCLI(t, args...)
	if code != want {
		t.Fatalf("%v: exit %d, want %d\n%s%s", args, code, want, out, errOut)
	}
	return out, errOut
}

// TestExpandedViewsEverywhere: a PyTorch checkpoint whose tensor is an
// expanded view far larger than the file (testdata/views, written by
// torch.save: the red-team file F5, 4 stored bytes standing for 256 GiB,
// and a 16-byte storage expanded to 16,000 bytes in an 832-byte file) is
// shown by inspect, with a warning saying it is an expanded view, and
// sized by estimate; every command that reads its bytes (get, get -o,
// get --slice, stats, diff, load, convert) refuses it with an error naming
// the file, the tensor, its shape and stride, leaves nothing behind, and
// reads it only with --expand-views, within what that allows.
func TestExpandedViewsEverywhere(t *testing.T) {
	zero, legacy, small := viewsDir+"expanded_zero_stride.pt", viewsDir+"expanded_zero_stride_legacy.pt", viewsDir+"expanded_small.pt"
	dir := t.TempDir()
	run := func(want int, args ...string) (string, string) { t.Helper(); return runExit(t, want, args...) }
	refused := func(want int, args ...string) {
		t.Helper()
		_, errOut := run(want, args...)
		for _, s := range []string{"expanded view", "--expand-views"} {
			if !strings.Contains(errOut, s) {
				t.Errorf("%v: the error does not say %q:\n%s", args, s, errOut)
			}
		}
	}
	for _, f := range []string{zero, legacy} {
		out, errOut := run(0, "inspect", f)
		if !strings.Contains(out, "[262144, 262144]") || !strings.Contains(out+errOut, `tensor "w" is an expanded view (shape [262144 262144], stride [0 0]): 4 bytes of storage stand for 274877906944 bytes`) {
			t.Errorf("inspect %s:\n%s%s", f, out, errOut)
		}
		out, _ = run(0, "inspect", "--json", f)
		var d struct{ Warnings []string }
		if err := json.Unmarshal([]byte(out), &d); err != nil || len(d.Warnings) != 1 || !strings.Contains(d.Warnings[0], "reading it is refused") {
			t.Errorf("inspect --json %s: %v %q", f, err, d.Warnings)
		}
		if out, _ := run(0, "estimate", f); !strings.Contains(out, "274,877,906,944") {
			t.Errorf("estimate %s:\n%s", f, out)
		}
		for _, args := range [][]string{{"get", f, "w"}, {"get", f, "w", "--slice", "0:1,0:2"}, {"stats", f}, {"load", f}} {
			refused(1, args...)
		}
		// with the proportional allowance (64 MiB) still refused
		refused(1, "get", "--expand-views", f, "w", "--slice", "0:1,0:2")
		// an allowance of its size reads what is asked for
		if out, _ := run(0, "get", "--expand-views=256GiB", f, "w", "--slice", "0:1,0:2"); !strings.Contains(out, "1.5, 1.5") {
			t.Errorf("get --expand-views=256GiB %s: %s", f, out)
		}
		out, errOut = run(1, "convert", f, filepath.Join(dir, "out.safetensors"))
		if !strings.Contains(out+errOut, "expand") {
			t.Errorf("convert %s: %s%s", f, out, errOut)
		}
	}
	refused(2, "diff", zero, legacy) // for diff exit 1 means "they differ"
	// the small expansion: refused without the option, read with it
	o := filepath.Join(dir, "rows.bin")
	refused(1, "get", small, "rows", "-o", o)
	refused(1, "convert", small, filepath.Join(dir, "out.safetensors"))
	refused(1, "stats", small)
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("refusals left %d files", len(ents))
	}
	if out, _ := run(0, "get", small, "base"); !strings.Contains(out, "0., 1., 2., 3.") {
		t.Errorf("get base: %s", out)
	}
	run(0, "--expand-views", "get", small, "rows", "-o", o)
	if fi, err := os.Stat(o); err != nil || fi.Size() != 16000 {
		t.Errorf("get --expand-views -o: %v", err)
	}
	run(0, "stats", "--expand-views", small)
	run(0, "load", "--expand-views", small)
	conv := filepath.Join(dir, "small.safetensors")
	run(0, "convert", "--expand-views", small, conv)
	f, err := safetensors.Open(conv)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if info, ok := f.Info("rows"); !ok || info.Size() != 16000 {
		t.Errorf("converted rows: %+v", info)
	}
	if _, errOut := run(2, "--expand-views=0", "stats", small); !strings.Contains(errOut, "--expand-views") {
		t.Errorf("--expand-views=0: %s", errOut)
	}
}

// TestOverlappingViewsEverywhere: 256 offset slices of one 16 KiB storage,
// none an expanded view, in a 36 KB file written by torch.save
// (testdata/views/overlapping_slices*.pt) stand for 3.9 MB: inspect and
// estimate show them (inspect warning that they are refused); every
// command that reads their bytes (get, get -o, stats, diff, load, convert)
// refuses with an error naming the file, the tensor, the storage and
// --expand-views, leaving nothing behind; the first slice, which the
// storage holds, reads; with --expand-views every command reads them; a
// checkpoint of a storage, its tied alias and disjoint slices of it reads
// by default.
func TestOverlappingViewsEverywhere(t *testing.T) {
	zip, legacy := viewsDir+"overlapping_slices.pt", viewsDir+"overlapping_slices_legacy.pt"
	dir := t.TempDir()
	run := func(want int, args ...string) (string, string) { t.Helper(); return runExit(t, want, args...) }
	refused := func(want int, args ...string) { // not fatal: each command is checked
		t.Helper()
		code, _, errOut := runCLI(t, args...)
		if code != want {
			t.Errorf("%v: exit %d, want %d", args, code, want)
		}
		for _, s := range []string{"overlapping views", "--expand-views", "distinct views of it", `storage "`} {
			if !strings.Contains(errOut, s) {
				t.Errorf("%v: the error does not say %q:\n%s", args, s, errOut)
			}
		}
	}
	for _, f := range []string{zip, legacy} {
		out, errOut := run(0, "inspect", f)
		if !strings.Contains(out, "s255") || !strings.Contains(out+errOut, `255 tensors (the first "s001") are views of storages`) {
			t.Errorf("inspect %s:\n%s%s", f, out, errOut)
		}
		if out, _ := run(0, "estimate", f); !strings.Contains(out, "3,932,160") {
			t.Errorf("estimate %s:\n%s", f, out)
		}
		for _, args := range [][]string{{"get", f, "s100"}, {"get", f, "s100", "--slice", "0:2"}, {"get", f, "s255", "-o", filepath.Join(dir, "s.bin")},
			{"stats", f}, {"load", f}, {"convert", f, filepath.Join(dir, "out.safetensors")}} {
			refused(1, args...)
		}
		if out, _ := run(0, "get", f, "s000", "--slice", "0:3"); !strings.Contains(out, "0., 1., 2.") {
			t.Errorf("get s000 %s: %s", f, out)
		}
		if out, _ := run(0, "get", "--expand-views", f, "s100", "--slice", "0:3"); !strings.Contains(out, "100., 101., 102.") {
			t.Errorf("get --expand-views s100 %s: %s", f, out)
		}
	}
	refused(2, "diff", zip, legacy)
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("refusals left %d files", len(ents))
	}
	// allowed: every command reads them
	run(0, "--expand-views", "stats", zip)
	run(0, "--expand-views", "load", zip)
	run(0, "--expand-views=3916800", "diff", zip, legacy)
	refused(2, "--expand-views=3916799", "diff", zip, legacy)
	o := filepath.Join(dir, "s255.bin")
	run(0, "--expand-views", "get", zip, "s255", "-o", o)
	if fi, err := os.Stat(o); err != nil || fi.Size() != 15360 {
		t.Errorf("get --expand-views -o: %v", err)
	}
	conv := filepath.Join(dir, "slices.safetensors")
	run(0, "convert", "--expand-views", zip, conv)
	f, err := safetensors.Open(conv)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if n := len(f.Names()); n != 256 {
		t.Errorf("converted %d tensors", n)
	}
	// legitimate sharing reads by default
	ok := viewsDir + "disjoint_slices.pt"
	run(0, "stats", ok)
	run(0, "convert", ok, filepath.Join(dir, "ok.safetensors"))
	if out, _ := run(0, "get", ok, "tied", "--slice", "4093:4096"); !strings.Contains(out, "4093., 4094., 4095.") {
		t.Errorf("get tied: %s", out)
	}
}
