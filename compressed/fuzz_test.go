package compressed

import (
	"bytes"
	"context"
	"io"
	"testing"

	"github.com/gosafetensors/safetensors"
)

// FuzzSeekTable parses arbitrary bytes as a file ending in a seek table:
// never a panic, and an accepted table is consistent with the file.
func FuzzSeekTable(f *testing.F) {
	orig := genModel(f, safetensors.BF16, 16<<10, 20)
	for _, c := range []Codec{Zstd, LZ4} {
		comp := compressBytes(f, orig, WithCodec(c), WithFrameSize(MinFrameSize))
		entries, _ := seekTableOffset(comp)
		f.Add(comp[entries-8:]) // the table alone: frames claim bytes that are not there
		f.Add(comp)
	}
	f.Add(appendSeekTable(nil, nil, false))
	f.Add(appendSeekTable([]byte{1, 2, 3}, []frame{{clen: 3, ulen: 10, sum: 1, hasSum: true}}, true))
	f.Fuzz(func(t *testing.T, data []byte) {
		const maxFrame = 1 << 20
		frames, usize, err := readSeekTable(bytes.NewReader(data), int64(len(data)), maxFrame, DefaultMaxFrames)
		if err != nil {
			return
		}
		var coff, uoff int64
		for i, fr := range frames {
			if fr.coff != coff || fr.uoff != uoff || fr.clen <= 0 || fr.ulen < 0 || fr.ulen > maxFrame {
				t.Fatalf("frame %d inconsistent: %+v", i, fr)
			}
			coff += fr.clen
			uoff += fr.ulen
		}
		if uoff != usize || coff > int64(len(data)) {
			t.Fatalf("frames cover %d/%d bytes of %d; size %d", coff, uoff, len(data), usize)
		}
	})
}

// FuzzReader mutates compressed files of every codec: no panic, memory
// bounded by the caps, Verify refuses exactly what Decompress refuses, and
// whatever is decompressed without an error is the original (a stream that lost its seek table included: its header
// says how long it must be).
func FuzzReader(f *testing.F) {
	orig := genModel(f, safetensors.BF16, 16<<10, 21)
	for _, c := range allCodecs {
		f.Add(compressBytes(f, orig, WithCodec(c), WithFrameSize(MinFrameSize)))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		opts := []ReadOption{WithMaxFrameSize(1 << 20), WithConcurrency(2), WithMaxSize(int64(2 * len(orig)))}
		var out bytes.Buffer
		res, decErr := Decompress(context.Background(), &out, bytes.NewReader(data), int64(len(data)), opts...)
		if err := decErr; err == nil {
			got := out.Bytes()
			if !bytes.Equal(got, orig) {
				t.Fatalf("%v: decompressed %d bytes that are not the original", res.Format, len(got))
			}
		}
		ra, err := NewReaderAt(bytes.NewReader(data), int64(len(data)), opts...)
		if err != nil {
			return
		}
		defer ra.Close()
		// Verify (validate, scan) passes exactly what Decompress does.
		if verr := ra.Verify(context.Background()); (verr == nil) != (decErr == nil) {
			t.Fatalf("Verify: %v, Decompress: %v", verr, decErr)
		}
		if ra.Size() > int64(2*len(orig)) {
			return
		}
		buf := make([]byte, ra.Size())
		if n, err := ra.ReadAt(buf, 0); (err == nil || err == io.EOF) && !bytes.Equal(buf[:n], orig) {
			t.Fatalf("ReadAt returned %d bytes that are not the original", n)
		}
		bufs := [][]byte{make([]byte, 10), make([]byte, 100)}
		_ = ra.ReadRuns(bufs, []int64{ra.Size() / 3, ra.Size() / 2})
	})
}
