package atomicfile

import "os"

// An Input is a file an operation reads, for [OutputIsInput].
type Input struct {
	Name string      // as the user knows it, for messages
	Info os.FileInfo // os.Stat of it, or (*os.File).Stat of the open file
}

// Inputs describes the files at paths (following symbolic links); a path
// that cannot be stat'ed is left out: it cannot be the output either.
func Inputs(paths ...string) []Input {
	var out []Input
	for _, p := range paths {
		if p == "" {
			continue
		}
		if st, err := os.Stat(p); err == nil {
			out = append(out, Input{Name: p, Info: st})
		}
	}
	return out
}

// OutputIsInput returns the input that the existing file out is (through
// any symbolic or hard link). Renaming a new file over it would destroy
// what is being read, which even overwriting must not do: callers refuse
// with safetensors.ErrOutputIsInput. An out that does not exist is no
// input.
func OutputIsInput(out string, inputs []Input) (Input, bool) {
	ost, err := os.Stat(out)
	if err != nil {
		return Input{}, false
	}
	for _, in := range inputs {
		if in.Info != nil && os.SameFile(ost, in.Info) {
			return in, true
		}
	}
	return Input{}, false
}

// A Reader reads local files: a model opened from a directory or an index
// reads its index, its shards, perhaps more. InputFiles lists every one it
// read or reads, so that no output replaces any of them.
type Reader interface {
	InputFiles() []Input
}

// InputsOf returns the local files v reads: its InputFiles if it is a
// [Reader], else none. Every writer checks its outputs against them.
func InputsOf(v any) []Input {
	if r, ok := v.(Reader); ok {
		return r.InputFiles()
	}
	return nil
}
