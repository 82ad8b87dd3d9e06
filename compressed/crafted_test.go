package compressed

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"flag"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/pierrec/lz4/v4"

	"github.com/gosafetensors/safetensors"
)

// The crafted files of testdata/compressed are made here: `go test
// ./compressed -run TestCraftedCompressed -update` rewrites them and
// INDEX.json (the zstd_tool_* files need the zstd tool). Without -update
// the test checks that the generators still make the committed bytes, then
// that every file is refused on every read path.
var updateCrafted = flag.Bool("update", false, "rewrite testdata/compressed")

const craftedDir = "../testdata/compressed"

// craftedEntry is one line of testdata/compressed/INDEX.json.
type craftedEntry struct {
	Name   string `json:"name"`
	Class  string `json:"class"`
	Attack string `json:"attack"`
	MadeBy string `json:"made_by"`
	// Error is the sentinel every read path must wrap: "checksum" or "corrupt".
	Error string `json:"error"`
	// Read is a range [offset, length] of the original that random access
	// alone must refuse (the frames it touches, nothing else decoded).
	Read []int64 `json:"read,omitempty"`
	// ToolRestores says that `zstd -d`/`lz4 -d` restores this file without
	// an error (to other bytes than the original): only the seek table
	// can tell.
	ToolRestores bool `json:"tool_restores,omitempty"`
	// NotSeekable: the file lost its seek table, so random access and
	// transparent Open refuse it as a stream (ErrNotSeekable).
	NotSeekable bool `json:"not_seekable,omitempty"`

	data []byte
}

func (e craftedEntry) sentinel() error {
	if e.Error == "checksum" {
		return ErrChecksum
	}
	return ErrCorrupt
}

