package source

import (
	"net/url"
	"path"
	"slices"
	"strings"
)

// NameMismatch returns a warning when a location's name says one format
// and its content (f, as detected) is another: a PyTorch checkpoint or an
// index named .safetensors, a safetensors file named like a checkpoint.
// Formats are decided by content, so nothing is misread; but another
// program that trusts the name will be misled, and torch.load would run a
// checkpoint that a name promised was safetensors. It returns "" when the
// name agrees or says nothing.
func NameMismatch(loc string, f Format) string {
	name := loc
	if u, err := url.Parse(loc); err == nil && u.Scheme != "" && u.Path != "" {
		name = u.Path
	}
	ext := strings.ToLower(path.Ext(name))
	switch {
	case ext == ".safetensors" && f.Checkpoint():
		return "the name says safetensors, but this is " + f.describe() + ": programs that trust the name will misread it (and torch.load would run it); rename it (.bin, .pt) or convert it with `safetensors convert`"
	case ext == ".safetensors" && f == Index:
		return "the name says safetensors, but this is a sharded model's index: name it model.safetensors.index.json"
	case slices.Contains(checkpointExts, ext) && (f == Safetensors || f == Compressed):
		return "the name says PyTorch checkpoint, but this is " + f.describe() + ": name it .safetensors"
	}
	return ""
}
