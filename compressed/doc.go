// Package compressed writes and reads compressed safetensors files that keep
// random access: the header, any tensor and any slice can be read by
// decompressing only the frames or chunks that hold them.
//
// Three containers are supported, all detected by content ([Detect]):
//
//   - zstd: the seekable zstd format (facebook/zstd contrib/seekable_format):
//     independent zstd frames cut at the end of the header and at tensor
//     boundaries (large tensors split into bounded frames), followed by a
//     skippable frame holding the seek table. Any `zstd -d` restores the
//     original file.
//   - lz4: LZ4 frames (independent blocks, content checksum) cut the same
//     way, followed by the same seek table in an LZ4 skippable frame, which
//     `lz4 -d` skips. Any `lz4 -d` restores the original file.
//   - grouped: a valid safetensors file whose U8 tensors are compressed
//     chunks; float tensors are split into byte planes (after moving the
//     exponent into one byte), each plane Huffman-coded (huff0). Its
//     __metadata__ marks the format and holds the chunk index, so any
//     safetensors reader can list it. docs/compressed.md specifies all three
//     and what a reader refuses.
//
// [NewReaderAt] presents any of them as an io.ReaderAt over the ORIGINAL
// file bytes, so safetensors.NewReader works on it unchanged. [Compress] and
// [Decompress] convert whole files in parallel with bounded memory and stop
// when their context is cancelled; [CompressFile] and [DecompressFile] write
// their output atomically.
//
// Every byte of a compressed file is treated as hostile: seek tables and
// chunk indexes are validated before use, every frame is decoded with a cap
// equal to the size it claims (and at most [DefaultMaxFrameSize]), checksums
// are verified, every frame is checked against its position, and the
// result against the size the original's own header gives: a mismatch is an
// error, never wrong bytes.
package compressed
