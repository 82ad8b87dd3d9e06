package main

import (
	"cmp"
	"slices"

	"github.com/gosafetensors/safetensors"
	"github.com/gosafetensors/safetensors/sharded"
	"github.com/spf13/cobra"
)

// inspected is what inspect shows of a location: a safetensors header, a
// sharded model's shards, or the tensors converting a PyTorch checkpoint
// would write, described the same way.
type inspected struct {
	format     string // "safetensors", "safetensors (zstd)", "sharded", "pytorch-zip", "pytorch-legacy"
	fileSize   int64  // bytes stored (all shards)
	headerSize int64  // 0 unless one safetensors file
	dataSize   int64  // uncompressed size of a compressed file, else 0
	offsets    bool   // data_offsets are those of a file that exists
	Tensors    []safetensors.TensorInfo
	Metadata   map[string]string
	Warnings   []string
	shards     []sharded.ShardInfo
	shardOf    map[string]string
	notes      []string
}

// bytes returns a tensor's data size.
func (f *inspected) bytes(t safetensors.TensorInfo) int64 { return t.Size() }

// openInspected opens a location through the opener and describes it.
func openInspected(cmd *cobra.Command, loc string) (*inspected, error) {
	m, err := openLocation(cmd, loc)
	if err != nil {
		return nil, err
	}
	defer m.Close()
	out := &inspected{Metadata: m.Meta()}
	if m.Object != nil {
		out.fileSize = m.Object.Size
	}
	switch {
	case m.File != nil:
		out.format, out.offsets = "safetensors", true
		out.headerSize = m.File.Size
		out.Tensors = m.File.Tensors
		out.Warnings = m.File.Warnings
		if m.Compressed != nil {
			out.format = "safetensors (" + m.Compressed.Format().String() + ")"
			out.dataSize = m.Compressed.Size()
		}
	case m.Sharded != nil:
		out.format = "sharded"
		out.shards = m.Sharded.Shards()
		out.Warnings = m.Sharded.Warnings()
		out.shardOf = map[string]string{}
		rank := map[string]int{}
		for i, s := range out.shards {
			rank[s.Name] = i
			out.fileSize += s.Bytes
		}
		for _, n := range m.Names() {
			info, _ := m.Info(n)
			out.Tensors = append(out.Tensors, info)
			out.shardOf[n], _ = m.Sharded.ShardOf(n)
		}
		slices.SortStableFunc(out.Tensors, func(a, b safetensors.TensorInfo) int {
			return cmp.Or(cmp.Compare(rank[out.shardOf[a.Name]], rank[out.shardOf[b.Name]]), cmp.Compare(a.DataOffsets[0], b.DataOffsets[0]))
		})
		if len(out.shards) == 1 {
			out.format, out.offsets = "safetensors", true
		}
	case m.Checkpoint != nil:
		ck := m.Checkpoint.Checkpoint()
		out.format = "pytorch-" + ck.Format
		rep := m.Checkpoint.Report()
		for _, t := range rep.Tensors {
			info, _ := m.Info(t.Name)
			out.Tensors = append(out.Tensors, info)
		}
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
