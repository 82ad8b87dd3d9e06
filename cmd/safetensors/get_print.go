package main

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/gosafetensors/safetensors"
)

// printOptions are numpy's print options (np.set_printoptions): arrays of
// more than threshold elements are summarised, each long dimension shown
// as its first and last edge items around "...", lines wrapped at width.
type printOptions struct {
	threshold int64 // --limit; < 0 never summarises
	edge      int64
	width     int
}

// numpy's defaults: threshold 1000, edgeitems 3, linewidth 75.
const (
	defaultEdgeItems = 3
	defaultLineWidth = 75
)

// printTensor prints the values of t as numpy's array2string(t,
// separator=", ") does: floats in numpy's format (a common layout per
// array, scientific when the magnitudes call for it, "1." for whole
// values), lines wrapped at the terminal's width, long dimensions
// summarised with "..." above the threshold. Only the elements shown are
// read. asF32 shows the values as float32 (--as f32).
func printTensor(w io.Writer, t *safetensors.Tensor, asF32 bool, opt printOptions) error {
	g, err := gather(t, opt)
	if err != nil {
		return err
	}
	cells, err := formatCells(g, t.DType, asF32)
	if err != nil {
		return err
	}
	var out string
	switch {
	case len(t.Shape) == 0:
		out = cells[0]
	case slices.Contains(t.Shape, 0):
		out = "[]"
	default:
		out = layout(cells, g, opt.width)
	}
	_, err = io.WriteString(w, out+"\n")
	return err
}

// gathered holds the elements shown: per dimension the first head and the
// last tail positions (tail is 0 when the dimension is shown whole), in
// row-major order of the shown sub-array.
type gathered struct {
	shape      []int64
	head, tail []int64
	data       []byte // little-endian elements, shown sub-array order
	summarised bool
}

// gather reads the elements printing shows: all of them up to the
// threshold, else the edges of each long dimension, one slice per
// combination of first and last edges (2^d slices for d long dimensions).
func gather(t *safetensors.Tensor, opt printOptions) (*gathered, error) {
	g := &gathered{shape: t.Shape, head: slices.Clone(t.Shape), tail: make([]int64, len(t.Shape))}
	n := t.NumElements()
	if opt.threshold >= 0 && n > opt.threshold {
		for d, size := range t.Shape {
			if size > 2*opt.edge {
				g.head[d], g.tail[d], g.summarised = opt.edge, opt.edge, true
			}
		}
	}
	if !g.summarised {
		b, err := t.Copy()
		g.data = b
		return g, err
	}
	size := t.DType.Size() // summarising needs whole-byte elements
	if size == 0 {
		return nil, usageError("cannot summarise %s values (%s): print a part with --slice or extract them with -o", t.DType, plural(n, "value"))
	}
	shown := make([]int64, len(t.Shape))
	count := int64(1)
	for d := range shown {
		shown[d] = g.head[d] + g.tail[d]
		count *= shown[d]
	}
	g.data = make([]byte, count*int64(size))
	var long []int
	for d := range t.Shape {
		if g.tail[d] > 0 {
			long = append(long, d)
		}
	}
	for mask := 0; mask < 1<<len(long); mask++ {
		sel := make([]safetensors.Selector, len(t.Shape))
		at := make([]int64, len(t.Shape)) // where the block starts in the shown array
		for d := range sel {
			sel[d] = safetensors.Range(0, g.head[d])
		}
		for k, d := range long {
			if mask&(1<<k) != 0 {
				sel[d] = safetensors.Range(t.Shape[d]-g.tail[d], t.Shape[d])
				at[d] = g.head[d]
			}
		}
		part, err := t.Slice(sel...)
		if err != nil {
			return nil, err
		}
		b, err := part.Copy()
		if err != nil {
			return nil, err
		}
		placeBlock(g.data, shown, at, part.Shape, b, size)
	}
	return g, nil
}

// placeBlock copies a row-major block of the given shape into dst, a
// row-major array of shape shown, at position at.
func placeBlock(dst []byte, shown, at, shape []int64, src []byte, size int) {
	rows := int64(1)
	for _, s := range shape[:len(shape)-1] {
		rows *= s
	}
	last := shape[len(shape)-1] * int64(size)
	idx := make([]int64, len(shape)-1)
	for r := int64(0); r < rows; r++ {
		off := int64(0)
		for d := range shape {
			pos := at[d]
			if d < len(idx) {
				pos += idx[d]
			}
			off = off*shown[d] + pos
		}
		copy(dst[off*int64(size):], src[r*last:(r+1)*last])
		for d := len(idx) - 1; d >= 0; d-- {
			if idx[d]++; idx[d] < shape[d] {
				break
			}
			idx[d] = 0
		}
	}
}

