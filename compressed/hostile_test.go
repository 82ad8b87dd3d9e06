package compressed

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/go-json-experiment/json"
	"github.com/klauspost/compress/zstd"

	"github.com/gosafetensors/safetensors"
)

// expectRefused checks that comp cannot be read: NewReaderAt or reading
// every byte fails with an error wrapping want, and Decompress fails too.
// Whatever is returned before the error is never wrong bytes.
func expectRefused(t *testing.T, comp, orig []byte, want error, opts ...ReadOption) {
	expectRefusedAny(t, comp, orig, []error{want}, opts...)
}

func isAny(err error, wants []error) bool {
	for _, w := range wants {
		if errors.Is(err, w) {
			return true
		}
	}
	return false
}

// expectRefusedAny is expectRefused where any of wants will do.
func expectRefusedAny(t *testing.T, comp, orig []byte, want []error, opts ...ReadOption) {
	t.Helper()
	out, err := decompressBytes(comp, opts...)
	if err == nil {
		t.Fatalf("Decompress accepted the file (%d bytes, equal to the original: %v)", len(out), bytes.Equal(out, orig))
	}
	if !isAny(err, want) {
		t.Errorf("Decompress error %q does not wrap %v", err, want)
	}
	var e *Error
	if !errors.As(err, &e) {
		t.Errorf("Decompress error %T is not a *compressed.Error", err)
	}
	ra, err := NewReaderAt(bytes.NewReader(comp), int64(len(comp)), opts...)
	if err != nil {
		if !isAny(err, want) {
			t.Errorf("NewReaderAt error %q does not wrap %v", err, want)
		}
		return
	}
	buf := make([]byte, ra.Size())
	n, err := ra.ReadAt(buf, 0)
	if err == nil {
		t.Fatalf("ReadAt of %d bytes succeeded", n)
	}
	if !isAny(err, want) {
		t.Errorf("ReadAt error %q does not wrap %v", err, want)
	}
}

func seekTableOffset(comp []byte) (int, int) {
	n := int(binary.LittleEndian.Uint32(comp[len(comp)-9:]))
	es := 8
	if comp[len(comp)-5]&checksumFlag != 0 {
		es = 12
	}
	return len(comp) - 9 - n*es, es // first entry, entry size
}

