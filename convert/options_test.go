package convert

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/gosafetensors/safetensors/torch"
)

const tiedIn = "../testdata/torch/tied_weights.pt"

// TestOptionsRejected: each invalid option value is refused by every
// function with an error wrapping ErrOption, and nothing is written.
func TestOptionsRejected(t *testing.T) {
	badLimits := torch.DefaultLimits()
	badLimits.MaxMemo = 0
	bad := map[string][]Option{
		"nil option":              {nil},
		"empty key":               {WithKey("")},
		"empty prefer":            {WithPrefer("")},
		"empty discard":           {WithDiscard("a", "")},
		"prefer twice":            {WithPrefer("a", "a")},
		"prefer twice in calls":   {WithPrefer("a"), WithPrefer("a")},
		"discard twice":           {WithDiscard("a"), WithDiscard("b", "a")},
		"preferred and discarded": {WithPrefer("a"), WithDiscard("a")},
		"nil progress":            {WithProgress(nil)},
		"zero cap":                {WithMaxOutputBytes(0)},
		"negative cap":            {WithMaxOutputBytes(-2)},
		"digests without verify":  {WithDigests(true), WithVerify(false)},
		"verify off then digests": {WithVerify(false), WithDigests(true)},
		"nil reader option":       {WithReaderOptions(nil)},
	}
	fileOnly := map[string][]Option{
		// torch checks its own options when File, PlanFile and Dir open
		// the checkpoint: the error wraps both sentinels.
		"bad reader limits": {WithReaderOptions(torch.WithLimits(badLimits))},
	}
	c, err := torch.Open(tiedIn)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	dirIn := t.TempDir()
	b, err := os.ReadFile(tiedIn)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dirIn, "pytorch_model.bin"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "x.safetensors")
	calls := map[string]func(...Option) error{
		"File":     func(o ...Option) error { _, err := File(tiedIn, out, o...); return err },
		"PlanFile": func(o ...Option) error { _, err := PlanFile(tiedIn, o...); return err },
		"Dir":      func(o ...Option) error { _, err := Dir(dirIn, dirIn, o...); return err },
		"NewPlan":  func(o ...Option) error { _, err := NewPlan(c, o...); return err },
		"PlanCheckpoint": func(o ...Option) error {
			_, err := PlanCheckpoint(c, tiedIn, o...)
			return err
		},
		"NewSource": func(o ...Option) error { _, err := NewSource(c, "x", o...); return err },
	}
	for fn, call := range calls {
		for name, opts := range bad {
			if err := call(opts...); !errors.Is(err, ErrOption) {
				t.Errorf("%s(%s): %v, want ErrOption", fn, name, err)
			}
		}
		if fn == "File" || fn == "PlanFile" || fn == "Dir" {
			for name, opts := range fileOnly {
				if err := call(opts...); !errors.Is(err, ErrOption) || !errors.Is(err, torch.ErrOption) {
					t.Errorf("%s(%s): %v, want ErrOption and torch.ErrOption", fn, name, err)
				}
			}
		}
	}
	if _, err := os.Lstat(out); err == nil {
		t.Error("an output was written despite an invalid option")
	}
	if _, err := os.Lstat(filepath.Join(dirIn, "model.safetensors")); err == nil {
		t.Error("Dir wrote an output despite an invalid option")
	}
}

// TestOptionsTakeEffect: each valid option changes what is planned or
// written.
func TestOptionsTakeEffect(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "x.safetensors")

	// Defaults: verified, no digests, aliases dropped, no overwrite.
	rep, err := File(tiedIn, out)
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Verified || rep.Tensors[0].SHA256 != "" || len(rep.Removed) != 1 {
		t.Fatalf("defaults: verified %v, digest %q, removed %v", rep.Verified, rep.Tensors[0].SHA256, rep.Removed)
	}
	if _, err := File(tiedIn, out); !errors.Is(err, ErrExists) {
		t.Fatalf("without WithOverwrite: %v, want ErrExists", err)
	}
	if _, err := File(tiedIn, out, WithOverwrite(true), WithOverwrite(false)); !errors.Is(err, ErrExists) {
		t.Fatalf("the last WithOverwrite should win: %v", err)
	}

	rep, err = File(tiedIn, out, WithOverwrite(true), WithVerify(false))
	if err != nil || rep.Verified {
		t.Fatalf("WithVerify(false): verified %v, %v", rep != nil && rep.Verified, err)
	}
	rep, err = File(tiedIn, out, WithOverwrite(true), WithDigests(true))
	if err != nil {
		t.Fatal(err)
	}
	for _, tn := range rep.Tensors {
		if len(tn.SHA256) != 64 {
			t.Errorf("WithDigests: %s: digest %q", tn.Name, tn.SHA256)
		}
	}
	rep, err = PlanFile(tiedIn, WithKeepAliases(true))
	if err != nil || len(rep.Removed) != 0 {
		t.Fatalf("WithKeepAliases: removed %v, %v", rep.Removed, err)
	}
	rep, err = PlanFile(tiedIn, WithPrefer("model.embed_tokens.weight"))
	if err != nil || rep.Removed[0].Kept != "model.embed_tokens.weight" {
		t.Fatalf("WithPrefer: %v, %v", rep.Removed, err)
	}
	rep, err = PlanFile(tiedIn, WithDiscard("lm_head.weight"))
	if err != nil || rep.Removed[0].Kept != "model.embed_tokens.weight" {
		t.Fatalf("WithDiscard: %v, %v", rep.Removed, err)
	}
	rep, err = PlanFile("../testdata/torch/checkpoint_nested.pt", WithKey("optimizer.state"))
	if err != nil || rep.Unwrapped != "optimizer.state" {
		t.Fatalf("WithKey: unwrapped %q, %v", rep.Unwrapped, err)
	}
	calls := 0
	if _, err := File(tiedIn, out, WithOverwrite(true), WithProgress(func(w, total int64) { calls++ })); err != nil || calls == 0 {
		t.Fatalf("WithProgress: %d calls, %v", calls, err)
	}

	// The output cap: 1 byte refuses, NoOutputCap lifts it.
	var capErr *OutputCapError
	if _, err := PlanFile(tiedIn, WithMaxOutputBytes(1)); !errors.As(err, &capErr) || capErr.Cap != 1 {
		t.Fatalf("WithMaxOutputBytes(1): %v", err)
	}
	if _, err := PlanFile(tiedIn, WithMaxOutputBytes(1), WithMaxOutputBytes(NoOutputCap)); err != nil {
		t.Fatalf("WithMaxOutputBytes(NoOutputCap): %v", err)
	}

	// Reader options reach torch.Open.
	lim := torch.DefaultLimits()
	lim.MaxTensorBytes = 1
	if _, err := PlanFile(tiedIn, WithReaderOptions(torch.WithLimits(lim))); !errors.Is(err, torch.ErrLimit) {
		t.Fatalf("WithReaderOptions(WithLimits): %v, want torch.ErrLimit", err)
	}
	if _, err := PlanFile(tiedIn, WithReaderOptions(torch.WithLimits(torch.DefaultLimits()))); err != nil {
		t.Fatal(err)
	}
}
