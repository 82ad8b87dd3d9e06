package sharded

import (
	"bytes"
	"fmt"
	"hash/maphash"
	"io"
	"maps"
	"os"
	"runtime"
	"runtime/debug"
	"slices"
	"sync"

	"github.com/gosafetensors/safetensors"
	"github.com/gosafetensors/safetensors/internal/mmap"
)

// mapOutput is false only in tests of the pread path.
var mapOutput = true

// verifyBlock is the unit of work of the verifying goroutines.
const verifyBlock = 4 << 20

// checker verifies a file being written: every tensor byte is compared with
// the source as soon as it has been written (while the rest is copied and
// synced), then [checker.finish] compares the header bytes and the file
// size and parses the header back. The file's bytes are read through a
// mapping of it (pread where mapping is not possible); the source's through
// a fresh mapping of its file for a [FileBacked] source. Any other source
// (remote, compressed) is not read twice: each block of what the copier
// read from it is hashed as it passes (maphash, with a seed of this
// checker's), and the block read back from the file must hash the same.
// The comparisons run on up to 4 cores. A file truncated underneath
// (SIGBUS on a mapping) is an error, not a crash.
type checker struct {
	c      *copier
	out    *os.File
	path   string
	hdr    []byte // the header bytes written
	want   *safetensors.Header
	blocks []vblock
	mapped [][]byte
	seed   maphash.Seed
	first0 []int // index of each tensor's first block, in want's order

	// the copier's side of the hashed blocks (only the copier touches it)
	feeding int // the block being hashed
	fed     int64
	h       maphash.Hash

	mu      sync.Mutex
	cond    sync.Cond
	written int64 // bytes of the file written so far
	done    bool  // nothing more will be written
	next    int   // next block to check
	first   int   // the failing block, when err is set
	err     error
	wg      sync.WaitGroup
}

// vblock is bytes pos..pos+n of one tensor.
type vblock struct {
	name     string
	size     int64 // the tensor's
	pos, n   int64
	end      int64  // offset in the file just past the block
	got, src []byte // mapped bytes, or nil: read them
	gotAt    io.ReaderAt
	gotBase  int64 // offset of the tensor's first byte in gotAt
	srcAt    io.ReaderAt
	srcBase  int64
	hashed   bool   // compare got with sum, the hash of the bytes the copier read
	sum      uint64 // set by the copier before the block is written
}

// newChecker starts checking out, which will hold hdr then the data of
// want's tensors, taken from srcs (one per tensor, in want's order).
//
// With hashSrc, tensors of sources that are not local files are checked
// against what the copier feeds ([checker.feed]) instead of being read
// again.
func (c *copier) newChecker(out *os.File, path string, hdr []byte, want *safetensors.Header, srcs []tensorSource, hashSrc bool) *checker {
	ck := &checker{c: c, out: out, path: path, hdr: hdr, want: want, seed: maphash.MakeSeed()}
	ck.h.SetSeed(ck.seed)
	ck.cond.L = &ck.mu
	var outMap []byte
	if mapOutput {
		// Mapped at its final length before it is written: only bytes
		// already written are ever read.
		if m, err := mmap.Map(out, want.FileSize()); err == nil {
			ck.mapped = append(ck.mapped, m)
			outMap = m
		}
	}
	srcMaps := map[*os.File][]byte{}
	for i, info := range want.Tensors {
		s := srcs[i]
		size := info.Size()
		var srcMap []byte
		if s.f != nil {
			m, ok := srcMaps[s.f]
			if !ok {
				if mm, err := mmap.Map(s.f, 0); err == nil {
					ck.mapped = append(ck.mapped, mm)
					m = mm
				}
				srcMaps[s.f] = m
			}
			if s.off+size <= int64(len(m)) {
				srcMap = m[s.off : s.off+size]
			}
		}
		begin := want.DataOffset() + int64(info.DataOffsets[0])
		var gotMap []byte
		if outMap != nil {
			gotMap = outMap[begin : begin+size]
		}
		ck.first0 = append(ck.first0, len(ck.blocks))
		for pos := int64(0); pos < size; pos += verifyBlock {
			b := vblock{name: info.Name, size: size, pos: pos, n: min(verifyBlock, size-pos)}
			b.end = begin + pos + b.n
			if gotMap != nil {
				b.got = gotMap[pos : pos+b.n]
			} else {
				b.gotAt, b.gotBase = out, begin
			}
			switch {
			case srcMap != nil:
				b.src = srcMap[pos : pos+b.n]
			case s.f != nil:
				b.srcAt, b.srcBase = s.f, s.off // pread: a fresh read
			case hashSrc:
				b.hashed = true
			default:
				b.srcAt = s.t
			}
			ck.blocks = append(ck.blocks, b)
		}
	}
	workers := min(runtime.GOMAXPROCS(0), 4, len(ck.blocks))
	ck.wg.Add(workers)
	for range workers {
		go ck.work()
	}
	return ck
}