func TestHostileSeekTable(t *testing.T) {
	orig := genModel(t, safetensors.BF16, 256<<10, 11)
	for _, codec := range []Codec{Zstd, LZ4} {
		good := compressBytes(t, orig, WithCodec(codec), WithFrameSize(64<<10))
		entries, es := seekTableOffset(good)
		mutate := func(f func(b []byte)) []byte {
			b := bytes.Clone(good)
			f(b)
			return b
		}
		le := binary.LittleEndian
		cases := []struct {
			name string
			comp []byte
			want error
			opts []ReadOption
		}{
			{"frame claims 4 GiB", mutate(func(b []byte) { le.PutUint32(b[entries+4:], 0xFFFFFFFF) }), ErrLimit, nil},
			{"frame above the cap", good, ErrLimit, []ReadOption{WithMaxFrameSize(1000)}},
			{"decompressed size one short", mutate(func(b []byte) { le.PutUint32(b[entries+es+4:], le.Uint32(b[entries+es+4:])-1) }), ErrCorrupt, nil},
			{"decompressed size one long", mutate(func(b []byte) { le.PutUint32(b[entries+es+4:], le.Uint32(b[entries+es+4:])+1) }), ErrCorrupt, nil},
			{"compressed sizes shifted", mutate(func(b []byte) {
				le.PutUint32(b[entries:], le.Uint32(b[entries:])+1)
				le.PutUint32(b[entries+es:], le.Uint32(b[entries+es:])-1)
			}), ErrCorrupt, nil},
			{"frames overrun the table", mutate(func(b []byte) { le.PutUint32(b[entries:], le.Uint32(b[entries:])+100) }), ErrCorrupt, nil},
			{"zero compressed size", mutate(func(b []byte) { le.PutUint32(b[entries:], 0) }), ErrCorrupt, nil},
			{"2^32-1 frames", mutate(func(b []byte) { le.PutUint32(b[len(b)-9:], 0xFFFFFFFF) }), ErrLimit, nil},
			{"more frames than the file holds", mutate(func(b []byte) { le.PutUint32(b[len(b)-9:], 1<<20) }), ErrCorrupt, nil},
			{"more frames than allowed", good, ErrLimit, []ReadOption{WithMaxFrames(2)}},
			{"reserved descriptor bits", mutate(func(b []byte) { b[len(b)-5] |= 0x04 }), ErrCorrupt, nil},
			{"skippable frame size wrong", mutate(func(b []byte) { le.PutUint32(b[entries-4:], le.Uint32(b[entries-4:])+1) }), ErrCorrupt, nil},
			{"byte flipped in a frame", mutate(func(b []byte) { b[entries/2] ^= 0x10 }), ErrCorrupt, nil},
			{"truncated", good[:len(good)-1], ErrCorrupt, nil},
		}
		if codec == LZ4 { // lz4 frames are checked against the seek table's checksum
			cases = append(cases, struct {
				name string
				comp []byte
				want error
				opts []ReadOption
			}{"seek table checksum wrong", mutate(func(b []byte) { b[entries+es+8] ^= 1 }), ErrChecksum, nil})
		}
		for _, tc := range cases {
			t.Run(string(codec)+"/"+tc.name, func(t *testing.T) {
				want := tc.want
				if tc.name == "byte flipped in a frame" {
					// Either the decoder or a checksum notices; both are fine.
					_, err := decompressBytes(tc.comp)
					if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrChecksum) {
						t.Fatalf("flipped byte: %v", err)
					}
					return
				}
				// A size that lies is caught as corrupt or as over the
				// claimed size; a truncated file has lost its seek table.
				wants := []error{want}
				switch tc.name {
				case "decompressed size one short", "decompressed size one long":
					wants = append(wants, ErrLimit)
				case "truncated":
					wants = append(wants, ErrNotSeekable)
				}
				expectRefusedAny(t, tc.comp, orig, wants, tc.opts...)
			})
		}
	}
}

// TestZstdBomb: a frame without a declared size that decompresses to far
// more than the seek table says is stopped at the claimed size.
func TestZstdBomb(t *testing.T) {
	var fb bytes.Buffer
	zw, _ := zstd.NewWriter(&fb, zstd.WithEncoderCRC(true))
	zw.Write(make([]byte, 32<<20)) // 32 MiB of zeros: a few KiB compressed, no content size
	zw.Close()
	var h zstd.Header
	if err := h.Decode(fb.Bytes()); err != nil || h.HasFCS {
		t.Fatalf("test frame: %v, content size present %v", err, h.HasFCS)
	}
	comp := appendSeekTable(bytes.Clone(fb.Bytes()), []frame{{clen: int64(fb.Len()), ulen: 1024}}, false)
	expectRefused(t, comp, nil, ErrLimit)
}

// rewriteGrouped re-encodes a grouped container's header after edit has
// changed its metadata or tensor entries; the data section is kept.
func rewriteGrouped(t testing.TB, comp []byte, edit func(meta map[string]string, tensors map[string]map[string]any)) []byte {
	t.Helper()
	sr, err := safetensors.NewReader(bytes.NewReader(comp), int64(len(comp)), safetensors.WithoutDecompression())
	if err != nil {
		t.Fatal(err)
	}
	meta := sr.Meta()
	tensors := map[string]map[string]any{}
	for _, ti := range sr.Tensors {
		tensors[ti.Name] = map[string]any{"dtype": ti.DType.String(), "shape": ti.Shape, "data_offsets": []int64{ti.DataOffsets[0], ti.DataOffsets[1]}}
	}
	edit(meta, tensors)
	all := map[string]any{"__metadata__": meta}
	for k, v := range tensors {
		all[k] = v
	}
	hdr, err := json.Marshal(all, json.Deterministic(true))
	if err != nil {
		t.Fatal(err)
	}
	out := binary.LittleEndian.AppendUint64(nil, uint64(len(hdr)))
	out = append(out, hdr...)
	return append(out, comp[sr.DataOffset():]...)
}

