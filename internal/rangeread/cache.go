package rangeread

import "sort"

// cache holds byte ranges of one object already fetched, within a byte
// budget, evicting the least recently used. Its extents never overlap.
// It is not safe for concurrent use: Reader guards it.
type cache struct {
	budget int64
	used   int64
	tick   uint64
	ext    []extent // sorted by off, disjoint
}

type extent struct {
	off  int64
	b    []byte
	last uint64 // tick of the last use
}

func (e *extent) end() int64 { return e.off + int64(len(e.b)) }

// get copies into p the cached bytes at off, from off on, as far as they
// run without a hole, and returns how many it copied.
func (c *cache) get(p []byte, off int64) int {
	n := 0
	for n < len(p) {
		i := c.find(off + int64(n))
		if i < 0 {
			break
		}
		e := &c.ext[i]
		c.tick++
		e.last = c.tick
		n += copy(p[n:], e.b[off+int64(n)-e.off:])
	}
	return n
}

// getBack copies into p, which ends at end, the cached bytes that end
// there, as far back as they run without a hole, and returns how many it
// copied (from the end of p).
func (c *cache) getBack(p []byte, end int64) int {
	n := 0
	for n < len(p) {
		i := c.find(end - int64(n) - 1)
		if i < 0 {
			break
		}
		e := &c.ext[i]
		c.tick++
		e.last = c.tick
		stop := end - int64(n) // copy e's bytes [max(e.off, end-len(p)), stop)
		start := max(e.off, end-int64(len(p)))
		copy(p[start-(end-int64(len(p))):], e.b[start-e.off:stop-e.off])
		n += int(stop - start)
	}
	return n
}

// covered reports how many bytes from off on are cached without a hole,
// up to n.
func (c *cache) covered(off, n int64) int64 {
	done := int64(0)
	for done < n {
		i := c.find(off + done)
		if i < 0 {
			break
		}
		done = min(n, c.ext[i].end()-off)
	}
	return done
}

// find returns the index of the extent holding byte off, or -1.
func (c *cache) find(off int64) int {
	i := sort.Search(len(c.ext), func(i int) bool { return c.ext[i].end() > off })
	if i < len(c.ext) && c.ext[i].off <= off {
		return i
	}
	return -1
}

// nextCached returns the offset of the first cached run of at least
// minLen bytes (contiguous extents count as one run) that starts at or
// after off, or ends after it, before limit; limit when there is none.
func (c *cache) nextCached(off, limit, minLen int64) int64 {
	i := sort.Search(len(c.ext), func(i int) bool { return c.ext[i].end() > off })
	for i < len(c.ext) && c.ext[i].off < limit {
		start, j := c.ext[i].off, i
		for j+1 < len(c.ext) && c.ext[j+1].off == c.ext[j].end() {
			j++
		}
		if c.ext[j].end()-max(start, off) >= minLen {
			return max(off, start)
		}
		i = j + 1
	}
	return limit
}

// put adds b, the object's bytes at off, keeping only what is not cached
// yet, then evicts down to the budget. b is kept when owned and cached
// whole, else copied.
func (c *cache) put(b []byte, off int64, owned bool) {
	c.putMany([]Piece{{Buf: b, Off: off}}, owned)
}

// putMany is put for many pieces (sorted by offset, disjoint), merged into
// the cache in one pass.
func (c *cache) putMany(pieces []Piece, owned bool) {
	c.tick++
	var add []extent
	i := 0
	for _, p := range pieces {
		b, off := p.Buf, p.Off
		if int64(len(b)) > c.budget || len(b) == 0 {
			continue
		}
		end := off + int64(len(b))
		i += sort.Search(len(c.ext)-i, func(k int) bool { return c.ext[i+k].end() > off })
		for pos, j := off, i; pos < end; {
			if j < len(c.ext) && c.ext[j].off <= pos { // cached already: as fresh now
				c.ext[j].last = c.tick
				pos = c.ext[j].end()
				j++
				continue
			}
			next := end
			if j < len(c.ext) && c.ext[j].off < end {
				next = c.ext[j].off
			}
			part := b[pos-off : next-off]
			if !owned || len(part) != len(b) {
				part = append([]byte(nil), part...)
			}
			add = append(add, extent{off: pos, b: part, last: c.tick})
			c.used += int64(len(part))
			pos = next
		}
	}
	if len(add) == 0 {
		return
	}
	// merge two sorted, mutually disjoint lists
	merged := make([]extent, 0, len(c.ext)+len(add))
	a, k := 0, 0
	for a < len(c.ext) || k < len(add) {
		if k == len(add) || (a < len(c.ext) && c.ext[a].off < add[k].off) {
			merged = append(merged, c.ext[a])
			a++
		} else {
			merged = append(merged, add[k])
			k++
		}
	}
	c.ext = merged
	c.evict()
}

// evict drops the least recently used extents down to the budget.
func (c *cache) evict() {
	if c.used <= c.budget {
		return
	}
	// oldest first: ticks, then offsets
	order := make([]int, len(c.ext))
	for j := range order {
		order[j] = j
	}
	sort.SliceStable(order, func(a, b int) bool { return c.ext[order[a]].last < c.ext[order[b]].last })
	drop := make([]bool, len(c.ext))
	for _, j := range order {
		if c.used <= c.budget {
			break
		}
		drop[j] = true
		c.used -= int64(len(c.ext[j].b))
	}
	kept := c.ext[:0]
	for j, e := range c.ext {
		if !drop[j] {
			kept = append(kept, e)
		}
	}
	clear(c.ext[len(kept):])
	c.ext = kept
}
