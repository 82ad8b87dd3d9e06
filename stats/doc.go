// Package stats computes per-tensor statistics (min, max, mean, standard
// deviation, zeros, NaN and infinities) over any safetensors.Source in one
// streaming pass, counts non-finite values for validation, and estimates the
// memory a model needs as stored, cast and in training.
//
// Values are decoded to float64 from every dtype safetensors.DecodeFloat64
// accepts (floats, integers, BOOL, F8 variants, F4), a bounded chunk at a
// time, on several cores at once; a tensor of many gigabytes costs a few
// megabytes per worker. Mean and variance are computed per block of 4096
// values with two passes (exact enough to be the block's true mean) and the
// blocks combined with Chan et al.'s pairwise update, which is as sound as
// Welford's method and much faster.
package stats
