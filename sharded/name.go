package sharded

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// CheckShardName returns an error unless name is a plain file name that
// can only mean a file in the index's own directory: not empty, not "." or
// "..", no '/' or '\\' (so no absolute path and no "://" URL), no ':' (a
// Windows drive or stream, a URL scheme), no NUL or other control
// character, valid UTF-8. It is checked before any shard is opened, so a
// hostile index cannot point a reader at another file or host.
func CheckShardName(name string) error {
	var why string
	switch {
	case name == "":
		why = "it is empty"
	case name == "." || name == "..":
		why = "it names a directory"
	case strings.Contains(name, "://"):
		why = "it is a URL"
	case strings.ContainsAny(name, `/\`):
		why = "it contains a path separator"
	case strings.ContainsRune(name, ':'):
		why = "it contains ':'"
	case !utf8.ValidString(name):
		why = "it is not valid UTF-8"
	case strings.IndexFunc(name, func(r rune) bool { return r < 0x20 || r == 0x7f }) >= 0:
		why = "it contains a control character"
	}
	if why != "" {
		return fmt.Errorf("%w: %q is not a plain file name beside the index: %s", ErrUnsafeName, name, why)
	}
	return nil
}
