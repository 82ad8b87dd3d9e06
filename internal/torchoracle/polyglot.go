package torchoracle

// Mutants of files that are another format (safetensors, a compressed
// container) whose first bytes torch.load reads as a pickle: the legacy
// path unpickles any file that is not a zip from byte 0, whatever else it
// is. A scan must judge them as torch does (package audit's
// TestPolyglotOracle).

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
)

// Polyglot families, as PolyglotMutant's kind says.
const (
	// PolyglotHeaderName: a safetensors file whose header length
	// 80 04 47 00... is PROTO 4 + BINFLOAT and whose first tensor name
	// goes on as a pickle (printable ASCII and two-byte UTF-8 sequences),
	// mutated; a mutation may leave it valid or not.
	PolyglotHeaderName = "header-name"
	// PolyglotSkippable: a zstd/LZ4 skippable frame, whose magic's first
	// byte is an opcode, holding a pickle, before a compressed file.
	PolyglotSkippable = "skippable-frame"
	// PolyglotPlain: a valid safetensors file with a random header length
	// (its first bytes random opcodes), random JSON whitespace and tensor
	// data holding payload pickles torch never reads: no false alarms.
	PolyglotPlain = "plain"
)

// polyglotNames are 33-byte strings (a SHORT_BINUNICODE length byte '!'
// that is printable): modules and protocol-4 dotted names.
var polyglotNames = [][2]string{
	{"multiprocessing.popen_spawn_posix", "os.path.os.path.os.path.os.system"},
	{"multiprocessing.popen_spawn_posix", "os.path.os.path.os.path.os.getcwd"},
	{"multiprocessing.popen_spawn_posix", "os.path.os.path.os.path.os.popen_"},
	{"multiprocessing.popen_spawn_posix", "os.path.os.path.os.path.os.sep.xx"},
	{"not a module name, with spaces ..", "os.path.os.path.os.path.os.system"},
	{"multiprocessing.popen_spawn_posix", "not a name: it has spaces in it.."},
}

// jsonSafe are bytes that may stand anywhere in a JSON string unescaped.
func jsonSafe(rng *rand.Rand) byte {
	for {
		c := byte(0x20 + rng.IntN(0x5f))
		if c != '"' && c != '\\' {
			return c
		}
	}
}

func stBytes(n uint64, js string, data []byte) []byte {
	if uint64(len(js)) > n {
		n = uint64(len(js))
	}
	b := binary.LittleEndian.AppendUint64(nil, n)
	b = append(b, js...)
	b = append(b, strings.Repeat(" ", int(n)-len(js))...)
	return append(b, data...)
}

// PolyglotMutant makes mutant i of seed; zst is a compressed safetensors
// file (seekable zstd) for the skippable-frame family. It returns the
// file, its family and a description.
func PolyglotMutant(seed uint64, i int, zst []byte) (data []byte, kind, desc string) {
	rng := rand.New(rand.NewPCG(seed, uint64(i)+0x9e3779b97f4a7c15))
	switch k := rng.IntN(8); {
	case k < 3:
		return headerName(rng)
	case k < 5:
		return skippable(rng, zst)
	default:
		return plain(rng)
	}
}

