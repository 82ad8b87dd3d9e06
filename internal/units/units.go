// Package units spells byte sizes and counts, the one way every command
// and message of the project does.
package units

import (
	"math"
	"strconv"
)

// Bytes spells a size in binary units with one decimal: "512 B",
// "1.5 KiB", "1.2 GiB".
func Bytes(n int64) string {
	if n < 1024 {
		return strconv.FormatInt(n, 10) + " B"
	}
	names := []string{"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"}
	v := float64(n)
	for u := range names {
		v /= 1024
		if math.Round(v*10)/10 < 1024 || u == len(names)-1 {
			return strconv.FormatFloat(v, 'f', 1, 64) + " " + names[u]
		}
	}
	panic("unreachable")
}
