// Package diff compares two sets of tensors, any two safetensors.Source
// values: a checkpoint against its conversion, two fine-tunes, two shards.
//
// It reports the tensors only in one side, those in both whose dtype or
// shape differ, and for the rest whether their bytes are identical or else
// the largest absolute and relative difference and how many elements differ
// by more than an epsilon, computed in float64 from every dtype
// safetensors.DecodeFloat64 accepts (tensors of different dtypes but the
// same shape are compared by value too). Metadata differences are listed.
// Data is streamed tensor by tensor in bounded chunks on several workers,
// with a byte comparison first: identical chunks cost one memcmp.
package diff
