package torchoracle

// Mutants of files that are another format (safetensors, a compressed
// container) whose first bytes torch.load reads as a pickle: the legacy
// path unpickles any file that is not a zip from byte 0, whatever else it
// is. A scan must judge them as torch does (package audit's
// TestPolyglotOracle).

import (
	"encoding/binary"
	"fmt"
	"github.com/gosafetensors/safetensors"
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
		if len(b) == 0 {
			break // cut to nothing
		}
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

// Header-call mutants: valid safetensors files, named and shaped like
// Hugging Face models, whose header length's bytes are opcodes that push
// builtin values (None, True, (), [], {}, a set) and then act on them: a
// call opcode (REDUCE, BUILD, APPEND, OBJ, NEWOBJ, READONLY_BUFFER...), or
// a string opcode whose length runs into the header JSON, where letters of
// tensor names and dtypes are opcodes too ("data" holds APPEND and
// TUPLE). CPython raises on such a call having imported nothing, so a scan
// must find them clean and validate must accept them (package audit's
// TestHeaderCallOracle); where CPython goes on, whatever it imports must
// be named.

var (
	hcValues   = []byte{'N', ')', ']', '}', 0x88, 0x89, 0x8f, 'K'}
	hcCalls    = []byte{'R', 'b', 'a', 'e', 's', 'u', 'o', 0x81, 0x92, 0x90, 0x98, 0x93, 't', 'd', 'l', '0', '1', '2'}
	hcStrings  = []byte{'U', 'C', 0x8c, 0x8a}      // 1-byte length
	hcStrings4 = []byte{'T', 'X', 'B', 0x8b}       // 4-byte length
	hcPrefixes = []byte{'(', 0x97, 'N', ')', 0x88} // before a value
)

// hcNames are tensor names of real models' state dicts, by family.
var hcNames = [][]string{
	{"model.embed_tokens.weight", "model.layers.%d.self_attn.q_proj.weight", "model.layers.%d.self_attn.k_proj.weight", "model.layers.%d.self_attn.v_proj.weight", "model.layers.%d.self_attn.o_proj.weight", "model.layers.%d.mlp.gate_proj.weight", "model.layers.%d.mlp.up_proj.weight", "model.layers.%d.mlp.down_proj.weight", "model.layers.%d.input_layernorm.weight", "model.layers.%d.post_attention_layernorm.weight", "model.norm.weight", "lm_head.weight"},
	{"transformer.wte.weight", "transformer.wpe.weight", "transformer.h.%d.attn.c_attn.bias", "transformer.h.%d.attn.c_attn.weight", "transformer.h.%d.attn.c_proj.weight", "transformer.h.%d.ln_1.weight", "transformer.h.%d.mlp.c_fc.bias", "transformer.h.%d.attn.masked_bias", "transformer.ln_f.weight"},
	{"bert.embeddings.word_embeddings.weight", "bert.embeddings.position_ids", "bert.encoder.layer.%d.attention.self.query.weight", "bert.encoder.layer.%d.attention.output.LayerNorm.gamma", "bert.encoder.layer.%d.intermediate.dense.bias", "cls.predictions.bias"},
	{"shared.weight", "encoder.block.%d.layer.0.SelfAttention.q.weight", "decoder.block.%d.layer.1.EncDecAttention.relative_attention_bias.weight", "encoder.final_layer_norm.weight"},
	{"conv_in.weight", "down_blocks.%d.resnets.0.conv1.weight", "up_blocks.%d.attentions.1.transformer_blocks.0.attn1.to_q.weight", "time_embedding.linear_1.bias"},
	{"lora_unet_down_blocks_%d_attentions_0_proj_in.lora_down.weight", "lora_unet_down_blocks_%d_attentions_0_proj_in.lora_up.weight", "lora_unet_down_blocks_%d_attentions_0_proj_in.alpha", "lora_te_text_model_encoder_layers_%d_mlp_fc1.alpha"},
	{"模型.层.%d.权重", "ñandú.%d.bias", "emb😀.weight", "Ünïcödé.%d", "_orig_mod.fc.weight", "module.fc.%d.weight"},
}

var hcDTypes = []safetensors.DType{safetensors.F32, safetensors.F16, safetensors.BF16, safetensors.F64, safetensors.I64, safetensors.I32,
	safetensors.I8, safetensors.U8, safetensors.BOOL, safetensors.F8_E4M3, safetensors.F8_E5M2, safetensors.U16, safetensors.C64}

// hcModel is a small realistic safetensors file.
func hcModel(rng *rand.Rand) []byte {
	fam := hcNames[rng.IntN(len(hcNames))]
	dt := hcDTypes[rng.IntN(len(hcDTypes))]
	seen := map[string]bool{}
	var ts []safetensors.TensorData
	for l := range 1 + rng.IntN(4) {
		for _, f := range fam {
			name := f
			if strings.Contains(f, "%d") {
				name = fmt.Sprintf(f, l)
			}
			if seen[name] {
				continue
			}
			seen[name] = true
			d := dt
			if rng.IntN(6) == 0 {
				d = hcDTypes[rng.IntN(len(hcDTypes))]
			}
			shape := [][]int64{{}, {0}, {int64(1 + rng.IntN(4))}, {int64(1 + rng.IntN(3)), int64(1 + rng.IntN(3))}}[rng.IntN(4)]
			n := int64(d.Bits() / 8)
			for _, s := range shape {
				n *= s
			}
			data := make([]byte, n)
			for i := range data {
				data[i] = byte(rng.IntN(256))
			}
			ts = append(ts, safetensors.TensorData{Name: name, DType: d, Shape: shape, Data: data})
		}
	}
	var md map[string]string
	switch rng.IntN(3) {
	case 1:
		md = map[string]string{"format": "pt"}
	case 2:
		md = map[string]string{"ss_network_dim": "32", "ss_tag_frequency": `{"img": {"1girl": 3}}`, "modelspec.title": "LoRA ✨"}
	}
	b, err := safetensors.Marshal(ts, md)
	if err != nil {
		panic(err)
	}
	return b
}

// HeaderCallMutant makes mutant i of seed: a valid safetensors file and
// a description of its header length.
func HeaderCallMutant(seed uint64, i int) (data []byte, desc string) {
	rng := rand.New(rand.NewPCG(seed, uint64(i)+0x5851f42d4c957f2d))
	pick := func(s []byte) byte { return s[rng.IntN(len(s))] }
	f := hcModel(rng)
	h := binary.LittleEndian.Uint64(f)
	js := strings.TrimRight(string(f[8:8+h]), " ")
	// where a string opcode's payload could end: before a letter of the
	// JSON that is an opcode acting on the stack (APPEND in "data",
	// BUILD in "bias", TUPLE in "dtype"...), or anywhere
	var at []int
	for j := range min(len(js), 250) {
		if strings.IndexByte("abRoeustdl012", js[j]) >= 0 {
			at = append(at, j)
		}
	}
	pos := rng.IntN(min(len(js), 250))
	if len(at) > 0 && rng.IntN(4) > 0 {
		pos = at[rng.IntN(len(at))]
	}
	var n uint64
	switch rng.IntN(4) {
	case 0: // two values (or a MARK, a buffer), then what acts on them
		n = uint64(pick(hcPrefixes)) | uint64(pick(hcValues))<<8 | uint64(pick(hcCalls))<<16
	case 1, 2: // a value or a MARK, then a string whose 1-byte length runs
		// into the JSON (its payload: bytes 3 to 3+L, the JSON from 8)
		first := hcValues
		if rng.IntN(3) == 0 {
			first = hcPrefixes
		}
		n = uint64(pick(first)) | uint64(pick(hcStrings))<<8 | uint64(pos+5)<<16
	default: // a string whose 4-byte length (the zeros above it) runs
		// into the JSON (its payload: bytes 5 to 5+L)
		n = uint64(pick(hcStrings4)) | uint64(pos+3)<<8
	}
	if n&0xff == 'K' {
		n = n&^0xff | 'N' // BININT1 would take the next byte as its argument
	}
	if n>>8&0xff == 'K' {
		n = n&^0xff00 | ')'<<8
	}
	for n < uint64(len(js)) {
		n += 1 << 16 // a longer 4-byte length: the payload then runs past the JSON
	}
	return stBytes(n, js, f[8+h:]), fmt.Sprintf("header length %#x, %d-byte JSON %.40q...", n, len(js), js)
}