// twoTensorModel is a safetensors file of two incompressible U8 tensors of
// n bytes, a then b: cut at n bytes per frame, their frames have the same
// compressed and decompressed sizes, so swapping them keeps every size in
// the seek table right.
func twoTensorModel(t testing.TB, n int) []byte {
	r := rand.New(rand.NewPCG(14, 1))
	a, b := make([]byte, n), make([]byte, n)
	for i := range a {
		a[i], b[i] = byte(r.Uint32()), byte(r.Uint32())
	}
	m, err := safetensors.Marshal([]safetensors.TensorData{
		{Name: "a", DType: safetensors.U8, Shape: []int64{int64(n)}, Data: a},
		{Name: "b", DType: safetensors.U8, Shape: []int64{int64(n)}, Data: b},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func mustTable(t testing.TB, comp []byte) []frame {
	t.Helper()
	frames, _, err := readSeekTable(bytes.NewReader(comp), int64(len(comp)), DefaultMaxFrameSize, DefaultMaxFrames)
	if err != nil {
		t.Fatal(err)
	}
	return frames
}

// swapFrames exchanges the bytes of frames i and j (of equal compressed
// size), leaving the seek table as it is.
func swapFrames(t testing.TB, comp []byte, i, j int) []byte {
	t.Helper()
	fs := mustTable(t, comp)
	fi, fj := fs[i], fs[j]
	if fi.clen != fj.clen || fi.ulen != fj.ulen {
		t.Fatalf("frames %d and %d differ in size: %+v %+v", i, j, fi, fj)
	}
	out := bytes.Clone(comp)
	copy(out[fi.coff:fi.coff+fi.clen], comp[fj.coff:fj.coff+fj.clen])
	copy(out[fj.coff:fj.coff+fj.clen], comp[fi.coff:fi.coff+fi.clen])
	return out
}

// copyFrame writes frame i's bytes over frame j's.
func copyFrameOver(t testing.TB, comp []byte, i, j int) []byte {
	t.Helper()
	fs := mustTable(t, comp)
	out := bytes.Clone(comp)
	copy(out[fs[j].coff:fs[j].coff+fs[j].clen], comp[fs[i].coff:fs[i].coff+fs[i].clen])
	return out
}

// hiddenFrame builds a file whose frames, read in sequence (`zstd -d`),
// are the header and one frame R holding tensor a = X | G | Y stored raw,
// where G is itself a complete frame of 2 KiB of 'A'. Its seek table cuts
// R into three entries, the middle one pointing at G: that entry decodes
// (and matches its checksum) on its own, so a random read of it alone
// would return 'A's where the file holds G's bytes.
func hiddenFrame(t testing.TB, codec Codec) ([]byte, []int64) {
	r := rand.New(rand.NewPCG(14, 3))
	inner := bytes.Repeat([]byte{'A'}, 2048)
	var g []byte
	if codec == Zstd {
		enc, _ := newZstdEncoder(2, 1)
		g = enc.EncodeAll(inner, nil)
		enc.Close()
	} else {
		var bb bytes.Buffer
		if err := encodeLZ4Frame(&bb, inner, 2, 4096); err != nil {
			t.Fatal(err)
		}
		g = bb.Bytes()
	}
	x, y := make([]byte, 2048), make([]byte, 2048)
	for i := range x {
		x[i], y[i] = byte(r.Uint32()), byte(r.Uint32())
	}
	p := slices.Concat(x, g, y)
	orig, err := safetensors.Marshal([]safetensors.TensorData{{Name: "a", DType: safetensors.U8, Shape: []int64{int64(len(p))}, Data: p}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	hdr := orig[:len(orig)-len(p)]
	var hframe, rframe []byte
	var rhead int // bytes of R before P
	if codec == Zstd {
		enc, _ := newZstdEncoder(2, 1)
		hframe = enc.EncodeAll(hdr, nil)
		enc.Close()
		// magic, descriptor (single segment, 4-byte content size), size,
		// one last raw block of len(p) bytes.
		rframe = binary.LittleEndian.AppendUint32(nil, zstdFrameMagic)
		rframe = append(rframe, 0xA0)
		rframe = binary.LittleEndian.AppendUint32(rframe, uint32(len(p)))
		bh := uint32(1) | uint32(len(p))<<3
		rframe = append(rframe, byte(bh), byte(bh>>8), byte(bh>>16))
		rhead = len(rframe)
		rframe = append(rframe, p...)
	} else {
		var bb bytes.Buffer
		if err := encodeLZ4Frame(&bb, hdr, 2, 4096); err != nil {
			t.Fatal(err)
		}
		hframe = bytes.Clone(bb.Bytes())
		// An LZ4 frame header without checksums or size, taken from the
		// library (its header checksum included), then one uncompressed
		// block and the end mark.
		bb.Reset()
		zw := lz4.NewWriter(&bb)
		if err := zw.Apply(lz4.ChecksumOption(false), lz4.BlockSizeOption(lz4.Block4Mb), lz4.ConcurrencyOption(1)); err != nil {
			t.Fatal(err)
		}
		zw.Write([]byte{1})
		zw.Close()
		rframe = bytes.Clone(bb.Bytes()[:7])
		rframe = binary.LittleEndian.AppendUint32(rframe, uint32(len(p))|0x80000000)
		rhead = len(rframe)
		rframe = append(rframe, p...)
		rframe = binary.LittleEndian.AppendUint32(rframe, 0)
	}
	comp := slices.Concat(hframe, rframe)
	r1 := int64(rhead + len(x))
	frames := []frame{
		{clen: int64(len(hframe)), ulen: int64(len(hdr)), sum: checksum(hdr)},
		{clen: r1, ulen: int64(len(x)), sum: checksum(x)},
		{clen: int64(len(g)), ulen: int64(len(inner)), sum: checksum(inner)},
		{clen: int64(len(rframe)) - r1 - int64(len(g)), ulen: int64(len(p) - len(x) - len(inner))},
	}
	frames[3].sum = checksum(p[len(x)+len(inner):])
	comp = appendSeekTable(comp, frames, true)
	return comp, []int64{int64(len(hdr) + len(x)), int64(len(inner))}
}

// toolFrames compresses the header and each tensor of orig with the zstd
// tool, one frame each (content size and checksum, as the tool writes by
// default), and appends a seek table with checksums.
func toolFrames(t testing.TB, orig []byte) []byte {
	sr, err := safetensors.NewReader(bytes.NewReader(orig), int64(len(orig)))
	if err != nil {
		t.Fatal(err)
	}
	cuts := []int64{0, sr.DataOffset()}
	for _, ti := range sr.Tensors {
		cuts = append(cuts, sr.DataOffset()+ti.DataOffsets[1])
	}
	dir := t.TempDir()
	var comp []byte
	var frames []frame
	for k := 1; k < len(cuts); k++ {
		seg := orig[cuts[k-1]:cuts[k]]
		in := filepath.Join(dir, "seg")
		if err := os.WriteFile(in, seg, 0o644); err != nil {
			t.Fatal(err)
		}
		if out, err := exec.Command("zstd", "-q", "-f", "-3", in, "-o", in+".zst").CombinedOutput(); err != nil {
			t.Fatalf("zstd: %v\n%s", err, out)
		}
		z, err := os.ReadFile(in + ".zst")
		if err != nil {
			t.Fatal(err)
		}
		comp = append(comp, z...)
		frames = append(frames, frame{clen: int64(len(z)), ulen: int64(len(seg)), sum: checksum(seg)})
	}
	return appendSeekTable(comp, frames, true)
}

// cutAtFrame returns comp cut at the end of frame k: the seek table is gone.
func cutAtFrame(t testing.TB, comp []byte, k int) []byte {
	fs := mustTable(t, comp)
	return bytes.Clone(comp[:fs[k].coff+fs[k].clen])
}

// dropLastFrame removes the last frame and its seek table entry: the table
// is consistent, the original's header says more.
func dropLastFrame(t testing.TB, comp []byte) []byte {
	fs := mustTable(t, comp)
	last := fs[len(fs)-1]
	return appendSeekTable(bytes.Clone(comp[:last.coff]), fs[:len(fs)-1], true)
}

func craftedCompressed(t testing.TB) []craftedEntry {
	const by = "go: compressed/crafted_test.go"
	two := twoTensorModel(t, 4096)
	var out []craftedEntry
	for _, c := range []struct {
		codec Codec
		ext   string
	}{{Zstd, ".zst"}, {LZ4, ".lz4"}} {
		comp := compressBytes(t, two, WithCodec(c.codec), WithFrameSize(4096), WithConcurrency(1))
		p := string(c.codec) + "_"
		hidden, read := hiddenFrame(t, c.codec)
		out = append(out,
			craftedEntry{Name: p + "frames_swapped.safetensors" + c.ext, Class: "out-of-place", MadeBy: by, Error: "checksum", ToolRestores: true,
				Attack: "the frames of tensors a and b (same sizes) exchanged, the seek table left as written: each frame is intact, only the seek table's checksum for the position tells", data: swapFrames(t, comp, 1, 2)},
			craftedEntry{Name: p + "frame_duplicated.safetensors" + c.ext, Class: "out-of-place", MadeBy: by, Error: "checksum", ToolRestores: true,
				Attack: "tensor a's frame written again over tensor b's", data: copyFrameOver(t, comp, 1, 2)},
			craftedEntry{Name: p + "hidden_frame.safetensors" + c.ext, Class: "out-of-place", MadeBy: by, Error: "corrupt", Read: read, ToolRestores: true,
				Attack: "a seek table entry points at a complete frame hidden in the raw block of another frame: it decodes and matches its checksum on its own, but the frames read in sequence never contain it", data: hidden},
			craftedEntry{Name: p + "cut_at_frame_boundary.safetensors" + c.ext, Class: "truncated", MadeBy: by, Error: "corrupt", ToolRestores: true, NotSeekable: true,
				Attack: "cut after the frame of tensor a: the seek table is gone, what is left is a valid stream of a prefix of the file", data: cutAtFrame(t, comp, 1)},
			craftedEntry{Name: p + "sizes_shifted.safetensors" + c.ext, Class: "out-of-place", MadeBy: by, Error: "corrupt", ToolRestores: true,
				Attack: "the seek table's decompressed sizes of the frames of a and b shifted by 8 bytes (a longer, b shorter, the total kept): the frames are as written, their positions in the original are not", data: shiftSizes(t, comp, 1, 2, -8)},
			craftedEntry{Name: p + "last_frame_dropped.safetensors" + c.ext, Class: "truncated", MadeBy: by, Error: "corrupt", ToolRestores: true,
				Attack: "the last frame and its seek table entry removed: the table is consistent, the original's header describes more bytes", data: dropLastFrame(t, comp)},
		)
	}
	if _, err := exec.LookPath("zstd"); err == nil {
		tool := toolFrames(t, two)
		out = append(out, craftedEntry{Name: "zstd_tool_frames_swapped.safetensors.zst", Class: "out-of-place", MadeBy: by + " with the zstd 1.5 tool's frames", Error: "checksum", ToolRestores: true,
			Attack: "frames written by the zstd tool (content size and checksum), a seek table with checksums, the frames of a and b exchanged", data: swapFrames(t, tool, 1, 2)})
	}
	g := compressBytes(t, two, WithCodec(Grouped), WithFrameSize(4096), WithConcurrency(1))
	out = append(out,
		craftedEntry{Name: "grouped_chunks_swapped.grouped.safetensors", Class: "out-of-place", MadeBy: by, Error: "checksum",
			Attack: "the chunk tensors of a and b renamed into each other's place (chunk 000000 <-> 000001): both intact, each in the other's position", data: swapChunkNames(t, g)},
		craftedEntry{Name: "grouped_chunk_byte_flipped.grouped.safetensors", Class: "corrupted", MadeBy: by, Error: "checksum",
			Attack: "one byte of chunk 000000's payload flipped: the container and its index are intact, only the chunk's checksum tells", data: flipChunkByte(t, g)},
		craftedEntry{Name: "grouped_last_chunk_dropped.grouped.safetensors", Class: "truncated", MadeBy: by, Error: "corrupt",
			Attack: "the last chunk removed with its tensor entry and chunk index entry: the container is consistent, the original header describes more bytes", data: dropLastChunk(t, g)},
	)
	return out
}

// shiftSizes moves d bytes of decompressed size from seek table entry i to
// entry j, keeping the total, the frames and the checksums as written.
func shiftSizes(t testing.TB, comp []byte, i, j int, d int64) []byte {
	fs := mustTable(t, comp)
	fs[i].ulen -= d
	fs[j].ulen += d
	return appendSeekTable(bytes.Clone(comp[:fs[len(fs)-1].coff+fs[len(fs)-1].clen]), fs, true)
}

// flipChunkByte flips one byte in the middle of chunk 000000's payload.
func flipChunkByte(t testing.TB, g []byte) []byte {
	sr, err := safetensors.NewReader(bytes.NewReader(g), int64(len(g)), safetensors.WithoutDecompression())
	if err != nil {
		t.Fatal(err)
	}
	for _, tn := range sr.Tensors {
		if strings.HasPrefix(tn.Name, "000000/") {
			out := bytes.Clone(g)
			out[sr.DataOffset()+tn.DataOffsets[0]+(tn.DataOffsets[1]-tn.DataOffsets[0])/2] ^= 0x10
			return out
		}
	}
	t.Fatal("no chunk 000000")
	return nil
}

func swapChunkNames(t testing.TB, g []byte) []byte {
	return rewriteGrouped(t, g, func(_ map[string]string, ts map[string]map[string]any) {
		var a, b string
		for k := range ts {
			switch {
			case strings.HasPrefix(k, "000000/"):
				a = k
			case strings.HasPrefix(k, "000001/"):
				b = k
			}
		}
		ts[a], ts[b] = ts[b], ts[a]
	})
}

func dropLastChunk(t testing.TB, g []byte) []byte {
	sr, err := safetensors.NewReader(bytes.NewReader(g), int64(len(g)), safetensors.WithoutDecompression())
	if err != nil {
		t.Fatal(err)
	}
	last := sr.Tensors[len(sr.Tensors)-1]
	cut := rewriteGrouped(t, g, func(m map[string]string, ts map[string]map[string]any) {
		delete(ts, last.Name)
		var ulens []int64
		json.Unmarshal([]byte(m[groupedChunksKey]), &ulens)
		b, _ := json.Marshal(ulens[:len(ulens)-1])
		m[groupedChunksKey] = string(b)
	})
	return cut[:int64(len(cut))-last.Size()]
}

func TestCraftedCompressed(t *testing.T) {
	entries := craftedCompressed(t)
	if *updateCrafted {
		if err := os.MkdirAll(craftedDir, 0o755); err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			if err := os.WriteFile(filepath.Join(craftedDir, e.Name), e.data, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		slices.SortFunc(entries, func(a, b craftedEntry) int { return strings.Compare(a.Name, b.Name) })
		b, _ := json.MarshalIndent(entries, "", "  ")
		if err := os.WriteFile(filepath.Join(craftedDir, "INDEX.json"), append(b, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, e := range entries {
		if b, err := os.ReadFile(filepath.Join(craftedDir, e.Name)); err != nil || !bytes.Equal(b, e.data) {
			t.Errorf("%s: committed file differs from the generator (go test ./compressed -run TestCraftedCompressed -update): %v", e.Name, err)
		}
	}
	b, err := os.ReadFile(filepath.Join(craftedDir, "INDEX.json"))
	if err != nil {
		t.Fatal(err)
	}
	var idx []craftedEntry
	if err := json.Unmarshal(b, &idx); err != nil {
		t.Fatal(err)
	}
	if len(idx) < len(entries) || len(idx) < 16 {
		t.Fatalf("INDEX.json lists %d files, the generators %d", len(idx), len(entries))
	}
	for _, e := range idx {
		t.Run(e.Name, func(t *testing.T) {
			comp, err := os.ReadFile(filepath.Join(craftedDir, e.Name))
			if err != nil {
				t.Fatal(err)
			}
			want := e.sentinel()
			// Whole decompression (the stream path too, for a file that
			// lost its seek table), and random access of every byte.
			if e.NotSeekable {
				if _, err := decompressBytes(comp); !errors.Is(err, want) {
					t.Fatalf("Decompress: %v, want %v", err, want)
				}
				want = ErrNotSeekable
			}
			expectRefusedAny(t, comp, nil, []error{want, e.sentinel()})
			// Transparent Open reads the original's header and every
			// tensor: refused at open or at the first tensor read.
			path := filepath.Join(t.TempDir(), e.Name)
			os.WriteFile(path, comp, 0o644)
			if f, err := safetensors.Open(path); err == nil {
				var rerr error
				for _, n := range f.Names() {
					tn, _ := f.Tensor(n)
					if _, rerr = tn.Copy(); rerr != nil {
						break
					}
				}
				f.Close()
				if rerr == nil {
					t.Fatal("safetensors.Open read every tensor")
				}
				if !errors.Is(rerr, want) {
					t.Errorf("tensor read: %v, want %v", rerr, want)
				}
			}
			// Verify (validate and scan) refuses what the reads refuse.
			if !e.NotSeekable {
				ra, err := NewReaderAt(bytes.NewReader(comp), int64(len(comp)))
				if err == nil {
					err = ra.Verify(context.Background())
					ra.Close()
				}
				if !errors.Is(err, want) {
					t.Errorf("Verify: %v, want %v", err, want)
				}
			}
			if e.Read != nil {
				ra, err := NewReaderAt(bytes.NewReader(comp), int64(len(comp)))
				if err != nil {
					t.Fatal(err)
				}
				defer ra.Close()
				buf := make([]byte, e.Read[1])
				if _, err := ra.ReadAt(buf, e.Read[0]); !errors.Is(err, want) {
					t.Fatalf("random read of bytes %d+%d: %v (got %q...), want %v", e.Read[0], e.Read[1], err, buf[:8], want)
				}
				if err := ra.ReadRuns([][]byte{buf[:16], buf[16:32]}, []int64{e.Read[0], e.Read[0] + 100}); !errors.Is(err, want) {
					t.Fatalf("ReadRuns: %v, want %v", err, want)
				}
			}
			if e.ToolRestores {
				tool := "zstd"
				if strings.HasPrefix(e.Name, "lz4") {
					tool = "lz4"
				}
				if _, err := exec.LookPath(tool); err != nil {
					t.Logf("%s not installed: not checking that it restores the file", tool)
					return
				}
				out := filepath.Join(t.TempDir(), "out")
				args := []string{"-d", "-q", "-f", path, out}
				if tool == "zstd" {
					args = []string{"-d", "-q", "-f", path, "-o", out}
				}
				if msg, err := exec.Command(tool, args...).CombinedOutput(); err != nil {
					t.Fatalf("%s -d fails (the file is meant to be one the tool accepts): %v\n%s", tool, err, msg)
				}
			}
		})
	}
}

// TestToolFramesRead: a seekable file whose frames the zstd tool wrote
// reads back exactly, through random access and Decompress, and `zstd -d`
// restores it.
func TestToolFramesRead(t *testing.T) {
	needTool(t, "zstd")
	orig := genModel(t, safetensors.BF16, 256<<10, 30)
	comp := toolFrames(t, orig)
	if got := mustDecompress(t, comp); !bytes.Equal(got, orig) {
		t.Fatal("Decompress of the tool's frames differs from the original")
	}
	ra, err := NewReaderAt(bytes.NewReader(comp), int64(len(comp)))
	if err != nil {
		t.Fatal(err)
	}
	defer ra.Close()
	buf := make([]byte, 1000)
	off := ra.Size() - 5000
	if _, err := ra.ReadAt(buf, off); err != nil || !bytes.Equal(buf, orig[off:off+1000]) {
		t.Fatalf("random read: %v", err)
	}
	if ra.Stats().FramesDecoded > 2 {
		t.Errorf("random read of 1000 bytes decoded %d frames", ra.Stats().FramesDecoded)
	}
}
