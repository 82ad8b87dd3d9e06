package sharded

import (
	"bytes"
	"fmt"
	"io"
	"maps"
	"os"
	"runtime"
	"runtime/debug"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/gosafetensors/safetensors"
)

// mapOutput is false only in tests of the pread path.
var mapOutput = true

// verifyBlock is the unit of work of the verifying goroutines.
const verifyBlock = 4 << 20

// verify reads the file just written back through a fresh header parse and
// compares every tensor byte for byte with the source: the file's own
// bytes (mapped, or read with pread where mapping is not possible) with
// the source file's bytes (mapped afresh for a [FileBacked] source, else
// read through the source). The comparison runs on all cores. A file
// truncated underneath (SIGBUS on a mapping) is an error, not a crash.
func (c *copier) verify(out *os.File, path string, want *safetensors.Header) error {
	size := want.FileSize()
	if st, err := out.Stat(); err != nil {
		return err
	} else if st.Size() != size {
		return fmt.Errorf("%w: %s holds %d bytes, %d were written", ErrVerify, path, st.Size(), size)
	}
	r, err := safetensors.NewReader(out, size, safetensors.WithName(path))
	if err != nil {
		return fmt.Errorf("%w: %s does not read back: %w", ErrVerify, path, err)
	}
	if !slices.EqualFunc(r.Tensors, want.Tensors, sameInfo) || !maps.Equal(r.Metadata, want.Metadata) {
		return fmt.Errorf("%w: %s: the header read back differs from the one written", ErrVerify, path)
	}

	var mapped []mapping
	defer func() {
		for _, m := range mapped {
			m.unmap()
		}
	}()
	var outMap mapping
	if mapOutput {
		if outMap, err = mapFile(out); err == nil {
			mapped = append(mapped, outMap)
		}
	}
	srcMaps := map[*os.File][]byte{}

	type block struct {
		tensor   int
		name     string
		pos, n   int64       // bytes pos..pos+n of the tensor
		got, src []byte      // mapped bytes, or nil: read them
		gotT     io.ReaderAt // when got is nil: the tensor read back
		srcAt    io.ReaderAt // when src is nil
		srcBase  int64       // offset of the tensor's first byte in srcAt
	}
	var blocks []block
	for i, info := range want.Tensors {
		s, err := c.source(info)
		if err != nil {
			return err
		}
		got, err := r.Tensor(info.Name)
		if err != nil {
			return err
		}
		var srcMap []byte
		if s.f != nil {
			m, ok := srcMaps[s.f]
			if !ok {
				mm, err := mapFile(s.f)
				if err == nil {
					mapped = append(mapped, mm)
					m = mm.b
				}
				srcMaps[s.f] = m
			}
			if s.off+info.Size() <= int64(len(m)) {
				srcMap = m[s.off : s.off+info.Size()]
			}
		}
		var gotMap []byte
		if outMap.b != nil {
			begin := want.DataOffset() + int64(info.DataOffsets[0])
			gotMap = outMap.b[begin : begin+info.Size()]
		}
		for pos := int64(0); pos < info.Size(); pos += verifyBlock {
			b := block{tensor: i, pos: pos, n: min(verifyBlock, info.Size()-pos), name: info.Name}
			if gotMap != nil {
				b.got = gotMap[pos : pos+b.n]
			} else {
				b.gotT = got
			}
			switch {
			case srcMap != nil:
				b.src = srcMap[pos : pos+b.n]
			case s.f != nil:
				b.srcAt, b.srcBase = s.f, s.off // pread: a fresh read
			default:
				b.srcAt = s.t
			}
			blocks = append(blocks, b)
		}
	}

	var (
		next    atomic.Int64
		mu      sync.Mutex
		first   = len(blocks) // index of the first failing block
		firstEr error
		wg      sync.WaitGroup
	)
	fail := func(i int, err error) {
		mu.Lock()
		if i < first {
			first, firstEr = i, err
		}
		mu.Unlock()
	}
	failed := func() bool { mu.Lock(); defer mu.Unlock(); return firstEr != nil }
	work := func() {
		defer wg.Done()
		var a, b []byte
		for !failed() {
			i := int(next.Add(1) - 1)
			if i >= len(blocks) {
				return
			}
			if err := c.ctx.Err(); err != nil {
				fail(i, err)
				return
			}
			bl := &blocks[i]
			got, src := bl.got, bl.src
			if got == nil {
				if a == nil {
					a = make([]byte, verifyBlock)
				}
				got = a[:bl.n]
				if err := readFull(bl.gotT, got, bl.pos); err != nil {
					fail(i, fmt.Errorf("%s: re-reading tensor %q: %w", path, bl.name, err))
					return
				}
			}
			if src == nil {
				if b == nil {
					b = make([]byte, verifyBlock)
				}
				src = b[:bl.n]
				if err := readFull(bl.srcAt, src, bl.srcBase+bl.pos); err != nil {
					fail(i, fmt.Errorf("tensor %q: re-reading the source: %w", bl.name, err))
					return
				}
			}
			at, err := firstDiff(got, src)
			if err != nil {
				fail(i, fmt.Errorf("%w: %s: tensor %q: reading bytes %d..%d: %w", ErrVerify, path, bl.name, bl.pos, bl.pos+bl.n, err))
				return
			}
			if at >= 0 {
				fail(i, fmt.Errorf("%w: %s: tensor %q differs from its source at byte %d of its %d", ErrVerify, path, bl.name, bl.pos+int64(at), want.Tensors[bl.tensor].Size()))
				return
			}
		}
	}
	workers := min(runtime.GOMAXPROCS(0), 4, len(blocks))
	wg.Add(workers)
	for range workers {
		go work()
	}
	wg.Wait()
	return firstEr
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
