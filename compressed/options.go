package compressed

import (
	"fmt"
	"runtime"
)

// Codec names a compressed container format for [Compress].
type Codec string

// Codecs accepted by [WithCodec].
const (
	Zstd    Codec = "zstd"    // seekable zstd; `zstd -d` restores the file
	LZ4     Codec = "lz4"     // LZ4 frames + seek table; `lz4 -d` restores the file
	Grouped Codec = "grouped" // byte-grouped planes, Huffman-coded; a safetensors file
)

// Size limits.
const (
	DefaultFrameSize    = 256 << 10 // uncompressed bytes per frame or chunk written (small enough that one 1 MiB read decodes several frames in parallel)
	MinFrameSize        = 4 << 10   // smallest frame size accepted by WithFrameSize
	MaxFrameSize        = 64 << 20  // largest frame size accepted by WithFrameSize
	DefaultMaxFrameSize = 64 << 20  // largest frame a reader decompresses by default
	DefaultCacheFrames  = 32        // decompressed frames a ReaderAt keeps (8 MiB at the default frame size)
	DefaultCacheBytes   = 128 << 20 // and at most these bytes of them (two frames of the largest size)
	DefaultMaxRatio     = 1000      // original bytes a compressed file may claim per compressed byte (plus 1 GiB)
	DefaultMaxFrames    = 1 << 22   // frames a seek table may list (1 TiB at 256 KiB frames)
)

type config struct {
	codec       Codec
	level       int
	frameSize   int64
	concurrency int
	progress    func(done, total int64)
	name        string
	maxFrame    int64
	cacheFrames int
	cacheBytes  int64
	maxRatio    int64 // 0: no cap
	overwrite   bool
	maxSize     int64 // -1: no limit
	maxFrames   int64
	maxHeader   int64 // 0: safetensors.DefaultMaxHeaderSize
	onDecode    func(n int64)
	given       given // options given that not every function takes
}

// given records the options a function may refuse as not applying to it.
type given uint8

const (
	givenProgress given = 1 << iota
	givenOverwrite
	givenCache
	givenDecodeCounter
)

// Options come in two kinds, so that none is ever silently ignored: a
// [WriteOption] says how a container is written ([Compress],
// [CompressFile]: codec, level, frame size), a [ReadOption] how one is
// read ([NewReaderAt], [Open], [Decompress], [DecompressFile]: limits and
// the frame cache). Passing one where the other is taken does not
// compile. An [Option] (the file name errors start with, concurrency,
// progress, overwriting) is of both kinds; where it cannot apply the call
// fails with an error wrapping [ErrOption], as it does for the frame cache
// given to Decompress, which keeps no frames:
//
//   - [WithProgress]: not for [NewReaderAt] and [Open] (they do no long work);
//   - [WithOverwrite]: only for [CompressFile] and [DecompressFile];
//   - [WithCacheFrames], [WithCacheBytes]: only for [NewReaderAt] and [Open].
type Option func(*config) error

// WriteOption configures [Compress] and [CompressFile]: a [WithCodec],
// [WithLevel] or [WithFrameSize], or an [Option]. See [Option].
type WriteOption interface {
	applyWrite(*config) error
}

// ReadOption configures [NewReaderAt], [Open], [Decompress] and
// [DecompressFile]: the limits a compressed file is read under, the frame
// cache, or an [Option]. See [Option].
type ReadOption interface {
	applyRead(*config) error
}

func (o Option) applyWrite(c *config) error { return o.apply(c) }
func (o Option) applyRead(c *config) error  { return o.apply(c) }

func (o Option) apply(c *config) error {
	if o == nil {
		return optErr("nil Option")
	}
	return o(c)
}

// writeOption and readOption are the concrete types of the options of one
// kind only.
type writeOption func(*config) error
type readOption func(*config) error

func (o writeOption) applyWrite(c *config) error { return o(c) }
func (o readOption) applyRead(c *config) error   { return o(c) }

func defaultConfig() config {
	return config{
		codec:       Zstd,
		level:       2,
		frameSize:   DefaultFrameSize,
		concurrency: runtime.GOMAXPROCS(0),
		maxFrame:    DefaultMaxFrameSize,
		cacheFrames: DefaultCacheFrames,
		cacheBytes:  DefaultCacheBytes,
		maxRatio:    DefaultMaxRatio,
		maxSize:     -1,
		maxFrames:   DefaultMaxFrames,
	}
}

