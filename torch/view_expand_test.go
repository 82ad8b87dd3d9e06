package torch

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
)

// cappedWriter fails once more than n bytes are written to it: a command
// that materialised a 256 GiB view would be stopped, not fill the disk.
type cappedWriter struct{ n int64 }

func (c *cappedWriter) Write(p []byte) (int, error) {
	if c.n -= int64(len(p)); c.n < 0 {
		return 0, errors.New("wrote past the cap")
	}
	return len(p), nil
}

func openView(t *testing.T, path string, opts ...Option) *Checkpoint {
	t.Helper()
	c, err := Open(path, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// TestExpandedViewRefused: the red-team file F5 (testdata/views, written
// by torch.save: one stored float standing for 2^36, 256 GiB as F32) opens
// and lists its tensor, which is an expanded view; reading it in any way
// (WriteTo, View's ReadAt and Stream) is an *ExpandedViewError naming the
// file, the tensor, shape, stride and sizes, before a byte is written,
// without the option and with its proportional allowance; an explicit
// allowance of its size lets it be read.
func TestExpandedViewRefused(t *testing.T) {
	for _, name := range []string{"expanded_zero_stride.pt", "expanded_zero_stride_legacy.pt"} {
		path := "../testdata/views/" + name
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range []struct {
			opts    []Option
			allowed int64
		}{{nil, fi.Size()}, {[]Option{WithExpandedViews(ExpandedViewsProportional)}, 64 << 20}, {[]Option{WithExpandedViews(1 << 30)}, 1 << 30}} {
			opts := k.opts
			c := openView(t, path, opts...)
			w := c.Lookup("w")
			if w == nil || !w.Expanded() || w.NBytes() != 1<<38 || w.Storage.NBytes() != 4 {
				t.Fatalf("%s: tensor %+v", name, w)
			}
			check := func(what string, err error) {
				t.Helper()
				var e *ExpandedViewError
				if !errors.As(err, &e) || !errors.Is(err, ErrExpandedView) || !errors.Is(err, ErrLimit) {
					t.Fatalf("%s, %d options: %s: %v", name, len(opts), what, err)
				}
				msg := err.Error()
				for _, want := range []string{path, `tensor "w"`, "[262144 262144]", "stride [0 0]", "4 bytes", "274877906944 bytes", "6.872e+10 times"} {
					if !strings.Contains(msg, want) {
						t.Errorf("%s: %s: %q does not say %q", name, what, msg, want)
					}
				}
				if e.Allowed != k.allowed || e.Total != 1<<38 || e.OptIn != (len(opts) > 0) {
					t.Errorf("%s: allowed %d (want %d), total %d, opt-in %v", name, e.Allowed, k.allowed, e.Total, e.OptIn)
				}
			}
			cw := &cappedWriter{n: 1 << 20}
			n, err := w.WriteTo(cw)
			check("WriteTo", err)
			if n != 0 || cw.n != 1<<20 {
				t.Errorf("%s: WriteTo wrote %d bytes before refusing", name, n)
			}
			_, err = w.View().ReadAt(make([]byte, 12), 0)
			check("ReadAt", err)
			_, err = w.View().Stream(cw)
			check("Stream", err)
			check("CheckView", w.CheckView())
		}
		// allowed explicitly: a few bytes read cost a few bytes
		c := openView(t, path, WithExpandedViews(1<<38))
		p := make([]byte, 8)
		if _, err := c.Lookup("w").View().ReadAt(p, 1<<38-8); err != nil || !bytes.Equal(p, []byte{0, 0, 0xc0, 0x3f, 0, 0, 0xc0, 0x3f}) {
			t.Fatalf("%s allowed: %x %v", name, p, err)
		}
	}
}

// TestExpandedViewAllowance: what may be read of a checkpoint's expanded
// views is its own size (the real torch fixture noncontiguous.pt, 48 bytes
// from 12, reads by default), or what WithExpandedViews allows; the other
// tensors of a checkpoint whose expanded views are refused read as ever.
func TestExpandedViewAllowance(t *testing.T) {
	c := openView(t, "../testdata/torch/noncontiguous.pt")
	if e := c.Lookup("expanded_stride0"); e == nil || !e.Expanded() || e.CheckView() != nil {
		t.Fatalf("noncontiguous.pt: expanded_stride0 %+v", e)
	}
	const small = "../testdata/views/expanded_small.pt"
	want := bytes.Repeat([]byte{0, 0, 0, 0, 0, 0, 0x80, 0x3f, 0, 0, 0, 0x40, 0, 0, 0x40, 0x40}, 1000)
	for _, c := range []struct {
		opts []Option
		ok   bool
	}{{nil, false}, {[]Option{WithExpandedViews(ExpandedViewsProportional)}, true}, {[]Option{WithExpandedViews(16000)}, true}, {[]Option{WithExpandedViews(15999)}, false}} {
		ck := openView(t, small, c.opts...)
		var buf bytes.Buffer
		if _, err := ck.Lookup("base").WriteTo(&buf); err != nil || !bytes.Equal(buf.Bytes(), want[:16]) {
			t.Fatalf("base: %v", err)
		}
		buf.Reset()
		_, err := ck.Lookup("rows").WriteTo(&buf)
		if got := fmt.Sprint(err == nil, bytes.Equal(buf.Bytes(), want)); c.ok && got != "true true" || !c.ok && !errors.Is(err, ErrExpandedView) {
			t.Errorf("%d options: rows: %v, %d bytes", len(c.opts), err, buf.Len())
		}
	}
	for _, n := range []int64{0, -2} {
		if _, err := Open(small, WithExpandedViews(n)); !errors.Is(err, ErrOption) {
			t.Errorf("WithExpandedViews(%d): %v", n, err)
		}
	}
}

// TestOverlappingViewsRefused: 256 offset slices of one 16 KiB storage
// (testdata/views/overlapping_slices*.pt, written by torch.save), none
// expanded, stand for 3.9 MB in a 36 KB file: the first slice, which fits
// in the storage, reads; every other one is an *OverlappingViewError
// naming the file, the tensor, the storage, its views and what they come
// to, before a byte is written, until WithExpandedViews allows them; the
// real torch fixtures whose views share storages (a tied alias, disjoint
// slices covering a storage) read by default.
func TestOverlappingViewsRefused(t *testing.T) {
	for _, name := range []string{"overlapping_slices.pt", "overlapping_slices_legacy.pt"} {
		path := "../testdata/views/" + name
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		const slice, charged = 3840 * 4, 255 * 3840 * 4
		c := openView(t, path)
		if n := len(c.Tensors()); n != 256 {
			t.Fatalf("%s: %d tensors", name, n)
		}
		var buf bytes.Buffer
		if _, err := c.Lookup("s000").WriteTo(&buf); err != nil || buf.Len() != slice {
			t.Fatalf("%s: s000: %v", name, err)
		}
		s := c.Lookup("s200")
		if s.Expanded() || s.NBytes() != slice || s.Storage.NBytes() != 16384 {
			t.Fatalf("%s: s200 %+v", name, s)
		}
		check := func(what string, err error) {
			t.Helper()
			var e *OverlappingViewError
			if !errors.As(err, &e) || !errors.Is(err, ErrExpandedView) || !errors.Is(err, ErrLimit) {
				t.Fatalf("%s: %s: %v", name, what, err)
			}
			msg := err.Error()
			for _, want := range []string{path, `tensor "s200"`, "offset 200", "15360 bytes", "(16384 bytes)", "256 distinct views", "3932160 bytes", fmt.Sprintf("%d bytes beyond", charged), fmt.Sprintf("(%d bytes)", fi.Size())} {
				if !strings.Contains(msg, want) {
					t.Errorf("%s: %s: %q does not say %q", name, what, msg, want)
				}
			}
			if e.Total != charged || e.Allowed != fi.Size() || e.Views != 256 || e.ViewBytes != 256*slice || e.OptIn {
				t.Errorf("%s: %+v", name, e)
			}
		}
		cw := &cappedWriter{n: 1 << 20}
		n, err := s.WriteTo(cw)
		check("WriteTo", err)
		if n != 0 || cw.n != 1<<20 {
			t.Errorf("%s: WriteTo wrote %d bytes before refusing", name, n)
		}
		_, err = s.View().ReadAt(make([]byte, 8), 0)
		check("ReadAt", err)
		check("CheckView", s.CheckView())
		if err := c.Lookup("s001").CheckView(); err == nil {
			t.Errorf("%s: s001 reads", name)
		}
		// one allowance for expanded and overlapping views: just enough reads
		for _, k := range []struct {
			opt int64
			ok  bool
		}{{charged - 1, false}, {charged, true}, {ExpandedViewsProportional, true}} {
			c := openView(t, path, WithExpandedViews(k.opt))
			p := make([]byte, 4)
			_, err := c.Lookup("s200").View().ReadAt(p, 4)
			if k.ok && (err != nil || !bytes.Equal(p, []byte{0, 0, 0x49, 0x43})) || !k.ok && !errors.Is(err, ErrExpandedView) {
				t.Errorf("%s: WithExpandedViews(%d): %x %v", name, k.opt, p, err)
			}
		}
	}
	// tied weights count once; disjoint slices of one storage read
	for _, path := range []string{"../testdata/views/disjoint_slices.pt", "../testdata/torch/tied_weights.pt", "../testdata/torch/tied_weights_legacy.pt",
		"../testdata/torch/shared_views.pt", "../testdata/torch/overlapping_views.pt", "../testdata/torch/noncontiguous.pt"} {
		c := openView(t, path)
		for _, ts := range c.Tensors() {
			if err := ts.CheckView(); err != nil {
				t.Errorf("%s: %v", path, err)
			}
		}
	}
	c := openView(t, "../testdata/views/disjoint_slices.pt")
	if w := c.Lookup("whole"); w.expand != nil || c.Lookup("tied").expand != nil {
		t.Errorf("disjoint_slices.pt: the whole storage or its tied alias is charged")
	}
	if p := c.Lookup("part00"); p.expand == nil || p.expand.total != 4096*4 {
		t.Errorf("disjoint_slices.pt: the slices after the whole are not charged as expected: %+v", p.expand)
	}
}
