package source

import (
	"fmt"
	"path"
	"slices"
	"strings"

	"github.com/gosafetensors/safetensors/sharded"
)

// ErrNoModel reports a folder (a local directory, a Hub repository or one
// of its subfolders) that holds no model file, or several with nothing to
// choose between them. It is sharded.ErrNoModel. Nothing was read that
// could be wrong, so the CLI reports it as "could not check" (exit 2).
var ErrNoModel = sharded.ErrNoModel

// Model file names, in the order transformers' from_pretrained looks for
// them: safetensors first.
const (
	SafetensorsFile  = "model.safetensors"
	SafetensorsIndex = "model.safetensors.index.json"
	CheckpointFile   = "pytorch_model.bin"
	CheckpointIndex  = "pytorch_model.bin.index.json"
)

// checkpointExts are the names of PyTorch checkpoints a folder may hold.
var checkpointExts = []string{".bin", ".pt", ".pth", ".ckpt"}

// trainerFiles are pickles a training run leaves beside the weights: never
// the model.
var trainerFiles = []string{"training_args.bin", "optimizer.pt", "optimizer.bin", "scheduler.pt", "scaler.pt"}

// PickModel chooses, among the names of the files a folder holds (base
// names; where names the folder in errors), the one to open as its model,
// as transformers does: model.safetensors, else model.safetensors.index.json,
// else pytorch_model.bin, else pytorch_model.bin.index.json; else the
// folder's only safetensors index, only safetensors file, only checkpoint
// index (*.bin.index.json, *.pt.index.json, …) or only checkpoint (*.bin,
// *.pt, *.pth, *.ckpt, a trainer's optimizer and argument pickles aside),
// in that order. Names choose only which file is opened: what it holds is
// then decided by its content. No model, or several of one kind with
// nothing to prefer, is an error wrapping [ErrNoModel].
func PickModel(where string, names []string) (string, error) {
	for _, n := range []string{SafetensorsFile, SafetensorsIndex, CheckpointFile, CheckpointIndex} {
		if slices.Contains(names, n) {
			return n, nil
		}
	}
	kinds := []struct {
		what string
		is   func(string) bool
	}{
		{"safetensors indexes", func(n string) bool { return strings.HasSuffix(n, ".safetensors.index.json") }},
		{"safetensors files", func(n string) bool { return strings.HasSuffix(n, ".safetensors") }},
		{"checkpoint indexes", func(n string) bool {
			stem, ok := strings.CutSuffix(n, ".index.json")
			return ok && slices.Contains(checkpointExts, strings.ToLower(path.Ext(stem)))
		}},
		{"checkpoints", func(n string) bool {
			return slices.Contains(checkpointExts, strings.ToLower(path.Ext(n))) && !slices.Contains(trainerFiles, n) && !strings.HasPrefix(n, "rng_state")
		}},
	}
	for _, k := range kinds {
		var found []string
		for _, n := range names {
			if !strings.HasPrefix(n, ".") && k.is(n) {
				found = append(found, n)
			}
		}
		switch {
		case len(found) == 1:
			return found[0], nil
		case len(found) > 1:
			shown := found
			if len(shown) > 5 {
				shown = append(shown[:5:5], "…")
			}
			return "", fmt.Errorf("%w: %s holds %d %s (%s) and no %s or %s: name the one to open", ErrNoModel, where, len(found), k.what, strings.Join(shown, ", "), SafetensorsFile, SafetensorsIndex)
		}
	}
	return "", fmt.Errorf("%w: %s holds no model file (%s, %s, %s, %s, or another *.safetensors or checkpoint)", ErrNoModel, where, SafetensorsFile, SafetensorsIndex, CheckpointFile, CheckpointIndex)
}
