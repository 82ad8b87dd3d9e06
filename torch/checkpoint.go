package torch

import (
	"bytes"
	"errors"
	"fmt"
	"github.com/gosafetensors/safetensors"
	"github.com/gosafetensors/safetensors/internal/bug"
	"github.com/gosafetensors/safetensors/torch/pickle"
	"github.com/gosafetensors/safetensors/torch/tarlist"
	"io"
	"math/big"
	"os"
)

// Checkpoint is an opened PyTorch checkpoint. Tensor data stays in the file
// until Tensor.WriteTo is called.
type Checkpoint struct {
	Format  Format  // FormatZip or FormatLegacy
	Prefix  string  // zip folder prefix ("archive", "tiny_transformer"); "" for legacy
	Version string  // zip "version" record (e.g. "3"); "" for legacy
	Root    string  // Python type of the pickled root: "OrderedDict", "dict", "list", "tuple", "tensor", "int", ...
	Entries []Entry // every leaf of the pickled root, flattened, in pickle order
	// Unreferenced lists zip members that nothing in data.pkl refers to (a
	// stray file, or data hidden under a storage-like name): torch.load
	// ignores them, and so does conversion, but they deserve a look.
	Unreferenced []string

	tensors []*Tensor
	closer  io.Closer
	name    string // for errors

	// what the strict decoder read, for analyze's fast path
	pickleEntry string      // zip: the data.pkl record decoded
	end         int64       // legacy: the offset after the last storage
	zip         *zipArchive // zip: the archive as listed
	storages    []*Storage  // in file order
	deferred    *deferredOpen
}

// Entry is one leaf of the pickled object.
type Entry struct {
	Name   string  // dotted path from the root (dict keys, list/tuple indices); a bare tensor root is ""
	Tensor *Tensor // nil for non-tensor values
	// Value is a non-tensor leaf: nil, bool, int64, *big.Int, float64,
	// string, []byte (bytes and bytearray) or complex128; for a global used
	// as a value ("dtype", "global"), a torch.device ("device") and an
	// object of a class allowed with WithAllow ("object"), its name as a
	// string; nil for sets and empty containers.
	Value any
	// Kind is "tensor", "none", "bool", "int", "float", "complex", "str",
	// "bytes", "bytearray", "set", "frozenset", "dtype", "device",
	// "global", "object", or "dict"/"list"/"tuple" for empty containers.
	Kind   string
	SameAs string // for tensors: name of an earlier entry that is the same pickled object (tied weights), else ""
}

