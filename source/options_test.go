package source_test

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"testing"

	"github.com/gosafetensors/safetensors"
	"github.com/gosafetensors/safetensors/compressed"
	"github.com/gosafetensors/safetensors/convert"
	"github.com/gosafetensors/safetensors/diff"
	"github.com/gosafetensors/safetensors/remote"
	"github.com/gosafetensors/safetensors/remote/blobstore"
	"github.com/gosafetensors/safetensors/sharded"
	"github.com/gosafetensors/safetensors/source"
	"github.com/gosafetensors/safetensors/stats"
	"github.com/gosafetensors/safetensors/torch"
)

// TestOneOptionStyle checks the module's one option rule in every package
// that takes functional options: a nil Option and an invalid value are
// errors wrapping safetensors.ErrOption (each package's ErrOption is that
// same value), returned before anything is read or written, never a panic.
func TestOneOptionStyle(t *testing.T) {
	ctx := context.Background()
	file := emptySafetensors(t)
	empty, err := safetensors.NewReader(bytes.NewReader(file), int64(len(file)))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing")
	for _, sentinel := range []error{compressed.ErrOption, convert.ErrOption, diff.ErrOption, remote.ErrOption,
		blobstore.ErrOption, sharded.ErrOption, source.ErrOption, stats.ErrOption, torch.ErrOption} {
		if sentinel != safetensors.ErrOption {
			t.Errorf("%v is not safetensors.ErrOption", sentinel)
		}
	}
	cases := []struct {
		name     string
		nil, bad func() error
	}{
		{"safetensors.NewReader",
			func() error { _, err := safetensors.NewReader(bytes.NewReader(nil), 0, nil); return err },
			func() error {
				_, err := safetensors.NewReader(bytes.NewReader(nil), 0, safetensors.WithMaxHeaderSize(-1))
				return err
			}},
		{"compressed.Open",
			func() error { _, err := compressed.Open(missing, nil); return err },
			func() error { _, err := compressed.Open(missing, compressed.WithMaxFrameSize(0)); return err }},
		{"convert.Dir",
			func() error { _, err := convert.Dir(context.Background(), missing, dir, nil); return err },
			func() error {
				_, err := convert.Dir(context.Background(), missing, dir, convert.WithKey(""))
				return err
			}},
		{"diff.Compare",
			func() error { _, err := diff.Compare(ctx, empty, empty, nil); return err },
			func() error { _, err := diff.Compare(ctx, empty, empty, diff.WithEpsilon(-1)); return err }},
		{"remote.Open",
			func() error { _, err := remote.Open(ctx, "http://127.0.0.1:1/x", nil); return err },
			func() error { _, err := remote.Open(ctx, "http://127.0.0.1:1/x", remote.WithPrefetch(0)); return err }},
		{"blobstore.Open",
			func() error { _, err := blobstore.Open(ctx, "mem://b/x", nil); return err },
			func() error { _, err := blobstore.Open(ctx, "mem://b/x", blobstore.WithPrefetch(0)); return err }},
		{"sharded.Open",
			func() error { _, err := sharded.Open(ctx, missing, nil); return err },
			func() error { _, err := sharded.Open(ctx, missing, sharded.WithConcurrency(0)); return err }},
		{"sharded.Merge",
			func() error { _, err := sharded.Merge(ctx, empty, filepath.Join(dir, "m"), nil); return err },
			func() error {
				_, err := sharded.Merge(ctx, empty, filepath.Join(dir, "m"), sharded.WithMaxShardSize(0))
				return err
			}},
		{"source.Open",
			func() error { _, err := source.Open(ctx, missing, nil); return err },
			func() error { _, err := source.Open(ctx, missing, source.WithHub(nil)); return err }},
		{"stats.Compute",
			func() error { _, err := stats.Compute(ctx, empty, nil, nil); return err },
			func() error { _, err := stats.Compute(ctx, empty, nil, stats.WithWorkers(0)); return err }},
		{"torch.Open",
			func() error { _, err := torch.Open(missing, nil); return err },
			func() error { _, err := torch.Open(missing, torch.WithLimits(torch.Limits{})); return err }},
	}
	for _, c := range cases {
		for what, f := range map[string]func() error{"nil Option": c.nil, "invalid value": c.bad} {
			func() {
				defer func() {
					if p := recover(); p != nil {
						t.Errorf("%s with a %s panicked: %v", c.name, what, p)
					}
				}()
				if err := f(); !errors.Is(err, safetensors.ErrOption) {
					t.Errorf("%s with a %s: %v, want an error wrapping safetensors.ErrOption", c.name, what, err)
				}
			}()
		}
	}
	if entries, _ := filepath.Glob(filepath.Join(dir, "*")); len(entries) != 0 {
		t.Errorf("rejected options left files behind: %v", entries)
	}
}

// emptySafetensors is a valid safetensors file with no tensors.
func emptySafetensors(t *testing.T) []byte {
	t.Helper()
	b, err := safetensors.Marshal(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