func TestHostileGrouped(t *testing.T) {
	orig := genModel(t, safetensors.BF16, 256<<10, 12)
	good := compressBytes(t, orig, WithCodec(Grouped), WithFrameSize(64<<10))
	if same := rewriteGrouped(t, good, func(map[string]string, map[string]map[string]any) {}); !bytes.Equal(mustDecompress(t, same), orig) {
		t.Fatal("rewriteGrouped changes the content")
	}
	first := func(tensors map[string]map[string]any, prefix string) string {
		for k := range tensors {
			if strings.HasPrefix(k, prefix) {
				return k
			}
		}
		t.Fatalf("no tensor %s*", prefix)
		return ""
	}
	cases := []struct {
		name string
		edit func(meta map[string]string, tensors map[string]map[string]any)
		want error
	}{
		{"chunks overlap", func(_ map[string]string, ts map[string]map[string]any) {
			off := ts[first(ts, "000001/")]["data_offsets"].([]int64)
			off[0]--
		}, ErrCorrupt},
		{"chunk points outside the file", func(_ map[string]string, ts map[string]map[string]any) {
			off := ts[first(ts, "000005/")]["data_offsets"].([]int64)
			off[1] += 1000
		}, ErrCorrupt},
		{"chunk number twice", func(_ map[string]string, ts map[string]map[string]any) {
			a, b := first(ts, "000001/"), first(ts, "000002/")
			ts["000001/again"] = ts[b]
			delete(ts, b)
			_ = a
		}, ErrCorrupt},
		{"chunk number out of range", func(_ map[string]string, ts map[string]map[string]any) {
			a := first(ts, "000003/")
			ts["999999/x"] = ts[a]
			delete(ts, a)
		}, ErrCorrupt},
		{"chunk is not U8", func(_ map[string]string, ts map[string]map[string]any) {
			ts[first(ts, "000002/")]["dtype"] = "I8"
		}, ErrCorrupt},
		{"index claims a longer chunk", func(m map[string]string, _ map[string]map[string]any) {
			m[groupedChunksKey] = strings.Replace(m[groupedChunksKey], "65536", "65538", 1)
		}, ErrCorrupt},
		{"index claims a 4 GiB chunk", func(m map[string]string, _ map[string]map[string]any) {
			m[groupedChunksKey] = strings.Replace(m[groupedChunksKey], "65536", "4294967295", 1)
		}, ErrLimit},
		{"index is not a list", func(m map[string]string, _ map[string]map[string]any) { m[groupedChunksKey] = `{"a":1}` }, ErrCorrupt},
		{"index is too short", func(m map[string]string, _ map[string]map[string]any) { m[groupedChunksKey] = `[1]` }, ErrCorrupt},
		{"original header altered", func(m map[string]string, _ map[string]map[string]any) {
			m[groupedHeaderKey] = strings.Replace(m[groupedHeaderKey], "layers.0", "layers.9", 1)
		}, ErrChecksum},
		{"unknown version", func(m map[string]string, _ map[string]map[string]any) { m[groupedKey] = "3" }, ErrCorrupt},
		{"version 1 (chunks not bound to positions)", func(m map[string]string, _ map[string]map[string]any) { m[groupedKey] = "1" }, ErrCorrupt},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			expectRefused(t, rewriteGrouped(t, good, tc.edit), orig, tc.want)
		})
	}
	t.Run("byte flipped in every chunk", func(t *testing.T) {
		sr, _ := safetensors.NewReader(bytes.NewReader(good), int64(len(good)), safetensors.WithoutDecompression())
		for _, ti := range sr.Tensors {
			for _, at := range []int64{0, 1, ti.Size() / 2, ti.Size() - 1} {
				b := bytes.Clone(good)
				b[sr.DataOffset()+ti.DataOffsets[0]+at] ^= 0x21
				_, err := decompressBytes(b)
				if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrChecksum) {
					t.Fatalf("%s byte %d flipped: %v", ti.Name, at, err)
				}
			}
		}
	})
}

