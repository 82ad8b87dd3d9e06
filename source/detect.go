package source

import (
	"bytes"
	"encoding/binary"

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

// Detect decides the format of an object of size bytes whose first bytes
// are prefix (up to PrefixSize of them), and returns a plain-words hint when
// the content is not what a model file should be. Compressed containers
// need more than the prefix (a seek table at the end): [Open] asks the
// compressed package about them.
func Detect(prefix []byte, size int64) (Format, string) {
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
	case len(prefix) >= 262 && string(prefix[257:262]) == "ustar":
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

// looksLikeIndex: a JSON object that mentions "weight_map" early on.
func looksLikeIndex(p []byte) bool {
	t := bytes.TrimLeft(p, " \t\r\n")
	return bytes.HasPrefix(t, []byte("{")) && bytes.Contains(p, []byte(`"weight_map"`))
}
