package audit

import (
	"fmt"
	"slices"

	"github.com/gosafetensors/safetensors/torch"
)

// Verdict is what a scan concludes about one file, from best to worst.
type Verdict int

const (
	// Clean: nothing to object to; every byte torch could read was
	// decoded and every global is allowlisted.
	Clean Verdict = iota
	// Invalid: not a valid checkpoint or safetensors file (corrupt,
	// truncated, a polyglot, unknown content); nothing dangerous named.
	Invalid
	// Unsupported: inert torch constructs with no safetensors form
	// (quantized, sparse tensors).
	Unsupported
	// Dangerous: a global that is not allowlisted, or an opcode that would
	// run code.
	Dangerous
	// Error: the file could not be read, so it was not checked.
	Error
)

var verdictNames = []string{"clean", "invalid", "unsupported", "dangerous", "error"}

// String returns the verdict as scan prints it: "clean", "invalid",
// "unsupported", "dangerous" or "error".
func (v Verdict) String() string { return name(verdictNames, int(v), "Verdict") }

// MarshalText implements encoding.TextMarshaler.
func (v Verdict) MarshalText() ([]byte, error) { return marshal(verdictNames, int(v), "Verdict") }

// UnmarshalText implements encoding.TextUnmarshaler.
func (v *Verdict) UnmarshalText(b []byte) error {
	return unmarshal(verdictNames, (*int)(v), b, "verdict")
}

// Problem reports whether the verdict is a finding about the content
// (invalid, unsupported or dangerous): what makes scan exit 1.
func (v Verdict) Problem() bool { return v == Invalid || v == Unsupported || v == Dangerous }

// Format is the kind of file a scan found, by content.
type Format int

const (
	// FormatUnknown: content that is none of the others.
	FormatUnknown Format = iota
	// FormatSafetensors: a safetensors file.
	FormatSafetensors
	// FormatCompressed: a safetensors file in a compressed container
	// (seekable zstd, LZ4 frames, byte-grouped).
	FormatCompressed
	// FormatZip: a zip archive (torch.save's format since 1.6).
	FormatZip
	// FormatLegacy: a legacy torch.save stream of pickles.
	FormatLegacy
	// FormatTar: a tar archive (torch < 0.4).
	FormatTar
	// FormatPickle: a bare pickle, not a checkpoint.
	FormatPickle
	// FormatIndex: a sharded model's index (JSON naming the shards).
	FormatIndex
)

var formatNames = []string{"unknown", "safetensors", "safetensors (compressed)", "zip", "legacy", "tar", "pickle", "index"}

// Formats lists every Format, in order: each value `scan --json` can
// print in "format".
func Formats() []Format {
	out := make([]Format, len(formatNames))
	for i := range out {
		out[i] = Format(i)
	}
	return out
}

// String returns the format as scan prints it.
func (f Format) String() string { return name(formatNames, int(f), "Format") }

// MarshalText implements encoding.TextMarshaler.
func (f Format) MarshalText() ([]byte, error) { return marshal(formatNames, int(f), "Format") }

// UnmarshalText implements encoding.TextUnmarshaler.
func (f *Format) UnmarshalText(b []byte) error { return unmarshal(formatNames, (*int)(f), b, "format") }

// torchFormat maps the checkpoint scanner's formats.
func torchFormat(f torch.Format) Format {
	switch f {
	case torch.FormatZip:
		return FormatZip
	case torch.FormatLegacy:
		return FormatLegacy
	case torch.FormatTar:
		return FormatTar
	case torch.FormatPickle:
		return FormatPickle
	}
	return FormatUnknown
}

// GlobalVerdict is what the allowlist says of one global a pickle names.
type GlobalVerdict int

const (
	// Allowed: on the allowlist (tensor rebuilds, storages, OrderedDict...).
	Allowed GlobalVerdict = iota
	// Inert: a torch name that does nothing harmful but has no safetensors
	// form (quantized or sparse rebuilds); printed "unsupported".
	Inert
	// NotAllowed: anything else; printed "not allowed".
	NotAllowed
)

var globalVerdictNames = []string{"allowed", "unsupported", "not allowed"}

// String returns "allowed", "unsupported" or "not allowed".
func (g GlobalVerdict) String() string { return name(globalVerdictNames, int(g), "GlobalVerdict") }

// MarshalText implements encoding.TextMarshaler.
func (g GlobalVerdict) MarshalText() ([]byte, error) {
	return marshal(globalVerdictNames, int(g), "GlobalVerdict")
}

// UnmarshalText implements encoding.TextUnmarshaler.
func (g *GlobalVerdict) UnmarshalText(b []byte) error {
	return unmarshal(globalVerdictNames, (*int)(g), b, "global verdict")
}

// Status is what validation concludes about one file.
type Status int

const (
	// OK: the file is valid.
	OK Status = iota
	// StatusInvalid: the file was read and breaks a rule.
	StatusInvalid
	// Unreadable: the file could not be read, so it was not checked.
	Unreadable
)

var statusNames = []string{"ok", "invalid", "unreadable"}

// String returns "ok", "invalid" or "unreadable".
func (s Status) String() string { return name(statusNames, int(s), "Status") }

// MarshalText implements encoding.TextMarshaler.
func (s Status) MarshalText() ([]byte, error) { return marshal(statusNames, int(s), "Status") }

// UnmarshalText implements encoding.TextUnmarshaler.
func (s *Status) UnmarshalText(b []byte) error { return unmarshal(statusNames, (*int)(s), b, "status") }

func name(names []string, i int, typ string) string {
	if i < 0 || i >= len(names) {
		return fmt.Sprintf("%s(%d)", typ, i)
	}
	return names[i]
}

func marshal(names []string, i int, typ string) ([]byte, error) {
	if i < 0 || i >= len(names) {
		return nil, fmt.Errorf("audit: invalid %s %d", typ, i)
	}
	return []byte(names[i]), nil
}

func unmarshal(names []string, dst *int, b []byte, what string) error {
	i := slices.Index(names, string(b))
	if i < 0 {
		return fmt.Errorf("audit: unknown %s %q", what, b)
	}
	*dst = i
	return nil
}