// formatCells spells every shown element, all of one width, as numpy does
// for the dtype.
func formatCells(g *gathered, dt safetensors.DType, asF32 bool) ([]string, error) {
	if asF32 || dt.IsFloat() && dt != safetensors.F6_E2M3 && dt != safetensors.F6_E3M2 {
		vals := make([]float64, elementsIn(g))
		if err := safetensors.DecodeFloat64(vals, g.data, dt); err != nil {
			return nil, err
		}
		digits := uniqueDigits(dt)
		if asF32 {
			digits = uniqueDigits(safetensors.F32)
			for i, v := range vals {
				vals[i] = float64(float32(v))
			}
		}
		return newFloatFormat(vals, digits, false).all(vals), nil
	}
	le := func(i, size int) []byte { return g.data[i*size : (i+1)*size] }
	n := elementsIn(g)
	cells := make([]string, n)
	switch dt {
	case safetensors.BOOL:
		anyFalse := slices.Contains(g.data, 0)
		for i, b := range g.data {
			switch {
			case b == 0:
				cells[i] = "False"
			case anyFalse:
				cells[i] = " True"
			default:
				cells[i] = "True"
			}
		}
		return cells, nil
	case safetensors.C64:
		re, im := make([]float64, n), make([]float64, n)
		for i := range n {
			b := le(i, 8)
			re[i] = float64(math.Float32frombits(uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 | uint32(b[3])<<24))
			im[i] = float64(math.Float32frombits(uint32(b[4]) | uint32(b[5])<<8 | uint32(b[6])<<16 | uint32(b[7])<<24))
		}
		digits := uniqueDigits(safetensors.F32)
		rf, imf := newFloatFormat(re, digits, false), newFloatFormat(im, digits, true)
		for i := range n {
			// numpy moves the imaginary part's padding after the "j"
			s := imf.format(im[i])
			trimmed := strings.TrimRight(s, " ")
			cells[i] = rf.format(re[i]) + trimmed + "j" + s[len(trimmed):]
		}
		return cells, nil
	}
	size := dt.Size()
	if size == 0 || !isInteger(dt) {
		return nil, usageError("cannot print values of dtype %s: extract the raw bytes with -o FILE.bin", dt)
	}
	signed := dt == safetensors.I8 || dt == safetensors.I16 || dt == safetensors.I32 || dt == safetensors.I64
	width := 0
	for i := range n {
		var u uint64
		for k, c := range le(i, size) {
			u |= uint64(c) << (8 * k)
		}
		if signed && size < 8 && u&(1<<(8*size-1)) != 0 {
			u |= ^uint64(0) << (8 * size) // sign-extend
		}
		if signed {
			cells[i] = strconv.FormatInt(int64(u), 10)
		} else {
			cells[i] = strconv.FormatUint(u, 10)
		}
		width = max(width, len(cells[i]))
	}
	for i, c := range cells {
		cells[i] = strings.Repeat(" ", width-len(c)) + c
	}
	return cells, nil
}

func isInteger(dt safetensors.DType) bool {
	switch dt {
	case safetensors.U8, safetensors.I8, safetensors.I16, safetensors.U16, safetensors.I32, safetensors.U32, safetensors.I64, safetensors.U64:
		return true
	}
	return false
}

func elementsIn(g *gathered) int {
	n := 1
	for d := range g.shape {
		n *= int(g.head[d] + g.tail[d])
	}
	return n
}

// layout nests the cells as numpy's _formatArray does with separator ", ":
// the innermost dimension wrapped at width, outer ones one per line with
// blank lines between blocks, "..." where a dimension is summarised.
func layout(cells []string, g *gathered, width int) string {
	shown := make([]int64, len(g.shape))
	for d := range shown {
		shown[d] = g.head[d] + g.tail[d]
	}
	const sep = ", "
	var rec func(offset int64, depth int, indent string, lineWidth int) string
	rec = func(offset int64, depth int, indent string, lineWidth int) string {
		// offset: index of the first cell of this sub-array
		stride := int64(1)
		for _, s := range shown[depth+1:] {
			stride *= s
		}
		n := shown[depth]
		summary := g.tail[depth] > 0
		next := indent + " "
		var s strings.Builder
		if depth == len(shown)-1 {
			elemWidth := lineWidth - 1 // room for the separator or the "]"
			line := indent
			for i := range n {
				if summary && i == g.head[depth] {
					line = extendLine(&s, line, "...", elemWidth, indent)
					line += sep
				}
				line = extendLine(&s, line, cells[offset+i], elemWidth, indent)
				if i < n-1 {
					line += sep
				}
			}
			s.WriteString(line)
		} else {
			lineSep := strings.TrimRight(sep, " ") + strings.Repeat("\n", len(shown)-1-depth)
			for i := range n {
				if summary && i == g.head[depth] {
					s.WriteString(indent + "..." + lineSep)
				}
				s.WriteString(indent + rec(offset+i*stride, depth+1, next, lineWidth-1))
				if i < n-1 {
					s.WriteString(lineSep)
				}
			}
		}
		return "[" + s.String()[len(indent):] + "]"
	}
	return rec(0, 0, " ", width)
}

