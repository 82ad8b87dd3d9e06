package stats

import "math"

// block is the number of values summarised at a time: small enough to stay
// in the L1 cache between the two passes over it.
const block = 4096

// acc accumulates statistics of finite values plus counts of the others.
type acc struct {
	n        int64   // finite values
	mean, m2 float64 // mean and sum of squared deviations of finite values
	min, max float64
	zeros    int64
	nf       NonFinite
	// Exact extremes of I64 and U64 values, which float64 rounds (when
	// exact is set).
	exact      bool
	imin, imax int64
	umin, umax uint64
}

func newAcc() acc {
	return acc{min: math.Inf(1), max: math.Inf(-1), imin: math.MaxInt64, imax: math.MinInt64, umin: math.MaxUint64}
}

// merge combines b into a (Chan, Golub and LeVeque's pairwise update).
func (a *acc) merge(b acc) {
	a.zeros += b.zeros
	a.nf.Add(b.nf)
	if b.exact {
		a.imin, a.imax = min(a.imin, b.imin), max(a.imax, b.imax)
		a.umin, a.umax = min(a.umin, b.umin), max(a.umax, b.umax)
		a.exact = true
	}
	if b.n == 0 {
		return
	}
	if b.min < a.min {
		a.min = b.min
	}
	if b.max > a.max {
		a.max = b.max
	}
	if a.n == 0 {
		a.n, a.mean, a.m2 = b.n, b.mean, b.m2
		return
	}
	n := a.n + b.n
	d := b.mean - a.mean
	fa, fb := float64(a.n), float64(b.n)
	if math.IsInf(d, 0) {
		// Means of opposite sign near the float64 limit: the weighted
		// average cannot overflow where the difference does.
		a.mean = a.mean*(fa/float64(n)) + b.mean*(fb/float64(n))
	} else {
		a.mean += d * fb / float64(n)
	}
	a.m2 += b.m2 + d*d*fa*fb/float64(n)
	a.n = n
}

// addBlock folds up to [block] values into a in one pass. It assumes every
// value is finite and checks that assumption through the sums: only if a
// sum is not finite does it sort out NaN, infinities (and finite values so
// large their squares overflow) value by value. Deviations are taken from
// the block's first value (the shifted-data algorithm): with a shift within
// a few standard deviations of the mean, which the first value of a block
// of 4096 is in practice, sum of squares minus square of sum loses only a
// few bits, and the blocks are then combined exactly as Chan et al. do.
func addBlock[F float32 | float64](a *acc, v []F) {
	if len(v) == 0 {
		return
	}
	k := float64(v[0])
	var s0, s1, q0, q1 float64
	mn, mx := k, k
	// The smallest magnitude tells whether the block has zeros at all:
	// cheaper than testing every value for zero, and blocks with zeros
	// are counted again in a second, rare loop.
	small := math.Abs(k)
	i := 0
	for ; i+2 <= len(v); i += 2 {
		x0, x1 := float64(v[i]), float64(v[i+1])
		d0, d1 := x0-k, x1-k
		s0 += d0
		s1 += d1
		q0 += d0 * d0
		q1 += d1 * d1
		if x0 < mn {
			mn = x0
		}
		if x0 > mx {
			mx = x0
		}
		if x1 < mn {
			mn = x1
		}
		if x1 > mx {
			mx = x1
		}
		if a := math.Abs(x0); a < small {
			small = a
		}
		if a := math.Abs(x1); a < small {
			small = a
		}
	}
	for ; i < len(v); i++ {
		x := float64(v[i])
		d := x - k
		s0 += d
		q0 += d * d
		mn, mx = min(mn, x), max(mx, x)
		small = min(small, math.Abs(x))
	}
	finishBlock(a, v, k, s0+s1, q0+q1, mn, mx, small)
}

func abs(x float64) float64 { return math.Abs(x) }

// finishBlock folds one block's shifted sums into a, or hands the block to
// addSlow when the sums show a value that is not finite.
func finishBlock[F float32 | float64](a *acc, v []F, k, s, q, mn, mx, small float64) {
	var zeros int64
	if small == 0 {
		for _, x := range v {
			if x == 0 {
				zeros++
			}
		}
	}
	if math.IsNaN(q) || math.IsInf(q, 0) || math.IsNaN(s) || math.IsInf(s, 0) {
		addSlow(a, v)
		return
	}
	n := float64(len(v))
	m2 := q - s*s/n
	if m2 < 0 {
		m2 = 0 // rounding, for values all (nearly) equal
	}
	a.merge(acc{n: int64(len(v)), mean: k + s/n, m2: m2, min: mn, max: mx, zeros: zeros})
}

// addSlow handles a block holding non-finite values (or finite values so
// large their sum overflows) with Welford's update, value by value.
func addSlow[F float32 | float64](a *acc, v []F) {
	b := newAcc()
	for _, f := range v {
		x := float64(f)
		switch {
		case x != x:
			b.nf.NaN++
			continue
		case math.IsInf(x, 1):
			b.nf.PosInf++
			continue
		case math.IsInf(x, -1):
			b.nf.NegInf++
			continue
		case x == 0:
			b.zeros++
		}
		if x < b.min {
			b.min = x
		}
		if x > b.max {
			b.max = x
		}
		b.n++
		// Scale the deviation so that values near MaxFloat64 do not
		// overflow: mean += d/n with d computed by halves.
		d := x/2 - b.mean/2
		b.mean += 2 * (d / float64(b.n))
		b.m2 += 2 * d * (x/2 - b.mean/2) * 2
	}
	a.merge(b)
}
