package torch

import (
	"io"

	"github.com/gosafetensors/safetensors/internal/rangeread"
	"github.com/gosafetensors/safetensors/torch/pickle"
)

// prefetchLegacyHeaders announces to a remote reader (rangeread.Prefetcher)
// the element count before every storage of a legacy checkpoint, from pos
// (where the first one is) on: each storage's size is known from its
// persistent id, so where the next count lies is too, as long as the
// counts agree with the ids (reading one that does not is an error
// anyway). They then cost a few requests instead of one each; a local
// file reads them one by one as cheaply.
func prefetchLegacyHeaders(r io.ReaderAt, size, pos int64, keys *pickle.List, storages map[string]*storageRef) {
	if keys == nil {
		return
	}
	offs := make([]int64, 0, len(keys.Items))
	lens := make([]int64, 0, len(keys.Items))
	for _, k := range keys.Items {
		key, _ := k.(string)
		ref := storages[key]
		if ref == nil || pos < 0 || pos > size-8 || ref.nbytes < 0 || ref.nbytes > size-pos-8 {
			break
		}
		offs, lens = append(offs, pos), append(lens, 8)
		pos += 8 + ref.nbytes
	}
	rangeread.Prefetch(r, offs, lens)
}
