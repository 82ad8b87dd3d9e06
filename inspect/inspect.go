// Package inspect describes a model the way `safetensors inspect` shows
// it: its tensors in file order, parameter and byte totals by dtype, the
// header, the metadata, the shards of a sharded model, and the names a
// PyTorch checkpoint's conversion would write. The CLI and the HTTP
// service render the same [Description]; [Report] is the JSON of
// `inspect --json`, and [Tree] groups tensors by layer for `inspect --tree`
// and the viewer.
package inspect

import (
	"cmp"
	"slices"

	"github.com/gosafetensors/safetensors"
	"github.com/gosafetensors/safetensors/convert"
	"github.com/gosafetensors/safetensors/sharded"
	"github.com/gosafetensors/safetensors/source"
)

// Description is what inspect shows of a model: a safetensors header, a
// sharded model's shards, or the tensors converting a PyTorch checkpoint
// would write, described the same way.
type Description struct {
	// Format is "safetensors", "safetensors (zstd)" (or another
	// compressed container), "sharded", "pytorch-zip" or "pytorch-legacy".
	Format     string
	FileSize   int64 // bytes stored (all shards)
	HeaderSize int64 // 0 unless one safetensors file
	DataSize   int64 // uncompressed size of a compressed file, else 0
	Offsets    bool  // data_offsets are those of a file that exists
	Tensors    []safetensors.TensorInfo
	Metadata   map[string]string
	Warnings   []string
	Shards     []sharded.ShardInfo
	ShardOf    map[string]string // tensor name -> shard, for a sharded model
	// Conversion is, for a PyTorch checkpoint, what converting it writes
	// (aliases removed, entries skipped, the entry unwrapped); else nil.
	Conversion *convert.Report
}

// Describe describes an opened model. It reads nothing beyond what opening
// it read (headers, an index, a checkpoint's pickle).
func Describe(m *source.Model) *Description {
	out := &Description{Metadata: m.Meta(), Warnings: m.Warnings()}
	if m.Object != nil {
		out.FileSize = m.Object.Size
	}
	switch {
	case m.File != nil:
		out.Format, out.Offsets = "safetensors", true
		out.HeaderSize = m.File.Size
		out.Tensors = m.File.Tensors
		if m.Compressed != nil {
			out.Format = "safetensors (" + m.Compressed.Format().String() + ")"
			out.DataSize = m.Compressed.Size()
		}
	case m.Sharded != nil:
		out.Format = "sharded"
		out.Shards = m.Sharded.Shards()
		out.ShardOf = map[string]string{}
		rank := map[string]int{}
		for i, s := range out.Shards {
			rank[s.Name] = i
			out.FileSize += s.Bytes
		}
		for _, n := range m.Names() {
			info, _ := m.Info(n)
			out.Tensors = append(out.Tensors, info)
			out.ShardOf[n], _ = m.Sharded.ShardOf(n)
		}
		slices.SortStableFunc(out.Tensors, func(a, b safetensors.TensorInfo) int {
			return cmp.Or(cmp.Compare(rank[out.ShardOf[a.Name]], rank[out.ShardOf[b.Name]]), cmp.Compare(a.DataOffsets[0], b.DataOffsets[0]))
		})
		if len(out.Shards) == 1 {
			out.Format, out.Offsets = "safetensors", true
		}
	case m.Checkpoint != nil:
		ck := m.Checkpoint.Checkpoint()
		out.Format = "pytorch-" + ck.Format.String()
		rep := m.Checkpoint.Report()
		out.Conversion = rep
		for _, t := range rep.Tensors {
			info, _ := m.Info(t.Name)
			out.Tensors = append(out.Tensors, info)
		}
	}
	return out
}