func mustDecompress(t *testing.T, comp []byte) []byte {
	t.Helper()
	b, err := decompressBytes(comp)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestErrorsNameFileFrameOffset: errors carry the file, the frame and the
// byte offset.
func TestErrorsNameFileFrameOffset(t *testing.T) {
	orig := genModel(t, safetensors.BF16, 256<<10, 13)
	comp := compressBytes(t, orig, WithFrameSize(64<<10))
	entries, _ := seekTableOffset(comp)
	b := bytes.Clone(comp)
	binary.LittleEndian.PutUint32(b[entries+12+4:], 0xFFFFFFFF)
	_, err := NewReaderAt(bytes.NewReader(b), int64(len(b)), WithName("m.safetensors.zst"))
	want := fmt.Sprintf("m.safetensors.zst: frame 1: frame claims 4294967295 decompressed bytes, more than the limit of %d (at byte %d)", DefaultMaxFrameSize, entries+12)
	if err == nil || err.Error() != want {
		t.Errorf("error %q\nwant  %q", err, want)
	}
}

// TestIOErrorsStayIOErrors: a failing reader's error is returned as it is,
// not as a format error.
func TestIOErrorsStayIOErrors(t *testing.T) {
	orig := genModel(t, safetensors.BF16, 256<<10, 14)
	comp := compressBytes(t, orig, WithCodec(Grouped), WithFrameSize(64<<10))
	boom := errors.New("disk on fire")
	fr := &failingReader{r: bytes.NewReader(comp), after: int64(len(comp)) / 2, err: boom}
	ra, err := NewReaderAt(fr, int64(len(comp)))
	if err != nil {
		t.Fatal(err)
	}
	_, err = ra.ReadAt(make([]byte, ra.Size()), 0)
	if !errors.Is(err, boom) || errors.Is(err, ErrCorrupt) {
		t.Errorf("error %v: want the I/O error, not a format error", err)
	}
}

type failingReader struct {
	r     *bytes.Reader
	after int64
	err   error
}

// ReadAt fails every read that touches bytes [after, after+1024).
func (f *failingReader) ReadAt(p []byte, off int64) (int, error) {
	if off+int64(len(p)) > f.after && off < f.after+1024 {
		return 0, f.err
	}
	return f.r.ReadAt(p, off)
}

// TestMaxSize: a stream that decompresses to more than WithMaxSize allows
// is stopped, as is a seekable file whose table says so.
func TestMaxSize(t *testing.T) {
	var fb bytes.Buffer
	zw, _ := zstd.NewWriter(&fb)
	zw.Write(genModel(t, safetensors.BF16, 8<<20, 16))
	zw.Close()
	if _, err := decompressBytes(fb.Bytes(), WithMaxSize(1<<20)); !errors.Is(err, ErrMaxSize) || !errors.Is(err, ErrLimit) {
		t.Errorf("stream: %v, want ErrLimit", err)
	}
	orig := genModel(t, safetensors.BF16, 64<<10, 15)
	comp := compressBytes(t, orig)
	if _, err := decompressBytes(comp, WithMaxSize(int64(len(orig)-1))); !errors.Is(err, ErrMaxSize) || !errors.Is(err, ErrLimit) {
		t.Errorf("seekable: %v, want ErrLimit", err)
	}
	if got, err := decompressBytes(comp, WithMaxSize(int64(len(orig)))); err != nil || !bytes.Equal(got, orig) {
		t.Errorf("at the limit: %v", err)
	}
}

// TestStreamIOErrorStaysIOError: an I/O failure under a plain stream is
// returned as that error, not as corrupt data.
func TestStreamIOErrorStaysIOError(t *testing.T) {
	var fb bytes.Buffer
	zw, _ := zstd.NewWriter(&fb)
	zw.Write(genModel(t, safetensors.F32, 1<<20, 17)) // 1 MiB that compresses little
	zw.Close()
	if fb.Len() < 64<<10 {
		t.Fatalf("test stream of %d bytes is too small", fb.Len())
	}
	boom := errors.New("network gone")
	fr := &failingReader{r: bytes.NewReader(fb.Bytes()), after: int64(fb.Len()) / 2, err: boom}
	_, err := Decompress(context.Background(), io.Discard, fr, int64(fb.Len()))
	if !errors.Is(err, boom) || errors.Is(err, ErrCorrupt) {
		t.Errorf("error %v: want the I/O error, not a format error", err)
	}
}

// TestRatioBomb: 48 copies of one 64 MiB zero frame (a few KiB each) claim
// 3 GiB from ~100 KB; every full read would decode all of it. Opening
// refuses it (ErrLimit) unless the ratio cap is lifted; an honest file
// with the same frame once is read.
func TestRatioBomb(t *testing.T) {
	var fb bytes.Buffer
	zw, _ := zstd.NewWriter(&fb, zstd.WithEncoderCRC(true), zstd.WithZeroFrames(true))
	zw.Write(make([]byte, 64<<20))
	zw.Close()
	one := fb.Bytes()
	// zeros is a file of one U8 tensor of n frames of 64 MiB of zeros: a
	// header frame, then the frame of zeros n times.
	zeros := func(n int) []byte {
		size := int64(n) << 26
		hdr := fmt.Appendf(nil, `{"z":{"dtype":"U8","shape":[%d],"data_offsets":[0,%d]}}`, size, size)
		for len(hdr)%8 != 0 {
			hdr = append(hdr, ' ')
		}
		hdr = append(binary.LittleEndian.AppendUint64(nil, uint64(len(hdr))), hdr...)
		enc, _ := zstd.NewWriter(nil)
		comp := enc.EncodeAll(hdr, nil)
		frames := []frame{{clen: int64(len(comp)), ulen: int64(len(hdr))}}
		for range n {
			comp = append(comp, one...)
			frames = append(frames, frame{clen: int64(len(one)), ulen: 64 << 20})
		}
		return appendSeekTable(comp, frames, false)
	}
	comp := zeros(48)
	if _, err := NewReaderAt(bytes.NewReader(comp), int64(len(comp))); !errors.Is(err, ErrLimit) || !strings.Contains(err.Error(), "bomb") {
		t.Fatalf("NewReaderAt of a %d-byte file claiming 3 GiB: %v, want ErrLimit", len(comp), err)
	}
	if _, err := Decompress(context.Background(), io.Discard, bytes.NewReader(comp), int64(len(comp)), WithMaxRatio(1000)); !errors.Is(err, ErrLimit) {
		t.Fatalf("Decompress: %v, want ErrLimit", err)
	}
	ra, err := NewReaderAt(bytes.NewReader(comp), int64(len(comp)), WithMaxRatio(0))
	if err != nil {
		t.Fatalf("with the cap lifted: %v", err)
	}
	ra.Close()
	small := zeros(1)
	if ra, err := NewReaderAt(bytes.NewReader(small), int64(len(small))); err != nil {
		t.Fatalf("64 MiB of zeros in %d bytes (within the 1 GiB slack): %v", len(small), err)
	} else {
		ra.Close()
	}
	if _, err := NewReaderAt(bytes.NewReader(small), int64(len(small)), WithMaxRatio(-1)); !errors.Is(err, ErrOption) {
		t.Errorf("WithMaxRatio(-1): %v", err)
	}
}
