package source

import (
	"context"
	"errors"
	"io/fs"
	"net"
	"net/url"
	"os"
	"sync/atomic"
	"syscall"

	"github.com/gosafetensors/safetensors"
	"github.com/gosafetensors/safetensors/internal/sniff"
	"github.com/gosafetensors/safetensors/remote"
)

// ErrOption reports an invalid option value (a nil Option included). It is
// safetensors.ErrOption, the sentinel every package of the module wraps.
var ErrOption = safetensors.ErrOption

// IsIOError reports whether err is a failure to read bytes (disk, network,
// timeout, authentication, a missing object) rather than a verdict on
// bytes that were read. The CLI exits 2 for these ("could not check") and
// 1 for the rest ("checked and found wrong").
func IsIOError(err error) bool {
	if err == nil {
		return false
	}
	var (
		ioe   *IOError
		pe    *fs.PathError
		se    *os.SyscallError
		errno syscall.Errno
		ne    net.Error
		ue    *url.Error
		re    *remote.Error
		st    *remote.StatusError
	)
	return errors.As(err, &ioe) || errors.As(err, &pe) || errors.As(err, &se) || errors.As(err, &errno) ||
		errors.As(err, &ne) || errors.As(err, &ue) || errors.As(err, &re) || errors.As(err, &st) ||
		errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) ||
		errors.Is(err, fs.ErrNotExist) || errors.Is(err, fs.ErrPermission) || errors.Is(err, ErrNotRegular)
}

// classify turns a decoder's error about o into an *IOError when reading o
// failed underneath it, whatever the decoder made of the failure: a short
// read caused by a disk error is not a corrupt file.
func classify(o *Object, err error) error {
	if err == nil {
		return nil
	}
	if ioe := o.ioErr.Load(); ioe != nil {
		return &IOError{Location: o.Name, Op: "read", Err: errors.Join(*ioe, err)}
	}
	if IsIOError(err) {
		var ioe *IOError
		if errors.As(err, &ioe) {
			return err
		}
		return &IOError{Location: o.Name, Op: "read", Err: err}
	}
	var fe *safetensors.FormatError
	var ce *ContentError
	if errors.As(err, &fe) && !errors.As(err, &ce) && o.r != nil {
		if h := sniff.Explain(o, o.Size, err); h != "" {
			return &ContentError{Location: o.Name, Format: o.Format, Hint: h, Err: err}
		}
	}
	return err
}

// Explain returns a plain-words hint for err, an error a decoder gave
// reading o as a safetensors file: what o's first bytes really are (a
// page, a pointer, a checkpoint), or how much of a truncated file is
// missing; "" when there is nothing to add. Errors from [Object.Model]
// carry their hint already ([Hint]).
func (o *Object) Explain(err error) string {
	if o.r == nil {
		return ""
	}
	return sniff.Explain(o, o.Size, err)
}

// Hint returns the plain-words hint err carries, or "".
func Hint(err error) string {
	var ce *ContentError
	if errors.As(err, &ce) {
		return ce.Hint
	}
	return ""
}

// ioErrBox records the first read error an object saw.
type ioErrBox struct{ p atomic.Pointer[error] }

func (b *ioErrBox) Load() *error { return b.p.Load() }

func (b *ioErrBox) record(err error) { b.p.CompareAndSwap(nil, &err) }
