// Package npy writes and reads the header of NumPy's .npy array format, so
// that a tensor extracted from a safetensors file opens with numpy.load.
//
// A .npy file is the magic "\x93NUMPY", a version, a little-endian header
// length, and a Python dict literal giving the dtype, the memory order and
// the shape, padded with spaces and a newline so that the array data starts
// on a 64-byte boundary. Version 1.0 is written when the header fits in a
// 16-bit length, else 2.0.
package npy

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/gosafetensors/safetensors"
)

// Magic starts every .npy file.
const Magic = "\x93NUMPY"

// align is the boundary numpy aligns array data to.
const align = 64

// maxHeader bounds the header ReadHeader accepts (numpy's own limit is 10000
// bytes by default for untrusted input; shapes here are small).
const maxHeader = 1 << 20

// Descr returns the numpy type string for a safetensors dtype, such as "<f4"
// for F32, and false for dtypes numpy has no type for (BF16, the 8-, 6- and
// 4-bit floats).
func Descr(d safetensors.DType) (string, bool) {
	switch d {
	case safetensors.BOOL:
		return "|b1", true
	case safetensors.U8:
		return "|u1", true
	case safetensors.I8:
		return "|i1", true
	case safetensors.I16:
		return "<i2", true
	case safetensors.U16:
		return "<u2", true
	case safetensors.F16:
		return "<f2", true
	case safetensors.I32:
		return "<i4", true
	case safetensors.U32:
		return "<u4", true
	case safetensors.F32:
		return "<f4", true
	case safetensors.I64:
		return "<i8", true
	case safetensors.U64:
		return "<u8", true
	case safetensors.F64:
		return "<f8", true
	case safetensors.C64:
		return "<c8", true
	}
	return "", false
}

// WriteHeader writes a .npy header for a C-order array of the given numpy
// type string and shape; the caller writes the array's bytes after it.
func WriteHeader(w io.Writer, descr string, shape []int64) error {
	if descr == "" || strings.ContainsAny(descr, "'\\\n") {
		return fmt.Errorf("npy: invalid descr %q", descr)
	}
	var dict strings.Builder
	fmt.Fprintf(&dict, "{'descr': '%s', 'fortran_order': False, 'shape': (", descr)
	for i, d := range shape {
		if d < 0 {
			return fmt.Errorf("npy: negative dimension %d in shape %v", d, shape)
		}
		if i > 0 {
			dict.WriteString(", ")
		}
		dict.WriteString(strconv.FormatInt(d, 10))
	}
	if len(shape) == 1 {
		dict.WriteString(",")
	}
	dict.WriteString("), }")

	// Version 1.0 has a 2-byte length, 2.0 a 4-byte one.
	major, lenSize := byte(1), 2
	total := pad(len(Magic) + 2 + lenSize + dict.Len() + 1)
	if total-len(Magic)-2-lenSize > 0xffff {
		major, lenSize = 2, 4
		total = pad(len(Magic) + 2 + lenSize + dict.Len() + 1)
	}
	hlen := total - len(Magic) - 2 - lenSize
	buf := make([]byte, 0, total)
	buf = append(buf, Magic...)
	buf = append(buf, major, 0)
	if lenSize == 2 {
		buf = binary.LittleEndian.AppendUint16(buf, uint16(hlen))
	} else {
		buf = binary.LittleEndian.AppendUint32(buf, uint32(hlen))
	}
	buf = append(buf, dict.String()...)
	for len(buf) < total-1 {
		buf = append(buf, ' ')
	}
	buf = append(buf, '\n')
	_, err := w.Write(buf)
	return err
}

func pad(n int) int { return (n + align - 1) / align * align }

// Header is a parsed .npy header.
type Header struct {
	Major, Minor int
	Descr        string
	FortranOrder bool
	Shape        []int64
	// DataOffset is the offset of the array data from the start of the file.
	DataOffset int64
}

