// Package sharded reads and writes models split over several safetensors
// files, the way Hugging Face stores large checkpoints: shards named
// model-00001-of-0000N.safetensors and a model.safetensors.index.json whose
// weight_map says which shard holds each tensor.
//
// [Open] turns a directory, an index file or a single safetensors file into
// one [Model], a [safetensors.Source] over all its tensors. Shards are opened
// through an [Opener], so the same checks run over local files (see
// [DirOpener]) and over remote objects. [Split] and [Merge] write a model as
// shards or as one file, streaming, verified and atomic. [Index] reads,
// validates and writes the index file byte for byte as Hugging Face does.
//
// This package reads safetensors shards, locally ([Open]) or through any
// [Opener]. A model a user names (a Hub repository, a URL, a sharded
// PyTorch checkpoint, pytorch_model.bin.index.json) is opened with
// source.OpenModel, which hands its safetensors shards to this package; the
// source package's documentation compares the openers.
//
// Everything an index or a shard says is treated as hostile: shard names
// must be plain file names in the model's directory, and a tensor missing
// from its shard, claimed by two shards or left out of the weight_map is an
// error naming the index, the shard and the tensor.
package sharded