// writeConfig applies the options of fn, a function that writes a
// container (a file when file is set).
func writeConfig(fn string, file bool, opts []WriteOption) (config, error) {
	c := defaultConfig()
	for _, o := range opts {
		if o == nil {
			return c, optErr("nil WriteOption")
		}
		if err := o.applyWrite(&c); err != nil {
			return c, err
		}
	}
	return c, c.refuse(fn, file, givenCache)
}

// readConfig applies the options of fn, a function that reads a
// container: it decompresses it whole (a file when file is set), or, when
// random is set, gives random access to it.
func readConfig(fn string, random, file bool, opts []ReadOption) (config, error) {
	c := defaultConfig()
	for _, o := range opts {
		if o == nil {
			return c, optErr("nil ReadOption")
		}
		if err := o.applyRead(&c); err != nil {
			return c, err
		}
	}
	notFor := givenCache | givenDecodeCounter
	if random {
		notFor = givenProgress
	}
	return c, c.refuse(fn, file, notFor)
}

// refuse fails for the options of notFor given to fn, and for
// WithOverwrite unless fn writes a file.
func (c *config) refuse(fn string, file bool, notFor given) error {
	if !file {
		notFor |= givenOverwrite
	}
	switch bad := c.given & notFor; {
	case bad&givenProgress != 0:
		return optErr("WithProgress does not apply to %s, which does no long work: give it to Decompress or Compress", fn)
	case bad&givenOverwrite != 0:
		return optErr("WithOverwrite does not apply to %s, which writes no file: give it to CompressFile or DecompressFile", fn)
	case bad&givenDecodeCounter != 0:
		return optErr("WithDecodeCounter does not apply to %s: it counts a ReaderAt's work (NewReaderAt, Open)", fn)
	case bad&givenCache != 0:
		return optErr("WithCacheFrames and WithCacheBytes do not apply to %s, which reads each frame once: they configure a ReaderAt (NewReaderAt, Open)", fn)
	}
	return nil
}

func optErr(format string, args ...any) error {
	return fmt.Errorf("compressed: %w: "+format, append([]any{ErrOption}, args...)...)
}

// WithCodec selects the container [Compress] writes (default [Zstd]).
func WithCodec(c Codec) WriteOption {
	return writeOption(func(o *config) error {
		switch c {
		case Zstd, LZ4, Grouped:
			o.codec = c
			return nil
		}
		return optErr("unknown codec %q (want zstd, lz4 or grouped)", string(c))
	})
}

// WithLevel sets the compression level, 1 to 4: klauspost/compress's
// fastest, default (2, the default here, comparable to `zstd -3`), better
// and best. For lz4, levels above 2 use the high-compression mode. The
// grouped codec uses it for the chunks it compresses with zstd.
func WithLevel(level int) WriteOption {
	return writeOption(func(o *config) error {
		if level < 1 || level > 4 {
			return optErr("level %d out of range 1..4", level)
		}
		o.level = level
		return nil
	})
}

// WithFrameSize bounds the uncompressed bytes per frame or chunk
// (default [DefaultFrameSize]); it is the unit of random access.
func WithFrameSize(n int64) WriteOption {
	return writeOption(func(o *config) error {
		if n < MinFrameSize || n > MaxFrameSize {
			return optErr("frame size %d out of range %d..%d", n, MinFrameSize, MaxFrameSize)
		}
		o.frameSize = n
		return nil
	})
}

// WithConcurrency sets how many frames are compressed or decompressed at
// once (default GOMAXPROCS). For a [ReaderAt] it bounds the frames one
// read decodes in parallel.
func WithConcurrency(n int) Option {
	return func(o *config) error {
		if n < 1 || n > 1024 {
			return optErr("concurrency %d out of range 1..1024", n)
		}
		o.concurrency = n
		return nil
	}
}

// WithProgress calls f with the uncompressed bytes processed so far and the
// total (-1 for a stream, whose size is unknown), from one goroutine at a
// time; nil means no progress reports. It applies to [Compress],
// [Decompress] and their file functions; [NewReaderAt] and [Open] refuse
// it (see [Option]).
func WithProgress(f func(done, total int64)) Option {
	return func(o *config) error {
		o.progress = f
		if f != nil {
			o.given |= givenProgress
		}
		return nil
	}
}

// WithName sets the file name that errors start with.
func WithName(name string) Option {
	return func(o *config) error { o.name = name; return nil }
}

// WithOverwrite lets [CompressFile] and [DecompressFile] replace an
// existing output file (default: refuse with [ErrExists]). The functions
// that write no file refuse it (see [Option]).
func WithOverwrite(ok bool) Option {
	return func(o *config) error {
		o.overwrite = ok
		o.given |= givenOverwrite
		return nil
	}
}

