package source

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"

	"github.com/gosafetensors/safetensors"
	"github.com/gosafetensors/safetensors/torch/tarlist"

	"github.com/gosafetensors/safetensors/internal/sniff"
)

// Format is what a location holds, decided by content, never by name.
type Format int

const (
	// Unknown content: not recognisably any format below. Sources still try
	// the checkpoint decoder on it (a protocol 0/1 pickle has no magic), and
	// Hint says what it looks like.
	Unknown Format = iota
	// Safetensors is a file whose first bytes are a plausible safetensors
	// prefix: a header length within the limit and the file, then "{".
	// Whether it is valid is for validation to say.
	Safetensors
	// Index is a sharded model's index (model.safetensors.index.json).
	Index
	// TorchZip is a zip archive: a torch.save checkpoint, or not.
	TorchZip
	// TorchPickle is a pickle stream or tar archive: a legacy torch.save
	// checkpoint, a bare pickle, or a torch < 0.4 tar.
	TorchPickle
	// Compressed is a safetensors file in one of the compressed containers
	// (seekable zstd, LZ4 frames, byte-grouped).
	Compressed
	// Directory is a folder or an object-store prefix.
	Directory
)

var formatNames = [...]string{"unknown", "safetensors", "index", "pytorch-zip", "pytorch-pickle", "compressed", "directory"}

func (f Format) String() string {
	if f < 0 || int(f) >= len(formatNames) {
		return "unknown"
	}
	return formatNames[f]
}

// describe names the format in a sentence ("a sharded model's index").
func (f Format) describe() string {
	switch f {
	case Safetensors:
		return "a safetensors file"
	case Index:
		return "a sharded model's index"
	case TorchZip:
		return "a PyTorch checkpoint (zip)"
	case TorchPickle:
		return "a pickle (a legacy PyTorch checkpoint?)"
	case Compressed:
		return "a compressed safetensors file"
	case Directory:
		return "a directory"
	}
	return "unrecognised content"
}

// Checkpoint reports whether f is a PyTorch container.
func (f Format) Checkpoint() bool { return f == TorchZip || f == TorchPickle }

// PrefixSize is how many leading bytes detection looks at.
const PrefixSize = sniff.PrefixSize

// maxHeader is the reference's header size limit.
const maxHeader = 100_000_000

// Detect decides the format of r (size bytes) from its content, the one
// way the module does it (every opener, the audit's directory walks, the
// CLI): a zip archive, a safetensors header, a pickle's PROTO opcode, a tar
// archive as Python's tarfile accepts one (what torch.load falls back to,
// package torch/tarlist), a sharded model's index, or a compressed
// container (asked of the decompressors registered with the root package,
// safetensors.Container: their seek tables are at the end). It also
// returns a plain-words hint when the content is not what a model file
// should be (package internal/sniff). It reads the first PrefixSize bytes,
// a tar header's extension blocks and a container's footer; only I/O
// failures are errors.
func Detect(r io.ReaderAt, size int64) (Format, string, error) {
	prefix := make([]byte, min(max(size, 0), PrefixSize))
	if n, err := r.ReadAt(prefix, 0); err != nil && !(errors.Is(err, io.EOF) && n == len(prefix)) {
		return Unknown, "", err
	}
	f, hint, _, err := detect(r, prefix, size)
	return f, hint, err
}

// detect is Detect with the prefix already read; for a Compressed object
// it also returns the decompressor that recognised it.
func detect(r io.ReaderAt, prefix []byte, size int64) (Format, string, *safetensors.Decompressor, error) {
	f, hint := detectPrefix(r, prefix, size)
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

func detectPrefix(r io.ReaderAt, prefix []byte, size int64) (Format, string) {
	switch {
	case size == 0:
		return Unknown, sniff.Diagnose(prefix, size)
	case bytes.HasPrefix(prefix, []byte("PK\x03\x04")), bytes.HasPrefix(prefix, []byte("PK\x05\x06")),
		bytes.HasPrefix(prefix, []byte("PK\x07\x08")):
		return TorchZip, ""
	case plausibleSafetensors(prefix, size):
		// before the pickle test: a header length of 0x380 starts with
		// the bytes of a PROTO 3 opcode
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