// feed hashes b, bytes pos.. of tensor i (in the order of the checker's
// header) as the copier read them from the source, before they are
// written. Tensors are fed in order, each from its first byte to its last.
func (ck *checker) feed(i int, pos int64, b []byte) {
	if ck == nil || i >= len(ck.first0) {
		return
	}
	j := ck.first0[i] + int(pos/verifyBlock)
	for len(b) > 0 && j < len(ck.blocks) {
		bl := &ck.blocks[j]
		if !bl.hashed {
			return
		}
		if j != ck.feeding {
			ck.feeding, ck.fed = j, 0
			ck.h.Reset()
		}
		k := min(int64(len(b)), bl.n-ck.fed)
		ck.h.Write(b[:k])
		ck.fed += k
		b = b[k:]
		if ck.fed == bl.n {
			bl.sum = ck.h.Sum64() // read by a worker only once the block is written
			j++
		}
	}
}

// advance says that the file now holds its first n bytes.
func (ck *checker) advance(n int64) {
	if ck == nil {
		return
	}
	ck.mu.Lock()
	ck.written = n
	ck.cond.Broadcast()
	ck.mu.Unlock()
}

// failure returns the first difference or error found so far, if any.
func (ck *checker) failure() error {
	if ck == nil {
		return nil
	}
	ck.mu.Lock()
	defer ck.mu.Unlock()
	return ck.err
}

func (ck *checker) fail(i int, err error) {
	ck.mu.Lock()
	if ck.err == nil || i < ck.first {
		ck.first, ck.err = i, err
	}
	ck.cond.Broadcast()
	ck.mu.Unlock()
}

func (ck *checker) work() {
	defer ck.wg.Done()
	var a, b []byte
	for {
		ck.mu.Lock()
		for ck.err == nil && ck.next < len(ck.blocks) && ck.written < ck.blocks[ck.next].end && !ck.done {
			ck.cond.Wait()
		}
		if ck.err != nil || ck.next >= len(ck.blocks) || ck.written < ck.blocks[ck.next].end {
			ck.mu.Unlock()
			return // failed, finished, or the writer stopped early
		}
		i := ck.next
		ck.next++
		ck.mu.Unlock()

		if err := ck.c.ctx.Err(); err != nil {
			ck.fail(i, err)
			return
		}
		bl := &ck.blocks[i]
		got, src := bl.got, bl.src
		if bl.hashed {
			if err := ck.checkHashed(bl, got, &a); err != nil {
				ck.fail(i, err)
				return
			}
			continue
		}
		if got == nil {
			if a == nil {
				a = make([]byte, verifyBlock)
			}
			got = a[:bl.n]
			if err := readFull(bl.gotAt, got, bl.gotBase+bl.pos); err != nil {
				ck.fail(i, fmt.Errorf("%s: re-reading tensor %q: %w", ck.path, bl.name, err))
				return
			}
		}
		if src == nil {
			if b == nil {
				b = make([]byte, verifyBlock)
			}
			src = b[:bl.n]
			if err := readFull(bl.srcAt, src, bl.srcBase+bl.pos); err != nil {
				ck.fail(i, fmt.Errorf("tensor %q: re-reading the source: %w", bl.name, err))
				return
			}
		}
		at, err := firstDiff(got, src)
		if err != nil {
			ck.fail(i, fmt.Errorf("%w: %s: tensor %q: reading bytes %d..%d: %w", ErrVerify, ck.path, bl.name, bl.pos, bl.pos+bl.n, err))
			return
		}
		if at >= 0 {
			ck.fail(i, fmt.Errorf("%w: %s: tensor %q differs from its source at byte %d of its %d", ErrVerify, ck.path, bl.name, bl.pos+int64(at), bl.size))
			return
		}
	}
}

