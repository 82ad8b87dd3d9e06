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
}

func newAcc() acc { return acc{min: math.Inf(1), max: math.Inf(-1)} }

// merge combines b into a (Chan, Golub and LeVeque's pairwise update).
func (a *acc) merge(b acc) {
	a.zeros += b.zeros
	a.nf.Add(b.nf)
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

// addBlock folds up to [block] values into a. It assumes every value is
// finite and checks that assumption through the sum: only if the sum is not
// finite does it sort out NaN, infinities (and a finite sum that overflowed)
// value by value.
func (a *acc) addBlock(v []float64) {
	if len(v) == 0 {
		return
	}
	var s0, s1, s2, s3 float64
	mn, mx := math.Inf(1), math.Inf(-1)
	var zeros int64
	i := 0
	for ; i+4 <= len(v); i += 4 {
		x0, x1, x2, x3 := v[i], v[i+1], v[i+2], v[i+3]
		s0 += x0
		s1 += x1
		s2 += x2
		s3 += x3
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
		if x2 < mn {
			mn = x2
		}
		if x2 > mx {
			mx = x2
		}
		if x3 < mn {
			mn = x3
		}
		if x3 > mx {
			mx = x3
		}
		if x0 == 0 {
			zeros++
		}
		if x1 == 0 {
			zeros++
		}
		if x2 == 0 {
			zeros++
		}
		if x3 == 0 {
			zeros++
		}
	}
	for ; i < len(v); i++ {
		x := v[i]
		s0 += x
		if x < mn {
			mn = x
		}
		if x > mx {
			mx = x
		}
		if x == 0 {
			zeros++
		}
	}
	sum := (s0 + s1) + (s2 + s3)
	if math.IsNaN(sum) || math.IsInf(sum, 0) {
		a.addSlow(v)
		return
	}
	mean := sum / float64(len(v))
	var q0, q1, q2, q3 float64
	i = 0
	for ; i+4 <= len(v); i += 4 {
		d0, d1, d2, d3 := v[i]-mean, v[i+1]-mean, v[i+2]-mean, v[i+3]-mean
		q0 += d0 * d0
		q1 += d1 * d1
		q2 += d2 * d2
		q3 += d3 * d3
	}
	for ; i < len(v); i++ {
		d := v[i] - mean
		q0 += d * d
	}
	a.merge(acc{n: int64(len(v)), mean: mean, m2: (q0 + q1) + (q2 + q3), min: mn, max: mx, zeros: zeros})
}

// addSlow handles a block holding non-finite values (or finite values so
// large their sum overflows) with Welford's update, value by value.
func (a *acc) addSlow(v []float64) {
	b := newAcc()
	for _, x := range v {
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