// ReadHeader reads and parses a .npy header from r, leaving r at the start
// of the array data. It understands the dicts numpy and WriteHeader write,
// not arbitrary Python literals.
func ReadHeader(r io.Reader) (*Header, error) {
	var pre [8]byte
	if _, err := io.ReadFull(r, pre[:]); err != nil {
		return nil, fmt.Errorf("npy: reading magic: %w", err)
	}
	if string(pre[:6]) != Magic {
		return nil, errors.New("npy: not a .npy file (bad magic)")
	}
	h := &Header{Major: int(pre[6]), Minor: int(pre[7])}
	var hlen int
	switch h.Major {
	case 1:
		var b [2]byte
		if _, err := io.ReadFull(r, b[:]); err != nil {
			return nil, fmt.Errorf("npy: reading header length: %w", err)
		}
		hlen = int(binary.LittleEndian.Uint16(b[:]))
		h.DataOffset = 10
	case 2, 3:
		var b [4]byte
		if _, err := io.ReadFull(r, b[:]); err != nil {
			return nil, fmt.Errorf("npy: reading header length: %w", err)
		}
		n := binary.LittleEndian.Uint32(b[:])
		if n > maxHeader {
			return nil, fmt.Errorf("npy: header length %d too large", n)
		}
		hlen = int(n)
		h.DataOffset = 12
	default:
		return nil, fmt.Errorf("npy: unsupported version %d.%d", h.Major, h.Minor)
	}
	buf := make([]byte, hlen)
	if _, err := io.ReadFull(r, buf); err != nil {
		return nil, fmt.Errorf("npy: reading header: %w", err)
	}
	h.DataOffset += int64(hlen)
	if err := h.parseDict(string(bytes.TrimRight(buf, " \n"))); err != nil {
		return nil, err
	}
	return h, nil
}

// parseDict parses {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }.
func (h *Header) parseDict(s string) error {
	bad := func(why string) error { return fmt.Errorf("npy: bad header %q: %s", s, why) }
	s, ok := strings.CutPrefix(s, "{")
	if !ok {
		return bad("not a dict")
	}
	s, ok = strings.CutSuffix(strings.TrimSpace(s), "}")
	if !ok {
		return bad("not a dict")
	}
	seen := map[string]bool{}
	for {
		s = strings.TrimLeft(s, " ,")
		if s == "" {
			break
		}
		if s[0] != '\'' {
			return bad("key is not a string")
		}
		end := strings.IndexByte(s[1:], '\'')
		if end < 0 {
			return bad("unterminated key")
		}
		key := s[1 : 1+end]
		s = strings.TrimLeft(s[end+2:], " ")
		if s, ok = strings.CutPrefix(s, ":"); !ok {
			return bad("missing ':'")
		}
		s = strings.TrimLeft(s, " ")
		if seen[key] {
			return bad("duplicate key " + key)
		}
		seen[key] = true
		switch key {
		case "descr":
			if len(s) == 0 || s[0] != '\'' {
				return bad("descr is not a string")
			}
			end := strings.IndexByte(s[1:], '\'')
			if end < 0 {
				return bad("unterminated descr")
			}
			h.Descr, s = s[1:1+end], s[end+2:]
		case "fortran_order":
			switch {
			case strings.HasPrefix(s, "False"):
				h.FortranOrder, s = false, s[5:]
			case strings.HasPrefix(s, "True"):
				h.FortranOrder, s = true, s[4:]
			default:
				return bad("fortran_order is not a bool")
			}
		case "shape":
			if len(s) == 0 || s[0] != '(' {
				return bad("shape is not a tuple")
			}
			end := strings.IndexByte(s, ')')
			if end < 0 {
				return bad("unterminated shape")
			}
			h.Shape = []int64{}
			for f := range strings.SplitSeq(s[1:end], ",") {
				f = strings.TrimSpace(f)
				if f == "" {
					continue
				}
				d, err := strconv.ParseInt(strings.TrimSuffix(f, "L"), 10, 64)
				if err != nil || d < 0 {
					return bad("bad dimension " + f)
				}
				h.Shape = append(h.Shape, d)
			}
			s = s[end+1:]
		default:
			return bad("unknown key " + key)
		}
	}
	if !seen["descr"] || !seen["fortran_order"] || !seen["shape"] {
		return bad("missing key")
	}
	return nil
}