// extendLine adds word to line, first starting a new line (written to s)
// when it would not fit in width.
func extendLine(s *strings.Builder, line, word string, width int, indent string) string {
	if len(line)+len(word) > width && len(line) > len(indent) {
		s.WriteString(strings.TrimRight(line, " ") + "\n")
		line = indent
	}
	return line + word
}

// floatFormat is numpy's FloatingFormat in its default mode (precision 8,
// floatmode "maxprec"): a layout common to all values of an array, fixed
// point unless the magnitudes need scientific notation.
type floatFormat struct {
	digits            func(v float64) int // significant digits that identify v in its dtype
	exp               bool
	plus              bool // sign "+" (a complex number's imaginary part)
	padLeft, padRight int
	prec, expSize     int
}

const floatPrecision = 8

func newFloatFormat(vals []float64, digits func(float64) int, plus bool) *floatFormat {
	f := &floatFormat{digits: digits, plus: plus}
	var finite []float64
	minAbs, maxAbs := math.Inf(1), 0.0
	for _, v := range vals {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			continue
		}
		finite = append(finite, v)
		if a := math.Abs(v); a != 0 {
			minAbs, maxAbs = min(minAbs, a), max(maxAbs, a)
		}
	}
	if maxAbs > 0 {
		f.exp = maxAbs >= 1e8 || minAbs < 1e-4 || maxAbs/minAbs > 1000
	}
	switch {
	case len(finite) == 0:
	case f.exp:
		for _, v := range finite {
			mant, exp := f.scientific(v, -1)
			ip, fp, _ := strings.Cut(mant, ".")
			f.padLeft, f.prec, f.expSize = max(f.padLeft, len(ip)), max(f.prec, len(fp)), max(f.expSize, len(exp)-1)
		}
		f.padRight = f.expSize + 2 + f.prec
	default:
		for _, v := range finite {
			ip, fp, _ := strings.Cut(f.positional(v), ".")
			f.padLeft, f.padRight = max(f.padLeft, len(ip)), max(f.padRight, len(fp))
		}
	}
	for _, v := range vals {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			f.padLeft = max(f.padLeft, len(f.nonFinite(v))-(f.padRight+1))
		}
	}
	return f
}

func (f *floatFormat) all(vals []float64) []string {
	out := make([]string, len(vals))
	for i, v := range vals {
		out[i] = f.format(v)
	}
	return out
}

func (f *floatFormat) sign(v float64) string {
	if f.plus && !math.Signbit(v) {
		return "+"
	}
	return ""
}

func (f *floatFormat) nonFinite(v float64) string {
	switch {
	case math.IsNaN(v):
		return f.sign(1) + "nan"
	case v > 0:
		return f.sign(v) + "inf"
	}
	return "-inf"
}

// positional spells v in fixed point with the digits that identify it, at
// most floatPrecision after the point, trailing zeros trimmed but not the
// point ("1.", "0.25", "-3.1415927").
func (f *floatFormat) positional(v float64) string {
	e := exponent10(v)
	frac := min(max(f.digits(v)-1-e, 0), floatPrecision)
	s := strconv.FormatFloat(v, 'f', frac, 64)
	if strings.Contains(s, ".") {
		s = strings.TrimRight(s, "0")
	} else {
		s += "."
	}
	return f.sign(v) + s
}

// scientific spells v as mantissa and exponent ("1.5", "+00"), with prec
// digits after the point, or (prec < 0) those that identify v, at most
// floatPrecision, trailing zeros trimmed.
func (f *floatFormat) scientific(v float64, prec int) (mant, exp string) {
	if prec < 0 {
		prec = min(max(f.digits(v)-1, 0), floatPrecision)
		mant, exp, _ = strings.Cut(strconv.FormatFloat(v, 'e', prec, 64), "e")
		if strings.Contains(mant, ".") {
			mant = strings.TrimRight(mant, "0")
		} else {
			mant += "."
		}
		return f.sign(v) + mant, exp
	}
	mant, exp, _ = strings.Cut(strconv.FormatFloat(v, 'e', prec, 64), "e")
	if !strings.Contains(mant, ".") {
		mant += "."
	}
	return f.sign(v) + mant, exp
}