// Open opens a checkpoint file; the file stays open until Close. See
// [NewReader] for the options.
func Open(path string, opts ...Option) (*Checkpoint, error) {
	o, err := buildOptions(opts)
	if err != nil {
		return nil, err
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	c, err := newReader(f, fi.Size(), path, &o.limits)
	if err != nil {
		f.Close()
		return nil, err
	}
	c.closer = f
	return c, nil
}

// NewReader reads a checkpoint from r (size bytes); name is used in error
// messages. The container is recognised by content, not by name. Options:
// [WithLimits] (default [DefaultLimits]); an invalid one is an error
// wrapping [ErrOption].
func NewReader(r io.ReaderAt, size int64, name string, opts ...Option) (*Checkpoint, error) {
	o, err := buildOptions(opts)
	if err != nil {
		return nil, err
	}
	return newReader(r, size, name, &o.limits)
}

func newReader(r io.ReaderAt, size int64, name string, lim *Limits) (c *Checkpoint, err error) {
	// Last line of defence only: every known failure is an explicit check.
	// A panic here is a bug; it is reported as one (an error wrapping
	// safetensors.ErrInternal, never a verdict on the file) rather than
	// crashing a server that audits uploads.
	defer func() {
		if p := recover(); p != nil {
			c, err = nil, bug.Recovered("decoding "+name, p)
		}
	}()
	rep, c, err := analyzeForOpen(r, size, name, lim)
	if err != nil {
		return nil, err
	}
	if c == nil || rep.Verdict() != VerdictClean {
		// one verdict: a file is converted only if Scan calls it clean
		return nil, withPath(rep.refusal(), name)
	}
	for _, t := range c.tensors {
		t.Storage.path = name
	}
	for _, s := range c.storages {
		s.path = name
	}
	c.setExpansion(size, lim.expandViews)
	if c.deferred != nil {
		c.deferred.name = name
	}
	c.name = name
	return c, nil
}

// Close closes the file opened by Open (a no-op for NewReader).
func (c *Checkpoint) Close() error {
	if c.closer == nil {
		return nil
	}
	err := c.closer.Close()
	c.closer = nil
	return err
}

// Tensors returns the tensor entries in pickle order.
func (c *Checkpoint) Tensors() []*Tensor { return c.tensors }

// Tensor returns the tensor entry with the given name; a name the
// checkpoint does not hold is a *safetensors.FormatError wrapping
// safetensors.ErrTensorNotFound, as in the root package.
func (c *Checkpoint) Tensor(name string) (*Tensor, error) {
	if t := c.Lookup(name); t != nil {
		return t, nil
	}
	file := c.name
	if file == "" {
		file = "checkpoint"
	}
	return nil, safetensors.MissingTensor(file, name)
}

// Lookup returns the tensor entry with the given name, or nil.
func (c *Checkpoint) Lookup(name string) *Tensor {
	for _, t := range c.tensors {
		if t.Name == name {
			return t
		}
	}
	return nil
}

// kind of container, by content.
type container int

const (
	kindEmpty container = iota
	kindZip
	kindTar
	kindOther
)

// sniff classifies the file the way torch.load does: a zip archive only
// when it starts with a local file header (torch's _is_zipfile); anything
// else goes to the legacy loader, which first tries Python's tarfile.
func sniff(r io.ReaderAt, size int64) (container, error) {
	if size == 0 {
		return kindEmpty, nil
	}
	head := make([]byte, min(size, 4))
	if err := readFull(r, head, 0); err != nil {
		return 0, err
	}
	if bytes.Equal(head, []byte("PK\x03\x04")) {
		return kindZip, nil
	}
	if tarlist.IsTar(r, size) {
		return kindTar, nil
	}
	return kindOther, nil
}

// open opens the checkpoint with the strict decoder; with deferred, the
// checks of each storage's record wait for its first read (see
// deferred.go).
func open(r io.ReaderAt, size int64, lim *Limits, deferred bool) (*Checkpoint, error) {
	k, err := sniff(r, size)
	if err != nil {
		return nil, err
	}
	switch k {
	case kindEmpty:
		return nil, newError(ErrCorrupt, "", -1, "empty file")
	case kindZip:
		return openZip(r, size, lim, deferred)
	case kindTar:
		return nil, newError(ErrUnsupported, "", -1, "tar checkpoint (torch < 0.4) is not supported: the first 512 bytes pass Python's tar header check, so torch.load would read the file as a tar archive")
	}
	return openStream(r, size, lim, deferred)
}

// legacyMagic is torch's legacy-format magic number 0x1950a86a20f9469cfc6c.
var legacyMagic, _ = new(big.Int).SetString("1950a86a20f9469cfc6c", 16)

func isLegacyMagic(v any) bool {
	b, ok := v.(*big.Int)
	return ok && b.Cmp(legacyMagic) == 0
}

// openStream handles everything that is not a zip: the legacy format, or a
// bare pickle (refused, but only after every pickle in it was checked so that
// a dangerous global is named).
func openStream(r io.ReaderAt, size int64, lim *Limits, deferred bool) (*Checkpoint, error) {
	src := pickle.NewStream(r, 0, size)
	first, err := newVM(src, lim, "pickle 1", pidNone, nil, nil).run()
	if err != nil {
		if isGlobalRefusal(err) {
			return nil, err
		}
		return nil, newError(ErrCorrupt, "", -1, "not a PyTorch checkpoint (not a zip archive, and not a pickle: %s)", errMsg(err))
	}
	if isLegacyMagic(first) {
		return openLegacy(r, size, lim, src.Pos(), deferred)
	}
	// Not a checkpoint. torch.load would still unpickle it (and anything
	// after it), so look for dangerous globals in every following pickle.
	// One source for all of them: a fresh one per pickle would re-read a
	// 64 KiB window for every 2-byte "N." pickle (quadratic-like work).
	m := newVM(src, lim, "", pidNone, nil, nil)
	for i := 2; src.Remaining() > 0; i++ {
		m.entry = fmt.Sprintf("pickle %d", i)
		if _, err := m.run(); err != nil {
			if isGlobalRefusal(err) {
				return nil, err
			}
			break
		}
	}
	if typeName(first) == "int" {
		return nil, newError(ErrCorrupt, "", -1, "not a PyTorch checkpoint (the first pickle is the int %s, not the legacy magic number 0x1950a86a20f9469cfc6c)", describeNum(first))
	}
	return nil, newError(ErrCorrupt, "", -1, "not a PyTorch checkpoint (a bare pickle whose first value is a %s)", typeName(first))
}

func errMsg(err error) string {
	var e *Error
	if errors.As(err, &e) {
		e2 := *e
		e2.Path = ""
		return e2.Error()
	}
	return err.Error()
}
