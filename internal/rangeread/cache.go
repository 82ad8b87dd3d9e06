package rangeread

import (
	"slices"
	"sort"
)

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

// nextCached returns the offset of the first cached byte at or after off,
// or the largest int64 when there is none.
func (c *cache) nextCached(off int64) int64 {
	i := sort.Search(len(c.ext), func(i int) bool { return c.ext[i].end() > off })
	if i == len(c.ext) {
		return 1<<63 - 1
	}
	return max(off, c.ext[i].off)
}

// put adds b, the object's bytes at off, keeping only what is not cached
// yet, then evicts down to the budget. b is kept when owned and cached
// whole, else copied.
func (c *cache) put(b []byte, off int64, owned bool) {
	if int64(len(b)) > c.budget || len(b) == 0 {
		return
	}
	end := off + int64(len(b))
	c.tick++
	i := sort.Search(len(c.ext), func(i int) bool { return c.ext[i].end() > off })
	for pos := off; pos < end; {
		if i < len(c.ext) && c.ext[i].off <= pos { // cached already
			pos = c.ext[i].end()
			i++
			continue
		}
		next := end
		if i < len(c.ext) && c.ext[i].off < end {
			next = c.ext[i].off
		}
		part := b[pos-off : next-off]
		if !owned || len(part) != len(b) {
			part = append([]byte(nil), part...)
		}
		e := extent{off: pos, b: part, last: c.tick}
		c.ext = slices.Insert(c.ext, i, e)
		c.used += int64(len(e.b))
		i++
		pos = next
	}
	for c.used > c.budget {
		lru := 0
		for j := range c.ext {
			if c.ext[j].last < c.ext[lru].last {
				lru = j
			}
		}
		c.used -= int64(len(c.ext[lru].b))
		c.ext = slices.Delete(c.ext, lru, lru+1)
	}
}
