package compressed

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/go-json-experiment/json"

	"github.com/gosafetensors/safetensors"
)

// Metadata keys of a grouped container (version 1).
const (
	groupedChunksKey = groupedKey + ".chunks"          // JSON array: decompressed length of chunk i
	groupedHeaderKey = groupedKey + ".header"          // the original header JSON, exactly
	groupedSumKey    = groupedKey + ".header_checksum" // hex low 32 bits of XXH64 of prefix + header
)

type groupedIndex struct {
	prefix []byte // the original 8-byte length and header
	frames []frame
	size   int64
}

// readGroupedIndex parses and validates a grouped container: a valid
// safetensors file, version 1, whose tensors are chunks "<i>/<name>" of
// dtype U8 numbered 0..n-1, each with a decompressed length in the index.
func readGroupedIndex(r io.ReaderAt, size int64, maxFrame, maxHeader int64) (*groupedIndex, error) {
	opts := []safetensors.Option{safetensors.WithoutDecompression()}
	if maxHeader > 0 {
		// the container's header holds the original's and the chunk
		// index (about 80 bytes per chunk): twice the bound and 1 MiB
		opts = append(opts, safetensors.WithMaxHeaderSize(2*maxHeader+1<<20))
	}
	sr, err := safetensors.NewReader(r, size, opts...)
	if err != nil {
		var fe *safetensors.FormatError
		if errors.As(err, &fe) {
			return nil, &Error{Frame: -1, Offset: -1, Msg: "grouped container is not a valid safetensors file", Err: ErrCorrupt, Cause: err}
		}
		return nil, err
	}
	meta := sr.Metadata
	if v := meta[groupedKey]; v == "1" {
		return nil, newErr(ErrCorrupt, -1, -1, "grouped container version 1 is no longer read: its chunk checksums do not bind a chunk to its position, so swapped chunks would decode as data; compress the original again (version %s)", groupedVersion)
	} else if v != groupedVersion {
		return nil, newErr(ErrCorrupt, -1, -1, "grouped container version %q is not supported (want %q)", v, groupedVersion)
	}
	hdr, ok := meta[groupedHeaderKey]
	if !ok {
		return nil, newErr(ErrCorrupt, -1, -1, "grouped container has no %s", groupedHeaderKey)
	}
	if maxHeader > 0 && int64(len(hdr)) > maxHeader {
		return nil, &Error{Frame: -1, Offset: -1, Msg: "grouped container's original header is too large", Err: ErrLimit,
			Cause: fmt.Errorf("%w: header length %d exceeds the limit of %d bytes", safetensors.ErrHeaderTooLarge, len(hdr), maxHeader)}
	}
	var ulens []int64
	if err := json.Unmarshal([]byte(meta[groupedChunksKey]), &ulens); err != nil {
		return nil, &Error{Frame: -1, Offset: -1, Msg: "grouped container chunk index " + groupedChunksKey + " is not an array of integers", Err: ErrCorrupt, Cause: err}
	}
	if len(ulens) != len(sr.Tensors) {
		return nil, newErr(ErrCorrupt, -1, -1, "chunk index lists %d chunks, the container holds %d tensors", len(ulens), len(sr.Tensors))
	}
	g := &groupedIndex{frames: make([]frame, len(ulens))}
	g.prefix = binary.LittleEndian.AppendUint64(make([]byte, 0, 8+len(hdr)), uint64(len(hdr)))
	g.prefix = append(g.prefix, hdr...)
	if want, got := meta[groupedSumKey], fmt.Sprintf("%08x", checksum(g.prefix)); want != got {
		return nil, newErr(ErrChecksum, -1, -1, "original header does not match its checksum %q", want)
	}
	seen := make([]bool, len(ulens))
	base := sr.DataOffset()
	for _, t := range sr.Tensors {
		i, err := chunkNumber(t.Name, len(ulens))
		if err != nil {
			return nil, err
		}
		if seen[i] {
			return nil, newErr(ErrCorrupt, i, base+t.DataOffsets[0], "tensor %q: chunk %d appears twice", t.Name, i)
		}
		seen[i] = true
		if t.DType != safetensors.U8 || len(t.Shape) != 1 {
			return nil, newErr(ErrCorrupt, i, base+t.DataOffsets[0], "tensor %q: chunks are 1-D U8 tensors, not %s %v", t.Name, t.DType, t.Shape)
		}
		f := &g.frames[i]
		f.coff, f.clen, f.ulen = base+t.DataOffsets[0], t.Size(), ulens[i]
		if f.ulen < 0 || f.ulen > maxFrame {
			return nil, newErr(ErrLimit, i, f.coff, "tensor %q: chunk claims %d decompressed bytes (limit %d)", t.Name, f.ulen, maxFrame)
		}
		if f.clen < chunkOver {
			return nil, newErr(ErrCorrupt, i, f.coff, "tensor %q: chunk of %d bytes is too short", t.Name, f.clen)
		}
	}
	off := int64(len(g.prefix))
	for i := range g.frames {
		g.frames[i].uoff = off
		off += g.frames[i].ulen // at most 2^26 chunks of at most 2^32 bytes: no overflow
	}
	g.size = off
	want, err := originalSize(bytes.NewReader(g.prefix))
	if err != nil {
		return nil, err
	}
	if want != g.size {
		return nil, incomplete(GroupedFormat, g.size, want)
	}
	return g, nil
}