func headerName(rng *rand.Rand) ([]byte, string, string) {
	nm := polyglotNames[rng.IntN(len(polyglotNames))]
	arg := "echo polyglot-oracle-mutant-arg.."
	ops := "K\u008c!" + nm[0] + "q " +
		"K\u008c!" + nm[1] + "q\u00880" +
		"K\u008c!" + arg + "q\u00c80" +
		"h h\u0093"
	call := rng.IntN(2) == 0
	if call {
		ops += "h\u00c5R."
	} else {
		ops += "."
	}
	b := []byte(ops)
	desc := fmt.Sprintf("%s.%s call=%v", nm[0], nm[1], call)
	for range rng.IntN(3) {
		switch rng.IntN(3) {
		case 0: // a byte replaced by another printable one
			j := rng.IntN(len(b))
			if b[j] < 0x80 {
				old := b[j]
				b[j] = jsonSafe(rng)
				desc += fmt.Sprintf("; byte %d %q->%q", j, old, b[j])
			}
		case 1: // cut short: the name ends, JSON goes on
			j := rng.IntN(len(b))
			for j > 0 && b[j] >= 0x80 && b[j] < 0xc0 {
				j--
			}
			b = b[:j]
			desc += fmt.Sprintf("; cut at %d", j)
		default: // a printable byte inserted
			j := rng.IntN(len(b) + 1)
			for j < len(b) && b[j] >= 0x80 && b[j] < 0xc0 {
				j++
			}
			c := jsonSafe(rng)
			b = slices.Insert(b, j, c)
			desc += fmt.Sprintf("; %q inserted at %d", c, j)
		}
	}
	js := `{"a` + string(b) + `":{"dtype":"U8","shape":[4],"data_offsets":[0,4]}}`
	n := binary.LittleEndian.Uint64([]byte("\x80\x04G\x00\x00\x00\x00\x00"))
	return stBytes(n, js, []byte{1, 2, 3, 4}), PolyglotHeaderName, desc
}

func skippable(rng *rand.Rand, zst []byte) ([]byte, string, string) {
	magic := uint32(0x184D2A50 + rng.IntN(16))
	if rng.IntN(2) == 0 {
		magic = 0x184D2A55 // 'U': SHORT_BINSTRING of 42 bytes
	}
	var p []byte
	desc := fmt.Sprintf("magic %08x", magic)
	switch rng.IntN(3) {
	case 0:
		p = payloadPickle(rng)
		desc += ", a protocol 2 payload pickle"
	case 1:
		p = append(payload(rng, ""), 'N', '.')
		desc += ", payload opcodes"
	default:
		p = append([]byte("cposix\nsystem\n(S'true'\ntR"), []byte(".")...)
		desc += ", a protocol 0 os.system call"
	}
	for range rng.IntN(2) {
		j := rng.IntN(len(p))
		p[j] = byte(rng.IntN(256))
		desc += fmt.Sprintf("; byte %d of the pickle random", j)
	}
	pad := 36
	if rng.IntN(4) == 0 {
		pad = rng.IntN(48)
		desc += fmt.Sprintf("; pickle at frame offset %d", pad)
	}
	body := append([]byte(strings.Repeat("A", pad)), p...)
	size := 256 // a frame size whose bytes 00 01 00 00 are valid UTF-8
	if len(body) > size {
		size = 512
	}
	body = append(body, strings.Repeat(" ", size-len(body))...)
	b := binary.LittleEndian.AppendUint32(nil, magic)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(body)))
	b = append(append(b, body...), zst...)
	return b, PolyglotSkippable, desc
}

func plain(rng *rand.Rand) ([]byte, string, string) {
	var data []byte
	for range 1 + rng.IntN(3) {
		data = append(data, '.', 0x80, 2)
		data = append(data, payloadPickle(rng)...)
		data = append(data, byte(rng.IntN(256)))
	}
	ws := func() string {
		return []string{"", " ", "\n", "\t", "\r\n", "\n\n"}[rng.IntN(6)]
	}
	js := "{" + ws() + `"model.layer.0.weight"` + ws() + ":" + ws() + fmt.Sprintf(`{"dtype":"U8","shape":[%d],"data_offsets":[0,%d]}`, len(data), len(data)) + ws() + "}"
	// a header length whose low bytes are any opcode (or none)
	n := uint64(len(js)) + uint64(rng.IntN(600))
	if rng.IntN(2) == 0 {
		n = uint64(rng.IntN(256)) | uint64(1+rng.IntN(64))<<8
	}
	return stBytes(n, js, data), PolyglotPlain, fmt.Sprintf("header length %#x, %d bytes of tensor data with payload pickles", max(n, uint64(len(js))), len(data))
}
