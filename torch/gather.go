package torch

import "io"

// gatherWindow is the sliding window used for views whose span exceeds the
// buffer cap.
const gatherWindow = 4 << 20

// gather materialises a strided view in C order through a small output buffer.
type gather struct {
	t       *Tensor
	w       io.Writer
	is      int64
	out     []byte
	written int64
}

func newGather(t *Tensor, w io.Writer) *gather {
	return &gather{t: t, w: w, is: int64(t.itemSize), out: make([]byte, 0, min(1<<20, t.NBytes()))}
}

func (g *gather) emit(b []byte) error {
	for len(b) > 0 {
		if len(g.out) == cap(g.out) {
			if err := g.flush(); err != nil {
				return err
			}
		}
		k := copy(g.out[len(g.out):cap(g.out)], b)
		g.out = g.out[:len(g.out)+k]
		b = b[k:]
	}
	return nil
}

func (g *gather) flush() error {
	if len(g.out) == 0 {
		return nil
	}
	n, err := g.w.Write(g.out)
	g.written += int64(n)
	g.out = g.out[:0]
	return err
}

// rows calls fn with the element index of the first element of every
// innermost row, in C order. A 0-dim tensor is one row of one element.
func (g *gather) rows(fn func(base int64) error) error {
	shape, stride := g.t.Shape, g.t.Stride
	nd := len(shape)
	if nd <= 1 {
		return fn(g.t.Offset)
	}
	idx := make([]int64, nd-1)
	base := g.t.Offset
	for {
		if err := fn(base); err != nil {
			return err
		}
		d := nd - 2
		for ; d >= 0; d-- {
			idx[d]++
			base += stride[d]
			if idx[d] < shape[d] {
				break
			}
			base -= idx[d] * stride[d]
			idx[d] = 0
		}
		if d < 0 {
			return nil
		}
	}
}

// inner returns the length and stride of the innermost row.
func (g *gather) inner() (n, stride int64) {
	if len(g.t.Shape) == 0 {
		return 1, 1
	}
	return g.t.Shape[len(g.t.Shape)-1], g.t.Stride[len(g.t.Stride)-1]
}

// fromBuffer gathers from buf, which holds elements starting at index lo.
func (g *gather) fromBuffer(buf []byte, lo int64) (int64, error) {
	n, st := g.inner()
	is := g.is
	err := g.rows(func(base int64) error {
		p := (base - lo) * is
		if st == 1 {
			return g.emit(buf[p : p+n*is])
		}
		for j := int64(0); j < n; j++ {
			q := p + j*st*is
			if err := g.emit(buf[q : q+is]); err != nil {
				return err
			}
		}
		return nil
	})
	if err == nil {
		err = g.flush()
	}
	return g.written, err
}

// windowed gathers rows through a sliding window of at most gatherWindow
// bytes, for views spanning more than the buffer cap.
func (g *gather) windowed() (int64, error) {
	n, st := g.inner()
	is := g.is
	sec := g.t.Storage.sec
	win := make([]byte, 0, gatherWindow)
	err := g.rows(func(base int64) error {
		for j := int64(0); j < n; {
			// k elements starting at j fit in the window
			k := int64(1)
			if st == 0 {
				k = n - j
			} else if max := (int64(gatherWindow)/is-1)/st + 1; max > 1 {
				k = min(max, n-j)
			}
			spanEl := (k-1)*st + 1
			buf := win[:spanEl*is]
			if err := readFull(sec, buf, (base+j*st)*is); err != nil {
				return withPath(stampEntry(err, g.t.Storage.entry), g.t.Storage.path)
			}
			for e := int64(0); e < k; e++ {
				q := e * st * is
				if err := g.emit(buf[q : q+is]); err != nil {
					return err
				}
			}
			j += k
		}
		return nil
	})
	if err == nil {
		err = g.flush()
	}
	return g.written, err
}
