package compressed

import (
	"bytes"
	"encoding/binary"
	"io"

	"github.com/gosafetensors/safetensors"
)

// Format is what [Detect] found.
type Format int

// Formats recognised by [Detect].
const (
	None          Format = iota // not compressed (or not recognised)
	ZstdSeekable                // seekable zstd: random access
	LZ4Seekable                 // LZ4 frames with a seek table: random access
	GroupedFormat               // grouped container: random access
	ZstdStream                  // zstd without a seek table: whole-file decompression only
	LZ4Stream                   // LZ4 without a seek table: whole-file decompression only
)

func (f Format) String() string {
	switch f {
	case ZstdSeekable:
		return "zstd (seekable)"
	case LZ4Seekable:
		return "lz4 (seekable)"
	case GroupedFormat:
		return "grouped"
	case ZstdStream:
		return "zstd (stream, not seekable)"
	case LZ4Stream:
		return "lz4 (stream, not seekable)"
	}
	return "uncompressed"
}

// Seekable reports whether the format allows random access.
func (f Format) Seekable() bool {
	return f == ZstdSeekable || f == LZ4Seekable || f == GroupedFormat
}

// groupedMarker starts the container's __metadata__; Detect looks for it in
// the first bytes of the header.
const (
	groupedKey     = "gosafetensors.grouped"
	groupedVersion = "2"
	groupedMarker  = `"` + groupedKey + `":"`
	detectWindow   = 4 << 10
)

// Detect tells from the content of r (size bytes) which compressed format
// it holds, reading only the first bytes and the last four (plus, for a
// safetensors file, up to 4 KiB of its header). A file that is none of them
// is None, with a nil error; only I/O errors are returned.
//
// It is the primitive behind the decompressor this package registers with
// the root package (safetensors.Container), which source.Detect, the
// module's one way of deciding a file's format, asks: to learn what a file
// is, call source.Detect; Detect says which container a compressed file
// uses.
func Detect(r io.ReaderAt, size int64) (Format, error) {
	if size < 4 {
		return None, nil
	}
	head := make([]byte, min(size, 8+detectWindow))
	if err := readFull(r, head, 0); err != nil {
		return None, err
	}
	magic := binary.LittleEndian.Uint32(head)
	seek := false
	if magic == zstdFrameMagic || magic == lz4FrameMagic {
		var err error
		if seek, err = hasSeekFooter(r, size); err != nil {
			return None, err
		}
	}
	switch {
	case magic == zstdFrameMagic && seek:
		return ZstdSeekable, nil
	case magic == zstdFrameMagic:
		return ZstdStream, nil
	case magic == lz4FrameMagic && seek:
		return LZ4Seekable, nil
	case magic == lz4FrameMagic:
		return LZ4Stream, nil
	}
	if len(head) > 9 && head[8] == '{' && bytes.Contains(head[9:], []byte(groupedMarker)) {
		return GroupedFormat, nil
	}
	return None, nil
}

func init() {
	safetensors.RegisterDecompressor(safetensors.Decompressor{
		Name: "compressed (zstd, lz4, grouped)",
		Detect: func(r io.ReaderAt, size int64) (bool, error) {
			f, err := Detect(r, size)
			return f != None, err
		},
		Open: func(r io.ReaderAt, size int64, name string) (io.ReaderAt, int64, error) {
			ra, err := NewReaderAt(r, size, WithName(name))
			if err != nil {
				return nil, 0, err
			}
			return ra, ra.Size(), nil
		},
	})
}
