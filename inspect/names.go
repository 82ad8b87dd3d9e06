package inspect

import (
	"slices"
	"strings"

	"github.com/gosafetensors/safetensors"
)

// CompareNames orders tensor names as a person reads them: runs of digits
// compare as numbers, so "h.2" comes before "h.10"; everything else
// compares bytewise. Names that differ only in leading zeros ("h.01",
// "h.1") are ordered bytewise, so the order is total.
func CompareNames(a, b string) int {
	i, j := 0, 0
	for i < len(a) && j < len(b) {
		ca, cb := a[i], b[j]
		if !isDigit(ca) || !isDigit(cb) {
			if ca != cb {
				if ca < cb {
					return -1
				}
				return 1
			}
			i++
			j++
			continue
		}
		// two runs of digits: compare their values
		ei, ej := i, j
		for ei < len(a) && isDigit(a[ei]) {
			ei++
		}
		for ej < len(b) && isDigit(b[ej]) {
			ej++
		}
		na := strings.TrimLeft(a[i:ei], "0")
		nb := strings.TrimLeft(b[j:ej], "0")
		if len(na) != len(nb) {
			if len(na) < len(nb) {
				return -1
			}
			return 1
		}
		if c := strings.Compare(na, nb); c != 0 {
			return c
		}
		i, j = ei, ej
	}
	switch {
	case len(a)-i < len(b)-j:
		return -1
	case len(a)-i > len(b)-j:
		return 1
	}
	return strings.Compare(a, b)
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// ByName returns a copy of tensors ordered by [CompareNames]: the order
// `safetensors inspect` lists them in by default, and the service too.
func ByName(tensors []safetensors.TensorInfo) []safetensors.TensorInfo {
	out := slices.Clone(tensors)
	slices.SortStableFunc(out, func(a, b safetensors.TensorInfo) int { return CompareNames(a.Name, b.Name) })
	return out
}
