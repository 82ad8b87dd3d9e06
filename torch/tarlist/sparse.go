package tarlist

import (
	"container/heap"
	"fmt"
	"io"
	"math"
	"sort"
)

// maxSparseStructs bounds the sparse map kept for one member, and
// maxSparseRuns the map resolved for scanning (quadratic in the worst case).
const (
	maxSparseStructs = 1 << 16
	maxSparseRuns    = 1 << 12
)

// readSparseExt is the loop of tarfile's _proc_sparse: while the
// isextended flag (byte 504 of each block) is set, another 512-byte block
// of up to 21 sparse structs follows; structs with a zero offset or size
// are dropped, and a field that is not a number ends the archive
// (InvalidHeaderError). It returns the offset of the member's data, the
// map, and a problem where tarfile stops or fails.
func readSparseExt(r io.ReaderAt, size, at int64, ext bool, structs [][2]int64) (int64, [][2]int64, string) {
	b := make([]byte, BlockSize)
	for ext {
		if at > size-BlockSize || readFull(r, b, at) != nil {
			return at, structs, fmt.Sprintf("sparse extension block at offset %d is truncated", at)
		}
		for i := 0; i < 21; i++ {
			f := b[i*24 : i*24+24]
			off, ok1 := tarNum(f[:12])
			n, ok2 := tarNum(f[12:])
			if !ok1 || !ok2 {
				return at, structs, fmt.Sprintf("sparse extension block at offset %d holds an invalid number", at)
			}
			if off != 0 && n != 0 {
				if len(structs) >= maxSparseStructs {
					return at, structs, fmt.Sprintf("more than %d sparse structs", maxSparseStructs)
				}
				structs = append(structs, [2]int64{off, n})
			}
		}
		ext = b[504] != 0
		at += BlockSize
	}
	return at, structs, ""
}

// SparseView is the content of an old GNU sparse member as tarfile's
// _FileInFile maps it: data runs read in turn from the stored data (and
// past it, as tarfile's seek and read do), holes read as zeros.
type SparseView struct {
	r     io.ReaderAt
	runs  []Run // in order, not overlapping, covering [0, size)
	size  int64
	holes int64 // bytes of zeros inside [0, size)
}

// Run is one stretch of a SparseView: [Start, Stop) of the content read
// from the file at Real, or zeros (a hole) when Real is -1.
type Run struct {
	Start, Stop int64
	Real        int64
}

// Size is the length of the content (the runs' end).
func (v *SparseView) Size() int64 { return v.size }

// Holes is the number of bytes of zeros (holes) in the content.
func (v *SparseView) Holes() int64 { return v.holes }

// Runs returns the content's runs in order.
func (v *SparseView) Runs() []Run { return v.runs }

// NewSparseView builds _FileInFile's map as tarfile does (a struct that
// starts before the previous one ends resets its notion of the last
// position, so runs can overlap) and resolves it the way a reader going
// from the start sees it: each position is read from the first run that
// holds it, searching on (cyclically) from the run read last. Where no run
// holds a position, tarfile loops forever: the content ends there. ok is
// false for a map with negative or overflowing numbers or too many runs.
func NewSparseView(r io.ReaderAt, dataOff, size int64, structs [][2]int64) (*SparseView, bool) {
	var m []Run
	last, real := int64(0), dataOff
	for _, s := range structs {
		off, n := s[0], s[1]
		if off < 0 || n < 0 || off > math.MaxInt64-n || real > math.MaxInt64-n {
			return nil, false
		}
		if off > last {
			m = append(m, Run{last, off, -1})
		}
		m = append(m, Run{off, off + n, real})
		real += n
		last = off + n
	}
	if last < size {
		m = append(m, Run{last, size, -1})
	}
	if len(m) > maxSparseRuns {
		return nil, false
	}
	v := &SparseView{r: r}
	for i, p := 0, int64(0); p < size; {
		j := -1
		for k := 0; k < len(m); k++ {
			if c := m[(i+k)%len(m)]; c.Start <= p && p < c.Stop {
				j = (i + k) % len(m)
				break
			}
		}
		if j < 0 {
			break // tarfile never returns from this read
		}
		c := m[j]
		if c.Real >= 0 {
			c.Real += p - c.Start
		}
		c.Start, c.Stop = p, min(c.Stop, size)
		v.runs = append(v.runs, c)
		p, i = c.Stop, j
	}
	v.trimTail(size)
	return v, true
}

// trimTail ends the view of a member of size bytes: after the last data
// run tarfile reads only zeros, which no opcode uses, so one block of them
// keeps the parse the same; and counts the holes.
func (v *SparseView) trimTail(size int64) {
	for len(v.runs) > 0 && v.runs[len(v.runs)-1].Real < 0 {
		v.runs = v.runs[:len(v.runs)-1]
	}
	if len(v.runs) > 0 {
		v.size = v.runs[len(v.runs)-1].Stop
		if size > v.size {
			v.runs = append(v.runs, Run{v.size, v.size + min(size-v.size, BlockSize), -1})
			v.size = v.runs[len(v.runs)-1].Stop
		}
	}
	for _, c := range v.runs {
		if c.Real < 0 {
			v.holes += c.Stop - c.Start
		}
	}
}

