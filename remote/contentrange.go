package remote

import (
	"fmt"
	"strconv"
	"strings"
)

// contentRange is a parsed Content-Range header: bytes first-last/size, or
// bytes */size (unsatisfied, first = last = -1).
type contentRange struct {
	first, last, size int64
}

// parseContentRange parses a Content-Range header strictly: the unit must be
// bytes, the numbers plain decimal without signs, first <= last < size.
func parseContentRange(s string) (contentRange, error) {
	rest, ok := strings.CutPrefix(s, "bytes ")
	if !ok {
		return contentRange{}, fmt.Errorf("Content-Range %q: want \"bytes first-last/size\"", s)
	}
	spec, total, ok := strings.Cut(rest, "/")
	if !ok {
		return contentRange{}, fmt.Errorf("Content-Range %q: no /size", s)
	}
	size, err := parseUint(total)
	if err != nil {
		return contentRange{}, fmt.Errorf("Content-Range %q: size: %v", s, err)
	}
	if spec == "*" {
		return contentRange{-1, -1, size}, nil
	}
	a, b, ok := strings.Cut(spec, "-")
	if !ok {
		return contentRange{}, fmt.Errorf("Content-Range %q: no first-last", s)
	}
	first, err1 := parseUint(a)
	last, err2 := parseUint(b)
	if err1 != nil || err2 != nil || first > last || last >= size {
		return contentRange{}, fmt.Errorf("Content-Range %q: invalid range for a %d-byte object", s, size)
	}
	return contentRange{first, last, size}, nil
}

// parseUint parses a non-empty string of ASCII digits into a non-negative int64.
func parseUint(s string) (int64, error) {
	if s == "" || len(s) > 19 {
		return 0, fmt.Errorf("%q is not a byte count", s)
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, fmt.Errorf("%q is not a byte count", s)
		}
	}
	return strconv.ParseInt(s, 10, 64)
}

func (c contentRange) String() string {
	if c.first < 0 {
		return fmt.Sprintf("bytes */%d", c.size)
	}
	return fmt.Sprintf("bytes %d-%d/%d", c.first, c.last, c.size)
}
