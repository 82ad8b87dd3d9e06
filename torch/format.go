package torch

import "fmt"

// Format is the container a file holds, as torch.load tells them apart.
// It prints (and marshals as text) as "unknown", "zip", "legacy", "tar" or
// "pickle".
type Format uint8

// Formats.
const (
	// FormatUnknown is not recognisably a checkpoint or a pickle.
	FormatUnknown Format = iota
	// FormatZip is torch.save's zip archive (the default since torch 1.6).
	FormatZip
	// FormatLegacy is torch.save's legacy format: a stream of pickles
	// followed by the storages.
	FormatLegacy
	// FormatTar is the tar archive of torch < 0.4.
	FormatTar
	// FormatPickle is a bare pickle: not a checkpoint, though torch.load
	// would unpickle it.
	FormatPickle
)

var formatNames = [...]string{"unknown", "zip", "legacy", "tar", "pickle"}

func (f Format) String() string {
	if int(f) < len(formatNames) {
		return formatNames[f]
	}
	return fmt.Sprintf("Format(%d)", uint8(f))
}

// MarshalText spells the format as String does, for JSON reports.
func (f Format) MarshalText() ([]byte, error) { return []byte(f.String()), nil }