// chunkNumber parses the "<i>/" prefix of a chunk tensor's name.
func chunkNumber(name string, n int) (int, error) {
	digits, _, ok := strings.Cut(name, "/")
	i, err := strconv.Atoi(digits)
	if !ok || err != nil || i < 0 || i >= n || digits != fmt.Sprintf("%06d", i) {
		return 0, newErr(ErrCorrupt, -1, -1, "tensor %q is not a chunk: names are <chunk number>/<tensor>, chunk numbers below %d", name, n)
	}
	return i, nil
}

func chunkName(i int, tensor string) string { return fmt.Sprintf("%06d/%s", i, tensor) }

// groupedHeader encodes the container header (without the 8-byte prefix):
// metadata first, then the chunk tensors in order with their data offsets.
func groupedHeader(origHeader []byte, names []string, ulens, clens []int64) ([]byte, error) {
	var b []byte
	b = append(b, `{"__metadata__":{`...)
	b = appendJSONString(b, groupedKey)
	b = append(b, ':')
	b = appendJSONString(b, groupedVersion)
	b = append(b, ',')
	b = appendJSONString(b, groupedChunksKey)
	b = append(b, ':')
	var idx []byte
	idx = append(idx, '[')
	for i, u := range ulens {
		if i > 0 {
			idx = append(idx, ',')
		}
		idx = strconv.AppendInt(idx, u, 10)
	}
	idx = append(idx, ']')
	b = appendJSONString(b, string(idx))
	b = append(b, ',')
	b = appendJSONString(b, groupedHeaderKey)
	b = append(b, ':')
	b = appendJSONString(b, string(origHeader))
	b = append(b, ',')
	b = appendJSONString(b, groupedSumKey)
	b = append(b, ':')
	prefix := binary.LittleEndian.AppendUint64(make([]byte, 0, 8+len(origHeader)), uint64(len(origHeader)))
	b = appendJSONString(b, fmt.Sprintf("%08x", checksum(append(prefix, origHeader...))))
	b = append(b, '}')
	var off int64
	for i, name := range names {
		b = append(b, ',')
		b = appendJSONString(b, name)
		b = append(b, `:{"dtype":"U8","shape":[`...)
		b = strconv.AppendInt(b, clens[i], 10)
		b = append(b, `],"data_offsets":[`...)
		b = strconv.AppendInt(b, off, 10)
		b = append(b, ',')
		off += clens[i]
		b = strconv.AppendInt(b, off, 10)
		b = append(b, "]}"...)
	}
	b = append(b, '}')
	if len(b) > safetensors.DefaultMaxHeaderSize {
		return nil, fmt.Errorf("compressed: grouped container header of %d bytes exceeds the safetensors limit of %d", len(b), safetensors.DefaultMaxHeaderSize)
	}
	return b, nil
}

// appendJSONString escapes like the reference writer: '"', '\\' and bytes
// below 0x20.
func appendJSONString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"' || c == '\\':
			b = append(b, '\\', c)
		case c == '\n':
			b = append(b, '\\', 'n')
		case c == '\t':
			b = append(b, '\\', 't')
		case c == '\r':
			b = append(b, '\\', 'r')
		case c < 0x20:
			b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&15])
		default:
			b = append(b, c)
		}
	}
	return append(b, '"')
}
