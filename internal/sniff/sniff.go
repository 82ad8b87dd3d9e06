// Package sniff explains, in plain words, why a file that should be a
// safetensors file is not one. It recognizes the usual real causes: a
// truncated download, an HTML or JSON error page or a Git LFS pointer saved
// under the model's name, a PyTorch checkpoint (zip or pickle) renamed to
// .safetensors, compressed archives and other model formats.
//
// It looks only at the first few KiB of the file and never trusts them: the
// result is a hint for a person, not a verdict.
package sniff

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/gosafetensors/safetensors"
	"github.com/gosafetensors/safetensors/internal/units"
)

// PrefixSize is how many leading bytes of a file Diagnose wants to see.
const PrefixSize = 4096

// Diagnose returns a one-line hint naming what the file whose first bytes
// are prefix (of a file size bytes long) really is, or "" when nothing
// stands out. It recognizes empty files, Git LFS pointers, HTML and JSON
// error pages, zip and pickle PyTorch checkpoints, compressed files, NumPy,
// GGUF and HDF5 files, and plain text.
func Diagnose(prefix []byte, size int64) string {
	if size == 0 {
		return "the file is empty (0 bytes): an interrupted download or a placeholder; download it again"
	}
	if len(prefix) == 0 {
		return ""
	}
	if h := lfsPointer(prefix); h != "" {
		return h
	}
	if h := magic(prefix); h != "" {
		return h
	}
	text := bytes.TrimLeft(bytes.TrimPrefix(prefix, []byte("\xef\xbb\xbf")), " \t\r\n")
	if h := htmlPage(text); h != "" {
		return h
	}
	if h := jsonDoc(text); h != "" {
		return h
	}
	if size < 8 {
		return fmt.Sprintf("the file is only %d bytes: too short to be a safetensors file (an interrupted download?)", size)
	}
	if isText(prefix) {
		return fmt.Sprintf("this is a text file, not a safetensors file; it begins %s", quoteLine(text, 80))
	}
	return ""
}

// Explain returns a hint for err, the error that reading the safetensors
// file r (size bytes long) returned: what Diagnose says about the file's
// first bytes, or for a file shorter than its header declares, how much is
// missing. It returns "" when there is nothing to add to err.
func Explain(r io.ReaderAt, size int64, err error) string {
	if err == nil {
		return ""
	}
	buf := make([]byte, min(size, PrefixSize))
	n, rerr := r.ReadAt(buf, 0)
	if rerr != nil && !errors.Is(rerr, io.EOF) {
		return ""
	}
	if h := Diagnose(buf[:n], size); h != "" {
		return h
	}
	if errors.Is(err, safetensors.ErrMetadataIncompleteBuffer) {
		h, herr := safetensors.ReadHeader(io.NewSectionReader(r, 0, size))
		if herr != nil {
			return ""
		}
		return Truncated(h.FileSize(), size)
	}
	return ""
}

// Truncated explains a file of size bytes whose header declares want bytes.
func Truncated(want, size int64) string {
	switch {
	case size < want:
		return fmt.Sprintf("truncated download? the header describes %s but the file has only %s: %s missing (%.1f%% present); download it again",
			bytesPhrase(want), bytesPhrase(size), bytesPhrase(want-size), 100*float64(size)/float64(want))
	case size > want:
		return fmt.Sprintf("the file has %s more than its header describes (%s): data was appended, or two downloads were joined",
			bytesPhrase(size-want), bytesPhrase(want))
	}
	return ""
}

// lfsPointer recognizes a Git LFS pointer file and reports the real size.
func lfsPointer(p []byte) string {
	if !bytes.HasPrefix(p, []byte("version https://git-lfs.github.com/spec/")) &&
		!bytes.HasPrefix(p, []byte("version https://hawser.github.com/spec/")) {
		return ""
	}
	var oid, sz string
	for line := range strings.Lines(string(p)) {
		line = strings.TrimSpace(line)
		if v, ok := strings.CutPrefix(line, "oid "); ok {
			oid = v
		} else if v, ok := strings.CutPrefix(line, "size "); ok {
			sz = v
		}
	}
	msg := "this is a Git LFS pointer, not the file: run git lfs pull (or git lfs install before cloning)"
	if n, err := strconv.ParseInt(sz, 10, 64); err == nil && n >= 0 {
		msg += fmt.Sprintf("; the real file is %s", bytesPhrase(n))
	}
	if oid != "" && len(oid) <= 80 && isText([]byte(oid)) {
		msg += ", " + oid
	}
	return msg
}

// legacyTorchMagic is how torch.save's legacy (non-zip) format begins: a
// pickle (protocol 2) of the magic number 0x1950a86a20f9469cfc6c.
var legacyTorchMagic = []byte("\x80\x02\x8a\x0a\x6c\xfc\x9c\x46\xf9\x20\x6a\xa8\x50\x19")

