// Package convert turns PyTorch checkpoints (pytorch_model.bin, *.pt, *.pth,
// *.ckpt) into safetensors files without running any of the pickled code.
//
// A conversion is planned first ([NewPlan], [PlanFile]): the state dict is
// unwrapped (an explicit [WithKey], else a "state_dict" entry as
// Lightning and Hugging Face's convert.py write it, or "model_state_dict"
// as PyTorch's general-checkpoint recipe does, else a "model" or
// DeepSpeed's "module" entry of a training checkpoint), optimizer state —
// recognised by its shape (a "state" keyed by parameter index beside
// "param_groups"), wherever it sits and whatever it is called — and
// non-tensor values are skipped and reported, and tied weights are
// de-duplicated. A checkpoint left with no model tensor (an optimizer's
// state alone) is an [ErrInput] error, not an empty file; a checkpoint
// whose root is one tensor writes it as "tensor". Then [Plan.Write] streams
// every tensor into a safetensors file, materializing strided views as
// contiguous copies, and verifies the result.
//
// Tied weights follow Hugging Face's convert.py (_remove_duplicate_names)
// with one deliberate difference: only names that are the identical view of
// the same storage (same offset, shape and stride) are merged; the removed
// names are recorded in __metadata__ as removed -> kept, next to
// "format": "pt". A name that shares a storage with another but is a
// different view (a slice, a transpose, a reshape such as a [2,5] view of a
// [10] bias) is written as its own contiguous tensor, where convert.py
// drops it or fails. Nothing is ever lost. [WithKeepAliases] writes every
// name as its own copy.
//
// Outputs are atomic: the file appears under its final name only after it
// was written, synced and (unless [WithVerify](false)) re-read and compared,
// tensor by tensor and byte for byte, with a fresh read of each source
// view ([WithDigests] also records each tensor's SHA-256). On any error
// no output file is left behind.
//
// Options are of two kinds: a [PlanOption] says what is written, a
// [WriteOption] how; a function takes only the kinds it uses (see
// [Option]), so no option is ever silently ignored, and an invalid value
// (an empty key or name, a nil function, a cap below 1 other than
// [NoOutputCap]) is an error wrapping [ErrOption].
//
// [File] and [Dir] convert local files, [FromReaderAt] any io.ReaderAt (a
// remote.File from HTTP or the Hub, a blobstore object, a source.Object),
// as the CLI converts any location. They take a context: cancelling it
// stops the conversion between two writes, removes what was written, and
// returns the context's error.
//
// To read a checkpoint as the safetensors file converting it would write,
// without writing it, use [NewSource]; package source does, so that every
// command reads a checkpoint that way.
package convert