// checkHashed compares a block of the file with the hash of the bytes the
// copier read from the source for it.
func (ck *checker) checkHashed(bl *vblock, got []byte, buf *[]byte) error {
	if got == nil {
		if *buf == nil {
			*buf = make([]byte, verifyBlock)
		}
		got = (*buf)[:bl.n]
		if err := readFull(bl.gotAt, got, bl.gotBase+bl.pos); err != nil {
			return fmt.Errorf("%s: re-reading tensor %q: %w", ck.path, bl.name, err)
		}
	}
	sum, err := hashBytes(ck.seed, got)
	if err != nil {
		return fmt.Errorf("%w: %s: tensor %q: reading bytes %d..%d: %w", ErrVerify, ck.path, bl.name, bl.pos, bl.pos+bl.n, err)
	}
	if sum != bl.sum {
		return fmt.Errorf("%w: %s: tensor %q differs from its source in bytes %d..%d of its %d (from the bytes read from it, which were not read twice)", ErrVerify, ck.path, bl.name, bl.pos, bl.pos+bl.n, bl.size)
	}
	return nil
}

// hashBytes is maphash.Bytes, with a fault while reading mapped memory
// (the file was truncated underneath) returned as an error.
func hashBytes(seed maphash.Seed, b []byte) (sum uint64, err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			if _, ok := r.(interface{ Addr() uintptr }); !ok {
				panic(r)
			}
			err = fmt.Errorf("memory fault (the file shrank?): %v", r)
		}
	}()
	return maphash.Bytes(seed, b), nil
}

// stop ends the checking: it waits for the goroutines and releases the
// mappings, and returns the first difference or error found.
func (ck *checker) stop() error {
	ck.mu.Lock()
	ck.done = true
	ck.cond.Broadcast()
	ck.mu.Unlock()
	ck.wg.Wait()
	for _, m := range ck.mapped {
		mmap.Unmap(m)
	}
	ck.mapped = nil
	return ck.err
}

// finish waits for the tensor checks to end, then checks the file's size,
// its header bytes and the header parsed back.
func (ck *checker) finish() error {
	ck.mu.Lock()
	short := ck.written < ck.want.FileSize()
	ck.mu.Unlock()
	if err := ck.stop(); err != nil {
		return err
	}
	size := ck.want.FileSize()
	if short {
		return fmt.Errorf("%w: %s: the file was not written to its end", ErrVerify, ck.path)
	}
	if st, err := ck.out.Stat(); err != nil {
		return err
	} else if st.Size() != size {
		return fmt.Errorf("%w: %s holds %d bytes, %d were written", ErrVerify, ck.path, st.Size(), size)
	}
	back := make([]byte, len(ck.hdr))
	if err := readFull(ck.out, back, 0); err != nil {
		return fmt.Errorf("%s: re-reading the header: %w", ck.path, err)
	}
	if !bytes.Equal(back, ck.hdr) {
		return fmt.Errorf("%w: %s: the header read back differs from the one written", ErrVerify, ck.path)
	}
	r, err := safetensors.NewReader(ck.out, size, safetensors.WithName(ck.path))
	if err != nil {
		return fmt.Errorf("%w: %s does not read back: %w", ErrVerify, ck.path, err)
	}
	if !slices.EqualFunc(r.Tensors, ck.want.Tensors, sameInfo) || !maps.Equal(r.Metadata, ck.want.Metadata) {
		return fmt.Errorf("%w: %s: the header read back differs from the one written", ErrVerify, ck.path)
	}
	return nil
}

// verify checks a file already written in full with want's layout against
// the source, as the checker of [copier.writeFile] does while writing.
func (c *copier) verify(out *os.File, path string, want *safetensors.Header) error {
	meta := want.Metadata
	if len(meta) == 0 {
		meta = nil
	}
	_, hdr, err := safetensors.Layout(slices.Clone(want.Tensors), meta)
	if err != nil {
		return err
	}
	if st, err := out.Stat(); err != nil {
		return err
	} else if st.Size() != want.FileSize() {
		return fmt.Errorf("%w: %s holds %d bytes, %d were written", ErrVerify, path, st.Size(), want.FileSize())
	}
	srcs := make([]tensorSource, len(want.Tensors))
	for i, info := range want.Tensors {
		if srcs[i], err = c.source(info); err != nil {
			return err
		}
	}
	ck := c.newChecker(out, path, hdr, want, srcs, false)
	ck.advance(want.FileSize())
	return ck.finish()
}

// firstDiff returns the index of the first byte where a and b differ, -1
// if they are equal. A fault while reading mapped memory (the file was
// truncated underneath) is returned as an error instead of crashing.
func firstDiff(a, b []byte) (at int, err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			if _, ok := r.(interface{ Addr() uintptr }); !ok {
				panic(r)
			}
			at, err = -1, fmt.Errorf("memory fault (the file shrank?): %v", r)
		}
	}()
	if bytes.Equal(a, b) {
		return -1, nil
	}
	for i := range a {
		if a[i] != b[i] {
			return i, nil
		}
	}
	return len(a), nil
}