// magic recognizes binary formats by their leading bytes.
func magic(p []byte) string {
	const convert = "use `safetensors convert` to make a safetensors file (never torch.load a checkpoint you do not trust)"
	switch {
	case bytes.HasPrefix(p, []byte("PK\x03\x04")):
		if bytes.Contains(p, []byte("data.pkl")) || bytes.Contains(p, []byte("/data/")) {
			return "this is a PyTorch checkpoint (a torch.save zip archive), not a safetensors file: " + convert
		}
		return "this is a zip archive, most likely a PyTorch checkpoint (torch.save): " + convert
	case bytes.HasPrefix(p, []byte("PK\x05\x06")):
		return "this is an empty zip archive, not a safetensors file"
	case bytes.HasPrefix(p, legacyTorchMagic):
		return "this is a PyTorch checkpoint (legacy torch.save format), not a safetensors file: " + convert
	case len(p) >= 2 && p[0] == 0x80 && p[1] >= 2 && p[1] <= 5:
		return fmt.Sprintf("this is a Python pickle (protocol %d), most likely a PyTorch checkpoint: %s", p[1], convert)
	case bytes.HasPrefix(p, []byte("\x1f\x8b")):
		return "this file is gzip-compressed: decompress it first (gunzip)"
	case bytes.HasPrefix(p, []byte("\x28\xb5\x2f\xfd")):
		return "this file is zstd-compressed: decompress it first (zstd -d)"
	case bytes.HasPrefix(p, []byte("\xfd7zXZ\x00")):
		return "this file is xz-compressed: decompress it first (xz -d)"
	case bytes.HasPrefix(p, []byte("BZh")) && len(p) >= 4 && p[3] >= '1' && p[3] <= '9':
		return "this file is bzip2-compressed: decompress it first (bunzip2)"
	case len(p) >= 262 && bytes.Equal(p[257:262], []byte("ustar")):
		return "this is a tar archive: extract it first (tar -xf)"
	case bytes.HasPrefix(p, []byte("\x93NUMPY")):
		return "this is a NumPy .npy array, not a safetensors file"
	case bytes.HasPrefix(p, []byte("GGUF")):
		return "this is a GGUF file (llama.cpp), not a safetensors file"
	case bytes.HasPrefix(p, []byte("\x89HDF\r\n\x1a\n")):
		return "this is an HDF5 file (Keras .h5 weights?), not a safetensors file"
	}
	return ""
}

// htmlPage recognizes an HTML page, such as a login or error page a
// download saved under the model's name.
func htmlPage(text []byte) string {
	head := bytes.ToLower(text[:min(len(text), 512)])
	if !bytes.HasPrefix(head, []byte("<!doctype html")) && !bytes.HasPrefix(head, []byte("<html")) &&
		!(bytes.HasPrefix(head, []byte("<")) && bytes.Contains(head, []byte("<html"))) {
		return ""
	}
	msg := "this is an HTML page, not a model: the download saved an error or login page under the model's name (gated or private repository? a /blob/ URL instead of /resolve/?)"
	if t := htmlTitle(text); t != "" {
		msg += "; page title " + t
	}
	return msg
}

func htmlTitle(text []byte) string {
	lower := bytes.ToLower(text)
	i := bytes.Index(lower, []byte("<title"))
	if i < 0 {
		return ""
	}
	j := bytes.IndexByte(lower[i:], '>')
	if j < 0 {
		return ""
	}
	start := i + j + 1
	end := bytes.Index(lower[start:], []byte("</title"))
	if end < 0 {
		return ""
	}
	t := strings.Join(strings.Fields(string(text[start:start+end])), " ")
	if t == "" {
		return ""
	}
	return quoteLine([]byte(t), 80)
}

// jsonDoc recognizes a JSON document: an API error response, a sharded
// checkpoint's index, or some other JSON file.
func jsonDoc(text []byte) string {
	if len(text) == 0 || text[0] != '{' && text[0] != '[' {
		return ""
	}
	compact := bytes.Join(bytes.Fields(text), nil)
	switch {
	case bytes.HasPrefix(compact, []byte(`{"error`)) || bytes.Contains(compact[:min(len(compact), 200)], []byte(`"error":`)):
		return "this is a JSON error response saved under the model's name, not a model: " + firstLine(text, 160)
	case bytes.Contains(text, []byte(`"weight_map"`)):
		return "this is the index of a sharded checkpoint (model.safetensors.index.json): open the shard files it lists"
	case text[0] == '{':
		return "this is a JSON document, not a safetensors file (a safetensors file starts with an 8-byte header length, then JSON); it begins " + firstLine(text, 80)
	}
	return ""
}

// isText reports whether p looks like printable UTF-8 text. An incomplete
// rune at the end (the prefix was cut) is allowed.
func isText(p []byte) bool {
	for i := 0; i < len(p); {
		r, n := utf8.DecodeRune(p[i:])
		if r == utf8.RuneError && n <= 1 {
			return len(p)-i < utf8.UTFMax && !utf8.FullRune(p[i:])
		}
		if !unicode.IsPrint(r) && !unicode.IsSpace(r) {
			return false
		}
		i += n
	}
	return len(p) > 0
}

// quoteLine returns the first line of text, at most max runes, in quotes.
func quoteLine(text []byte, max int) string { return `"` + firstLine(text, max) + `"` }

// firstLine returns the first line of text, at most max runes, with control
// characters escaped so that they cannot reach the terminal.
func firstLine(text []byte, max int) string {
	line, _, _ := bytes.Cut(text, []byte("\n"))
	s := strings.TrimSpace(strings.ToValidUTF8(string(line), "\uFFFD"))
	var b strings.Builder
	n := 0
	for _, r := range s {
		if n == max {
			b.WriteString("…")
			break
		}
		if unicode.IsPrint(r) {
			b.WriteRune(r)
		} else {
			q := strconv.QuoteRune(r)
			b.WriteString(q[1 : len(q)-1])
		}
		n++
	}
	return b.String()
}

// bytesPhrase spells a size exactly and, when large, in binary units.
func bytesPhrase(n int64) string {
	if n == 1 {
		return "1 byte"
	}
	if n < 1024 {
		return fmt.Sprintf("%d bytes", n)
	}
	return fmt.Sprintf("%d bytes (%s)", n, units.Bytes(n))
}