// ReadAt reads the member's content at off.
func (v *SparseView) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, fmt.Errorf("tar sparse member: negative offset %d", off)
	}
	n := 0
	for len(p) > 0 {
		if off >= v.size {
			return n, io.EOF
		}
		i := sort.Search(len(v.runs), func(i int) bool { return v.runs[i].Stop > off })
		if i == len(v.runs) {
			return n, io.EOF
		}
		run := v.runs[i]
		k := int(min(int64(len(p)), run.Stop-off, v.size-off))
		if run.Real < 0 {
			clear(p[:k])
		} else if err := readFull(v.r, p[:k], run.Real+(off-run.Start)); err != nil {
			return n, err
		}
		n += k
		p = p[k:]
		off += int64(k)
	}
	return n, nil
}

// tarCopyBuf is the buffer of tarfile's copyfileobj (TarFile.copybufsize
// is None): a negative length copies length mod tarCopyBuf bytes.
const tarCopyBuf = 16 << 10

// makefileLen is the number of bytes copyfileobj copies for a sparse
// struct's length n.
func makefileLen(n int64) int64 {
	if n < 0 {
		return (n%tarCopyBuf + tarCopyBuf) % tarCopyBuf
	}
	return n
}

// StoredEnd is the end of the data an old GNU sparse member's
// makefile reads from the file: the header's size, or the sum of the runs
// where that is larger (copyfileobj reads on into what follows), clipped
// to the file.
func StoredEnd(m Member, fileSize int64) int64 {
	n := max(m.Stored, 0)
	sum := int64(0)
	for _, s := range m.Sparse {
		k := makefileLen(s[1])
		if sum > math.MaxInt64-k {
			sum = math.MaxInt64
			break
		}
		sum += k
	}
	n = max(n, sum)
	if m.DataOffset > fileSize || n > fileSize-m.DataOffset {
		return fileSize
	}
	return m.DataOffset + n
}

// NewExtractView is the content of an old GNU sparse member as
// tar.extract writes it to disk, which is how torch reads "storages" and
// "tensors" (TarFile.makefile, the same in Python 3.8 to 3.13): the
// stored data is copied run after run, each run written at its offset
// after target.seek (so a later run overwrites an earlier one: the last
// write wins, unlike _FileInFile), positions no run wrote are zeros, and
// the file is truncated or extended to the original size. Holes are not
// materialised. short reports that the stored data ends before the runs do
// (makefile raises ReadError: torch fails, but the view holds what was
// written). ok is false where makefile raises before writing anything
// useful (a negative offset or original size, an overflowing run).
func NewExtractView(r io.ReaderAt, fileSize, dataOff, size int64, structs [][2]int64) (v *SparseView, short, ok bool) {
	if size < 0 {
		return nil, false, false
	}
	type write struct{ off, end, real int64 }
	var ws []write
	real := dataOff
	for _, s := range structs {
		off, n := s[0], makefileLen(s[1])
		if off < 0 || off > math.MaxInt64-n {
			return nil, false, false // seek raises
		}
		if real >= fileSize {
			short = n > 0
			break
		}
		if n > fileSize-real {
			n, short = fileSize-real, true
		}
		if n > 0 && off < size {
			ws = append(ws, write{off, min(off+n, size), real})
		}
		real += n
		if short {
			break
		}
	}
	// sweep the boundaries; at each, the write with the highest index
	// covering it is what the file holds
	bounds := []int64{0, size}
	for _, w := range ws {
		bounds = append(bounds, w.off, w.end)
	}
	sort.Slice(bounds, func(i, j int) bool { return bounds[i] < bounds[j] })
	order := make([]int, len(ws))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(i, j int) bool { return ws[order[i]].off < ws[order[j]].off })
	v = &SparseView{r: r}
	h := &intMaxHeap{}
	next := 0
	for b := 0; b+1 < len(bounds); b++ {
		p, q := bounds[b], bounds[b+1]
		if p == q {
			continue
		}
		for next < len(order) && ws[order[next]].off <= p {
			heap.Push(h, order[next])
			next++
		}
		for h.Len() > 0 && ws[(*h)[0]].end <= p {
			heap.Pop(h)
		}
		run := Run{p, q, -1}
		if h.Len() > 0 {
			w := ws[(*h)[0]]
			run.Real = w.real + (p - w.off)
		}
		if k := len(v.runs) - 1; k >= 0 {
			if last := &v.runs[k]; (last.Real < 0 && run.Real < 0) || (last.Real >= 0 && run.Real == last.Real+(last.Stop-last.Start)) {
				last.Stop = q
				continue
			}
		}
		v.runs = append(v.runs, run)
	}
	v.trimTail(size)
	return v, short, true
}

// intMaxHeap is a max-heap of write indices.
type intMaxHeap []int

func (h intMaxHeap) Len() int           { return len(h) }
func (h intMaxHeap) Less(i, j int) bool { return h[i] > h[j] }
func (h intMaxHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *intMaxHeap) Push(x any)        { *h = append(*h, x.(int)) }
func (h *intMaxHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// DataLen is the length of the data of non-sparse member m in a file of
// fileSize bytes as tar.extract copies it: a negative size n makes
// copyfileobj copy n mod 16 KiB bytes (the data, then the headers after
// it).
func DataLen(m Member, fileSize int64) int64 {
	if m.DataOffset >= fileSize {
		return 0
	}
	return min(makefileLen(m.Size), fileSize-m.DataOffset)
}
