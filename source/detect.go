package source

import (
	"io"

	"github.com/gosafetensors/safetensors"
	"github.com/gosafetensors/safetensors/internal/detect"
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
	// checkpoint, a bare pickle, or a torch < 0.4 tar. A pickle of
	// protocol 0 or 1 has no magic bytes: it is one when torch.load would
	// read it as one (torch.Reaches).
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
const PrefixSize = detect.PrefixSize

// Detect decides the format of r (size bytes) from its content, the one
// way the module does it (every opener, the audit's directory walks, the
// CLI, and sharded.Open through the same code, package internal/detect):
// a zip archive, a safetensors header, a pickle's PROTO opcode, a tar
// archive as Python's tarfile accepts one (what torch.load falls back to,
// package torch/tarlist), a sharded model's index, a compressed
// container (asked of the decompressors registered with the root package,
// safetensors.Container: their seek tables are at the end), or a pickle
// of any protocol that torch.load would read as one (torch.Reaches). It also
// returns a plain-words hint when the content is not what a model file
// should be (package internal/sniff). It reads the first PrefixSize bytes,
// a tar header's extension blocks and a container's footer; only I/O
// failures are errors.
func Detect(r io.ReaderAt, size int64) (Format, string, error) {
	f, hint, _, err := detect.Detect(r, size)
	return formats[f], hint, err
}

// formats maps what detection tells to Format.
var formats = [...]Format{
	detect.Unknown:     Unknown,
	detect.Safetensors: Safetensors,
	detect.Index:       Index,
	detect.TorchZip:    TorchZip,
	detect.TorchPickle: TorchPickle,
	detect.Compressed:  Compressed,
}

// detectPrefix is Detect with the prefix already read; for a Compressed
// object it also returns the decompressor that recognised it.
func detectPrefix(r io.ReaderAt, prefix []byte, size int64) (Format, string, *safetensors.Decompressor, error) {
	f, hint, d, err := detect.Prefix(r, prefix, size)
	return formats[f], hint, d, err
}
