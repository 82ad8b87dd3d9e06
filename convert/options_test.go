package convert

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/gosafetensors/safetensors/torch"
)

const tiedIn = "../testdata/torch/tied_weights.pt"

// TestOptionsRejected: each invalid option value is refused by every
// function that takes it with an error wrapping ErrOption, and nothing is
// written. Planning options and writing options are two types: a function
// that cannot use one does not take it (a compile error, not an option
// silently ignored).
func TestOptionsRejected(t *testing.T) {
	badLimits := torch.DefaultLimits()
	badLimits.MaxMemo = 0
	badPlan := map[string][]PlanOption{
		"nil plan option":         {nil},
		"empty key":               {WithKey("")},
		"empty prefer":            {WithPrefer("")},
		"empty discard":           {WithDiscard("a", "")},
		"prefer twice":            {WithPrefer("a", "a")},
		"prefer twice in calls":   {WithPrefer("a"), WithPrefer("a")},
		"discard twice":           {WithDiscard("a"), WithDiscard("b", "a")},
		"preferred and discarded": {WithPrefer("a"), WithDiscard("a")},
		"zero cap":                {WithMaxOutputBytes(0)},
		"negative cap":            {WithMaxOutputBytes(-2)},
		"nil reader option":       {WithReaderOptions(nil)},
	}
	badWrite := map[string][]WriteOption{
		"nil write option":        {nil},
		"nil progress":            {WithProgress(nil)},
		"digests without verify":  {WithDigests(true), WithVerify(false)},
		"verify off then digests": {WithVerify(false), WithDigests(true)},
	}
	// torch checks its own options when File, PlanFile and Dir open the
	// checkpoint: the error wraps both sentinels; the functions given an
	// open checkpoint refuse reader options altogether.
	badLimitsOpt := WithReaderOptions(torch.WithLimits(badLimits))
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
	ctx := context.Background()
	both := map[string]func(...Option) error{
		"File": func(o ...Option) error { _, err := File(ctx, tiedIn, out, o...); return err },
		"FromReaderAt": func(o ...Option) error {
			f, err := os.Open(tiedIn)
			if err != nil {
				return err
			}
			defer f.Close()
			_, err = FromReaderAt(ctx, f, int64(len(b)), tiedIn, out, o...)
			return err
		},
		"Dir": func(o ...Option) error { _, err := Dir(ctx, dirIn, dirIn, o...); return err },
	}
	plans := map[string]func(...PlanOption) error{
		"PlanFile":       func(o ...PlanOption) error { _, err := PlanFile(ctx, tiedIn, o...); return err },
		"NewPlan":        func(o ...PlanOption) error { _, err := NewPlan(c, o...); return err },
		"PlanCheckpoint": func(o ...PlanOption) error { _, err := PlanCheckpoint(c, tiedIn, o...); return err },
		"NewSource":      func(o ...PlanOption) error { _, err := NewSource(c, "x", o...); return err },
	}
	check := func(fn, name string, err error, torchToo bool) {
		t.Helper()
		if !errors.Is(err, ErrOption) || torchToo && !errors.Is(err, torch.ErrOption) {
			t.Errorf("%s(%s): %v, want ErrOption", fn, name, err)
		}
	}
	for fn, call := range both {
		for name, opts := range badPlan {
			check(fn, name, call(asOptions(opts)...), false)
		}
		for name, opts := range badWrite {
			check(fn, name, call(asOptions(opts)...), false)
		}
		check(fn, "bad reader limits", call(badLimitsOpt), true)
		check(fn, "nil option", call(nil), false)
	}
	for fn, call := range plans {
		for name, opts := range badPlan {
			check(fn, name, call(opts...), false)
		}
		check(fn, "bad reader limits", call(badLimitsOpt), fn == "PlanFile")
	}
	p, err := NewPlan(c)
	if err != nil {
		t.Fatal(err)
	}
	for name, opts := range badWrite {
		_, err := p.Write(ctx, out, opts...)
		check("Plan.Write", name, err, false)
	}
	if _, err := os.Lstat(out); err == nil {
		t.Error("an output was written despite an invalid option")
	}
	if _, err := os.Lstat(filepath.Join(dirIn, "model.safetensors")); err == nil {
		t.Error("Dir wrote an output despite an invalid option")
	}
}