func (f *floatFormat) format(v float64) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		s := f.nonFinite(v)
		return strings.Repeat(" ", max(f.padLeft+f.padRight+1-len(s), 0)) + s
	}
	if f.exp {
		mant, exp := f.scientific(v, f.prec)
		ip, fp, _ := strings.Cut(mant, ".")
		sign, digits := exp[:1], exp[1:]
		return strings.Repeat(" ", f.padLeft-len(ip)) + ip + "." + fp + "e" + sign + strings.Repeat("0", max(f.expSize-len(digits), 0)) + digits
	}
	ip, fp, _ := strings.Cut(f.positional(v), ".")
	return strings.Repeat(" ", f.padLeft-len(ip)) + ip + "." + fp + strings.Repeat(" ", f.padRight-len(fp))
}

// exponent10 is the decimal exponent of v's leading digit (0 for 0).
func exponent10(v float64) int {
	if v == 0 {
		return 0
	}
	s := strconv.FormatFloat(v, 'e', floatPrecision+9, 64)
	e, _ := strconv.Atoi(s[strings.IndexByte(s, 'e')+1:])
	return e
}

// uniqueDigits returns, for values of dtype dt, how many significant
// digits tell each value from its neighbours in dt: what numpy's dragon4
// prints with unique=True (float32 and float64 as Go's shortest repr;
// F16, BF16 and the 8- and 4-bit floats by rounding candidates back).
func uniqueDigits(dt safetensors.DType) func(float64) int {
	switch dt {
	case safetensors.F64:
		return func(v float64) int { return sigDigits(strconv.FormatFloat(v, 'e', -1, 64)) }
	case safetensors.F32:
		return func(v float64) int { return sigDigits(strconv.FormatFloat(v, 'e', -1, 32)) }
	}
	round := roundTo(dt)
	return func(v float64) int {
		for p := 1; p < 17; p++ {
			c, _ := strconv.ParseFloat(strconv.FormatFloat(v, 'e', p-1, 64), 64)
			if round(c) == v {
				return p
			}
		}
		return 17
	}
}

func sigDigits(e string) int {
	mant, _, _ := strings.Cut(strings.TrimPrefix(e, "-"), "e")
	return len(strings.ReplaceAll(mant, ".", ""))
}

// roundTo returns a function rounding a float64 to the nearest value of
// dtype dt (the F16 and BF16 encoders; a table of every value for the
// 8- and 4-bit floats).
func roundTo(dt safetensors.DType) func(float64) float64 {
	switch dt {
	case safetensors.F16:
		return func(v float64) float64 {
			return float64(safetensors.F16ToFloat32(safetensors.Float32ToF16(float32(v))))
		}
	case safetensors.BF16:
		return func(v float64) float64 {
			return float64(safetensors.BF16ToFloat32(safetensors.Float32ToBF16(float32(v))))
		}
	}
	table := valueTable(dt)
	return func(v float64) float64 {
		i, _ := slices.BinarySearch(table, v)
		best := math.Inf(1)
		for _, j := range []int{i - 1, i} {
			if j >= 0 && j < len(table) && math.Abs(table[j]-v) < math.Abs(best-v) {
				best = table[j]
			}
		}
		return best
	}
}

var valueTables sync.Map // DType -> []float64

// valueTable lists every finite value of a float dtype of at most 8 bits,
// sorted.
func valueTable(dt safetensors.DType) []float64 {
	if t, ok := valueTables.Load(dt); ok {
		return t.([]float64)
	}
	codes := make([]byte, 256)
	for i := range codes {
		codes[i] = byte(i)
	}
	n := 256
	if dt.Bits() == 4 {
		n = 512 // two values per byte
	}
	vals := make([]float64, n)
	if err := safetensors.DecodeFloat64(vals, codes, dt); err != nil {
		return nil
	}
	var finite []float64
	for _, v := range vals {
		if !math.IsNaN(v) && !math.IsInf(v, 0) {
			finite = append(finite, v)
		}
	}
	slices.Sort(finite)
	finite = slices.Compact(finite)
	valueTables.Store(dt, finite)
	return finite
}

// summaryNote says on stderr what a summarised print leaves out.
func summaryNote(w io.Writer, t *safetensors.Tensor, limit int64) {
	fmt.Fprintf(w, "note: %s %s has %s, more than --limit %d: shown summarised (the first and last %d of each long dimension); print a part with --slice, or extract all with -o FILE.npy\n",
		display(t.Name), formatShape(t.Shape), plural(t.NumElements(), "value"), limit, defaultEdgeItems)
}
