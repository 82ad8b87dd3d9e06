// Package detect decides what a file holds from its content, never from
// its name: a safetensors file, a sharded model's index, a PyTorch
// checkpoint (zip, pickle or tar), a compressed safetensors container. It
// is the one detection path of the module: package source presents it
// (source.Detect, every opener and the audit's walks), and package
// sharded, which source imports, asks it directly to tell an index from a
// safetensors file.
package detect

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"

	"github.com/gosafetensors/safetensors"
	"github.com/gosafetensors/safetensors/internal/sniff"
	"github.com/gosafetensors/safetensors/torch"
	"github.com/gosafetensors/safetensors/torch/tarlist"
)

// Format is what content looks like; source.Format documents each value.
type Format int

// Formats, in source.Format's order.
const (
	Unknown Format = iota
	Safetensors
	Index
	TorchZip
	TorchPickle
	Compressed
)

// PrefixSize is how many leading bytes detection looks at.
const PrefixSize = sniff.PrefixSize

// maxHeader is the reference's header size limit.
const maxHeader = 100_000_000

// Detect reads the first PrefixSize bytes of r (size bytes) and decides its
// format with [Prefix]; only I/O failures are errors.
func Detect(r io.ReaderAt, size int64) (Format, string, *safetensors.Decompressor, error) {
	prefix := make([]byte, min(max(size, 0), PrefixSize))
	if n, err := r.ReadAt(prefix, 0); err != nil && !(errors.Is(err, io.EOF) && n == len(prefix)) {
		return Unknown, "", nil, err
	}
	return Prefix(r, prefix, size)
}

// Prefix decides the format of r (size bytes) whose first bytes, up to
// PrefixSize, are prefix: a zip archive, a safetensors header, a pickle's
// PROTO opcode, a tar archive as Python's tarfile accepts one (what
// torch.load falls back to), a sharded model's index, or a compressed
// container (asked of the decompressors registered with the root package:
// their seek tables are at the end); content that is none of these is a
// pickle when torch.load would get anywhere reading it as one (a protocol 0
// or 1 pickle has no magic bytes: torch.Reaches). It returns a plain-words hint
// (package internal/sniff) when the content is not what a model file should
// be, and for a Compressed file the decompressor that recognised it. It
// reads a tar header's extension blocks and a container's footer; only I/O
// failures are errors.
func Prefix(r io.ReaderAt, prefix []byte, size int64) (Format, string, *safetensors.Decompressor, error) {
	f, hint := byPrefix(r, prefix, size)
	if f == Unknown && size > 0 {
		// torch.load reads what is not a zip or a tar as a pickle from
		// byte 0, and a protocol 0 or 1 pickle starts with any opcode:
		// it is one when torch.load would get anywhere reading it
		reaches, err := torch.Reaches(r, size)
		if err != nil {
			return Unknown, "", nil, err
		}
		if reaches {
			return TorchPickle, "", nil, nil
		}
	}
	if f == Unknown || f == Safetensors {
		// a grouped container is a valid safetensors file; zstd and lz4
		// frames are nothing recognisable by their first bytes
		d, err := safetensors.Container(r, size)
		if err != nil {
			return Unknown, "", nil, err
		}
		if d != nil {
			return Compressed, "", d, nil
		}
	}
	return f, hint, nil, nil
}

func byPrefix(r io.ReaderAt, prefix []byte, size int64) (Format, string) {
	switch {
	case size == 0:
		return Unknown, sniff.Diagnose(prefix, size)
	case bytes.HasPrefix(prefix, []byte("PK\x03\x04")), bytes.HasPrefix(prefix, []byte("PK\x05\x06")),
		bytes.HasPrefix(prefix, []byte("PK\x07\x08")):
		return TorchZip, ""
	case plausibleSafetensors(prefix, size):
		// before the pickle test: a header length of 0x380 starts with
		// the bytes of a PROTO 3 opcode; before the index test: a
		// safetensors header is JSON too, and may mention "weight_map"
		return Safetensors, ""
	case len(prefix) >= 2 && prefix[0] == 0x80 && prefix[1] <= 5:
		return TorchPickle, ""
	case tarlist.IsTar(r, size) && !allZero(prefix[:min(len(prefix), tarlist.BlockSize)]):
		// an all-zero block is an empty archive to tarfile, and far more
		// likely a download that never got its data: left to the hint
		return TorchPickle, ""
	case looksLikeIndex(prefix):
		return Index, ""
	}
	return Unknown, sniff.Diagnose(prefix, size)
}

// plausibleSafetensors: a header length that fits the limit and the file,
// then JSON whitespace and "{".
func plausibleSafetensors(p []byte, size int64) bool {
	if len(p) < 9 || size < 10 {
		return false
	}
	n := binary.LittleEndian.Uint64(p)
	if n < 2 || n > maxHeader || int64(n) > size-8 {
		return false
	}
	for _, c := range p[8:min(len(p), 8+int(n))] {
		switch c {
		case ' ', '\t', '\n', '\r':
			continue
		case '{':
			return true
		}
		return false
	}
	return false
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// looksLikeIndex: a JSON object that mentions "weight_map" early on.
func looksLikeIndex(p []byte) bool {
	t := bytes.TrimLeft(p, " \t\r\n")
	return bytes.HasPrefix(t, []byte("{")) && bytes.Contains(p, []byte(`"weight_map"`))
}
