package torch

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"reflect"
	"testing"
)

// TestOptionsRejected: every field of Limits below 1, and a nil Option, is
// refused by Open, NewReader, Scan and ScanFile with ErrOption before
// anything is read.
func TestOptionsRejected(t *testing.T) {
	path := testdata + "/torch/dtypes.pt"
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	calls := map[string]func(...Option) error{
		"Open": func(o ...Option) error { _, err := Open(path, o...); return err },
		"NewReader": func(o ...Option) error {
			_, err := NewReader(bytes.NewReader(b), int64(len(b)), "x", o...)
			return err
		},
		"Scan": func(o ...Option) error {
			_, err := Scan(bytes.NewReader(b), int64(len(b)), "x", o...)
			return err
		},
		"ScanFile": func(o ...Option) error { _, err := ScanFile(path, o...); return err },
	}
	bad := map[string]Option{"nil": nil}
	lt := reflect.TypeFor[Limits]()
	for i := range lt.NumField() {
		if !lt.Field(i).IsExported() {
			continue
		}
		for _, v := range []int64{0, -1} {
			l := DefaultLimits()
			reflect.ValueOf(&l).Elem().Field(i).SetInt(v)
			bad[fmt.Sprintf("%s=%d", lt.Field(i).Name, v)] = WithLimits(l)
		}
	}
	for fn, call := range calls {
		if err := call(); err != nil {
			t.Fatalf("%s without options: %v", fn, err)
		}
		if err := call(WithLimits(DefaultLimits())); err != nil {
			t.Fatalf("%s with the default limits: %v", fn, err)
		}
		for name, opt := range bad {
			err := call(opt)
			if !errors.Is(err, ErrOption) {
				t.Errorf("%s(%s): %v, want ErrOption", fn, name, err)
			}
			var te *Error
			if errors.As(err, &te) {
				t.Errorf("%s(%s): %v is a *torch.Error", fn, name, err)
			}
		}
	}
}

// TestWithLimitsTakesEffect: the limits given are the ones enforced, by
// Open and by Scan, and the last WithLimits wins.
func TestWithLimitsTakesEffect(t *testing.T) {
	path := testdata + "/torch/dtypes.pt"
	lim := DefaultLimits()
	lim.MaxTensorBytes = 16
	if _, err := Open(path, WithLimits(lim)); !errors.Is(err, ErrLimit) {
		t.Fatalf("Open with MaxTensorBytes 16: %v, want ErrLimit", err)
	}
	if _, err := Open(path, WithLimits(lim), WithLimits(DefaultLimits())); err != nil {
		t.Fatalf("the last WithLimits should win: %v", err)
	}
	rep, err := ScanFile(path, WithLimits(lim))
	if err != nil {
		t.Fatal(err)
	}
	if rep.Verdict() == VerdictClean {
		t.Fatalf("ScanFile with MaxTensorBytes 16: verdict %v, want not clean", rep.Verdict())
	}
	// MaxViewBuffer reaches the tensors.
	lim = DefaultLimits()
	lim.MaxViewBuffer = 12345
	c, err := Open(path, WithLimits(lim))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, tn := range c.Tensors() {
		if tn.maxBuffer != 12345 {
			t.Fatalf("%s: maxBuffer %d, want 12345", tn.Name, tn.maxBuffer)
		}
	}
}