func asOptions[O Option](opts []O) []Option {
	out := make([]Option, len(opts))
	for i, o := range opts {
		out[i] = o
	}
	return out
}

// TestOptionsTakeEffect: each valid option changes what is planned or
// written.
func TestOptionsTakeEffect(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "x.safetensors")

	// Defaults: verified, no digests, aliases dropped, no overwrite.
	rep, err := File(context.Background(), tiedIn, out)
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Verified || rep.Tensors[0].SHA256 != "" || len(rep.Removed) != 1 {
		t.Fatalf("defaults: verified %v, digest %q, removed %v", rep.Verified, rep.Tensors[0].SHA256, rep.Removed)
	}
	if _, err := File(context.Background(), tiedIn, out); !errors.Is(err, ErrExists) {
		t.Fatalf("without WithOverwrite: %v, want ErrExists", err)
	}
	if _, err := File(context.Background(), tiedIn, out, WithOverwrite(true), WithOverwrite(false)); !errors.Is(err, ErrExists) {
		t.Fatalf("the last WithOverwrite should win: %v", err)
	}

	rep, err = File(context.Background(), tiedIn, out, WithOverwrite(true), WithVerify(false))
	if err != nil || rep.Verified {
		t.Fatalf("WithVerify(false): verified %v, %v", rep != nil && rep.Verified, err)
	}
	rep, err = File(context.Background(), tiedIn, out, WithOverwrite(true), WithDigests(true))
	if err != nil {
		t.Fatal(err)
	}
	for _, tn := range rep.Tensors {
		if len(tn.SHA256) != 64 {
			t.Errorf("WithDigests: %s: digest %q", tn.Name, tn.SHA256)
		}
	}
	rep, err = PlanFile(context.Background(), tiedIn, WithKeepAliases(true))
	if err != nil || len(rep.Removed) != 0 {
		t.Fatalf("WithKeepAliases: removed %v, %v", rep.Removed, err)
	}
	rep, err = PlanFile(context.Background(), tiedIn, WithPrefer("model.embed_tokens.weight"))
	if err != nil || rep.Removed[0].Kept != "model.embed_tokens.weight" {
		t.Fatalf("WithPrefer: %v, %v", rep.Removed, err)
	}
	rep, err = PlanFile(context.Background(), tiedIn, WithDiscard("lm_head.weight"))
	if err != nil || rep.Removed[0].Kept != "model.embed_tokens.weight" {
		t.Fatalf("WithDiscard: %v, %v", rep.Removed, err)
	}
	rep, err = PlanFile(context.Background(), "../testdata/torch/checkpoint_nested.pt", WithKey("optimizer.state"))
	if err != nil || rep.Unwrapped != "optimizer.state" {
		t.Fatalf("WithKey: unwrapped %q, %v", rep.Unwrapped, err)
	}
	calls := 0
	if _, err := File(context.Background(), tiedIn, out, WithOverwrite(true), WithProgress(func(w, total int64) { calls++ })); err != nil || calls == 0 {
		t.Fatalf("WithProgress: %d calls, %v", calls, err)
	}

	// The output cap: 1 byte refuses, NoOutputCap lifts it.
	var capErr *OutputCapError
	if _, err := PlanFile(context.Background(), tiedIn, WithMaxOutputBytes(1)); !errors.As(err, &capErr) || capErr.Cap != 1 {
		t.Fatalf("WithMaxOutputBytes(1): %v", err)
	}
	if _, err := PlanFile(context.Background(), tiedIn, WithMaxOutputBytes(1), WithMaxOutputBytes(NoOutputCap)); err != nil {
		t.Fatalf("WithMaxOutputBytes(NoOutputCap): %v", err)
	}

	// Reader options reach torch.Open.
	lim := torch.DefaultLimits()
	lim.MaxTensorBytes = 1
	if _, err := PlanFile(context.Background(), tiedIn, WithReaderOptions(torch.WithLimits(lim))); !errors.Is(err, torch.ErrLimit) {
		t.Fatalf("WithReaderOptions(WithLimits): %v, want torch.ErrLimit", err)
	}
	if _, err := PlanFile(context.Background(), tiedIn, WithReaderOptions(torch.WithLimits(torch.DefaultLimits()))); err != nil {
		t.Fatal(err)
	}
}
