package sharded

import (
	"fmt"
	"strings"

	"github.com/dustin/go-humanize"
)

// DefaultMaxShardSize is the Hugging Face Hub's default shard limit, 5 GB.
const DefaultMaxShardSize = 5_000_000_000

// maxSize bounds every size this package accepts, so that sums of sizes
// cannot overflow an int64.
const maxSize = 1 << 62

// ParseSize parses a shard size limit: plain bytes ("1048576"), or a number
// with a unit, decimal KB, MB, GB, TB (powers of 1000, as the Hub's
// parse_size_to_int) or binary KiB, MiB, GiB, TiB (powers of 1024). Units
// are case-insensitive and fractions are allowed ("1.5GB"). The result must
// be at least one byte and at most 2^62.
func ParseSize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	if t == "" {
		return 0, fmt.Errorf("%w: empty size", ErrOption)
	}
	// go-humanize parses the number exactly for whole numbers and knows
	// both unit families.
	n, err := humanize.ParseBytes(t)
	if err != nil {
		return 0, fmt.Errorf("%w: size %q: want a number of bytes with an optional unit (KB, MB, GB, TB, KiB, MiB, GiB, TiB)", ErrOption, s)
	}
	if n == 0 || n > maxSize {
		return 0, fmt.Errorf("%w: size %q: must be between 1 byte and 2^62 bytes", ErrOption, s)
	}
	return int64(n), nil
}
