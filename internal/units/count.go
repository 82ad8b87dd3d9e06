package units

import (
	"math"
	"strconv"
)

// Count spells a count (parameters, elements) with three significant
// digits and a K, M, B, T or Q suffix, the way the Hugging Face Hub
// shows sizes ("137M", "8.03B"), always three digits so that counts shown
// side by side read alike: "1.60K" beside "1.58K", not "1.6K". Counts
// below 1000 are exact ("999").
func Count(n int64) string {
	if n < 0 {
		if n == math.MinInt64 {
			return "-9223Q"
		}
		return "-" + Count(-n)
	}
	if n < 1000 {
		return strconv.FormatInt(n, 10)
	}
	suffixes := []string{"K", "M", "B", "T", "Q"}
	v := float64(n)
	for u, s := range suffixes {
		v /= 1000
		prec := 2
		switch {
		case v >= 99.95:
			prec = 0
		case v >= 9.995:
			prec = 1
		}
		out := strconv.FormatFloat(v, 'f', prec, 64)
		// Rounded up to 1000: say "1.00M", not "1000K".
		if r, _ := strconv.ParseFloat(out, 64); r < 1000 || u == len(suffixes)-1 {
			return out + s
		}
	}
	panic("unreachable")
}

// Digits writes n with thousands separators: "137,022,464".
func Digits(n int64) string {
	if n < 0 {
		if n == math.MinInt64 {
			return "-" + DigitsU(1<<63)
		}
		return "-" + DigitsU(uint64(-n))
	}
	return DigitsU(uint64(n))
}

// DigitsU is Digits for a uint64.
func DigitsU(n uint64) string {
	s := strconv.FormatUint(n, 10)
	b := make([]byte, 0, len(s)+len(s)/3)
	for i := range len(s) {
		if i > 0 && (len(s)-i)%3 == 0 {
			b = append(b, ',')
		}
		b = append(b, s[i])
	}
	return string(b)
}