// WithMaxFrameSize caps the decompressed size a reader accepts for one frame
// or chunk (default [DefaultMaxFrameSize]): a frame claiming more is refused
// before anything is allocated.
func WithMaxFrameSize(n int64) ReadOption {
	return readOption(func(o *config) error {
		if n < 1 || n > 1<<32-1 {
			return optErr("max frame size %d out of range 1..%d", n, int64(1<<32-1))
		}
		o.maxFrame = n
		return nil
	})
}

// WithDecodeCounter calls f with the decompressed size of every frame or
// chunk a [ReaderAt] decodes (from any goroutine, once per frame, the
// header's at open included): a service's count of the work its inputs
// cost. [Decompress] and [DecompressFile] refuse it.
func WithDecodeCounter(f func(n int64)) ReadOption {
	return readOption(func(o *config) error {
		if f == nil {
			return optErr("WithDecodeCounter(nil)")
		}
		o.onDecode = f
		o.given |= givenDecodeCounter
		return nil
	})
}

// WithCacheFrames sets how many decompressed frames a [ReaderAt] keeps for
// reads that touch them again (default [DefaultCacheFrames]; 0 disables).
// [Decompress] and [DecompressFile] refuse it (see [Option]).
func WithCacheFrames(n int) ReadOption {
	return readOption(func(o *config) error {
		if n < 0 || n > 4096 {
			return optErr("cache frames %d out of range 0..4096", n)
		}
		o.cacheFrames = n
		o.given |= givenCache
		return nil
	})
}

// WithCacheBytes bounds the decompressed bytes a [ReaderAt] keeps in its
// frame cache (default [DefaultCacheBytes]; 0 disables the cache): with
// large frames the frame count alone would let a small file hold
// gigabytes. A frame larger than n is never kept. [Decompress] and
// [DecompressFile] refuse it (see [Option]).
func WithCacheBytes(n int64) ReadOption {
	return readOption(func(o *config) error {
		if n < 0 || n > 1<<40 {
			return optErr("cache bytes %d out of range 0..1 TiB", n)
		}
		o.cacheBytes = n
		o.given |= givenCache
		return nil
	})
}

// WithMaxRatio refuses, when it is opened, a seekable or grouped file
// whose original size is more than r times its compressed size plus 1 GiB
// (default [DefaultMaxRatio]; 0: no cap), with an error wrapping
// [ErrLimit]. Weights compress about 1.3 to 2 times; a small file claiming
// hundreds of GiB of zeros is a decompression bomb that would keep every
// full read (stats, validate --full, decompress) busy for minutes.
func WithMaxRatio(r int64) ReadOption {
	return readOption(func(o *config) error {
		if r < 0 {
			return optErr("max ratio %d is negative (0 means no cap)", r)
		}
		o.maxRatio = r
		return nil
	})
}

// WithMaxSize caps the size of the original (default: no cap, like
// `zstd -d`): a file that holds more is refused with [ErrMaxSize] (which
// wraps [ErrLimit]) — when it
// is opened for a seekable file, whose size is known (by [NewReaderAt] and
// [Open] as by [Decompress], before any output), and as soon as the cap is
// passed for a stream, which only Decompress reads.
func WithMaxSize(n int64) ReadOption {
	return readOption(func(o *config) error {
		if n < 0 {
			return optErr("max size %d is negative", n)
		}
		o.maxSize = n
		return nil
	})
}

// WithMaxFrames caps the number of frames a seek table may list (default
// [DefaultMaxFrames]); the table is refused before it is read if it claims
// more, so its memory stays bounded whatever the file says.
func WithMaxFrames(n int64) ReadOption {
	return readOption(func(o *config) error {
		if n < 1 || n > maxSeekEntries {
			return optErr("max frames %d out of range 1..%d", n, int64(maxSeekEntries))
		}
		o.maxFrames = n
		return nil
	})
}

// WithMaxHeaderSize caps the original's safetensors header, which
// [NewReaderAt] parses to check the original's size (default
// safetensors.DefaultMaxHeaderSize): a header claiming more is refused
// from its 8-byte length, with an error wrapping
// safetensors.ErrHeaderTooLarge, before it is decompressed. A grouped
// container's own header, which holds the original's and the chunk index,
// is bounded by twice n and 1 MiB. A service bounds with it what a small
// upload may cost to parse.
func WithMaxHeaderSize(n int64) ReadOption {
	return readOption(func(o *config) error {
		if n < 1 {
			return optErr("max header size %d: want at least 1", n)
		}
		o.maxHeader = n
		return nil
	})
}
