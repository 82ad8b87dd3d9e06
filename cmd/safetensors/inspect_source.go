package main

import (
	"github.com/gosafetensors/safetensors"
	"github.com/gosafetensors/safetensors/inspect"
	"github.com/spf13/cobra"
)

// inspected is what inspect shows of a location (the library's
// description) and the notes the text output adds.
type inspected struct {
	*inspect.Description
	notes []string
}

// inspectJSON is the --json output of inspect (schema in inspect.Report).
type inspectJSON = inspect.Report

// bytes returns a tensor's data size.
func (f *inspected) bytes(t safetensors.TensorInfo) int64 { return t.Size() }

// openInspected opens a location through the opener and describes it.
func openInspected(cmd *cobra.Command, loc string) (*inspected, error) {
	m, err := openLocation(cmd, loc)
	if err != nil {
		return nil, err
	}
	defer m.Close()
	out := &inspected{Description: inspect.Describe(m)}
	if rep := out.Conversion; rep != nil {
		if rep.Unwrapped != "" {
			out.notes = append(out.notes, "names as convert writes them: the checkpoint's "+rep.Unwrapped+" entry, its prefix stripped")
		}
		if n := len(rep.Removed); n > 0 {
			out.notes = append(out.notes, plural(int64(n), "tied alias")+" written once ("+display(rep.Removed[0].Name)+" = "+display(rep.Removed[0].Kept)+moreOf(n)+")")
		}
		if n := len(rep.Skipped); n > 0 {
			out.notes = append(out.notes, plural(int64(n), "entry")+" not written (not tensors, or optimizer state)")
		}
	}
	return out, nil
}

func moreOf(n int) string {
	if n <= 1 {
		return ""
	}
	return ", ..."
}
