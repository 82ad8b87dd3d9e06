package download

import "math"

// span is the bytes [Off, End) of a file.
type span struct{ Off, End int64 }

// rangeSet is a set of byte offsets kept as sorted, disjoint, non-touching
// spans. It holds at most one span per gap between them, so its size is
// bounded by the chunks in flight plus what a journal recorded.
type rangeSet struct{ s []span }

// add inserts [off, end).
func (r *rangeSet) add(off, end int64) {
	if off >= end {
		return
	}
	// first span that ends at or after off (it may merge)
	i := 0
	for i < len(r.s) && r.s[i].End < off {
		i++
	}
	j := i
	for j < len(r.s) && r.s[j].Off <= end {
		off = min(off, r.s[j].Off)
		end = max(end, r.s[j].End)
		j++
	}
	if i == j {
		r.s = append(r.s, span{})
		copy(r.s[i+1:], r.s[i:])
		r.s[i] = span{off, end}
		return
	}
	r.s[i] = span{off, end}
	r.s = append(r.s[:i+1], r.s[j:]...)
}

// bytes returns how many offsets the set holds.
func (r *rangeSet) bytes() int64 {
	var n int64
	for _, s := range r.s {
		n += s.End - s.Off
	}
	return n
}

// reach returns the end of the span that covers off, or off if none does.
func (r *rangeSet) reach(off int64) int64 {
	for _, s := range r.s {
		if s.Off <= off && off < s.End {
			return s.End
		}
		if s.Off > off {
			break
		}
	}
	return off
}

// missing returns the spans of [0, size) not in the set.
func (r *rangeSet) missing(size int64) []span {
	var out []span
	pos := int64(0)
	for _, s := range r.s {
		if s.Off >= size {
			break
		}
		if s.Off > pos {
			out = append(out, span{pos, s.Off})
		}
		pos = max(pos, s.End)
	}
	if pos < size {
		out = append(out, span{pos, size})
	}
	return out
}

// take returns the spans and empties the set.
func (r *rangeSet) take() []span {
	s := r.s
	r.s = nil
	return s
}

// next returns the start of the first span that begins after off, or
// the largest int64 if none does.
func (r *rangeSet) next(off int64) int64 {
	for _, s := range r.s {
		if s.Off > off {
			return s.Off
		}
	}
	return math.MaxInt64
}

// trim removes the offsets below off.
func (r *rangeSet) trim(off int64) {
	i := 0
	for i < len(r.s) && r.s[i].End <= off {
		i++
	}
	r.s = r.s[i:]
	if len(r.s) > 0 && r.s[0].Off < off {
		r.s[0].Off = off
	}
}
