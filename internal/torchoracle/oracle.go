// Package torchoracle runs real torch (torch.load in /usr/bin/python3) as an
// oracle for tests: what globals torch's unpickler asks for when it loads a
// file, whether the load succeeds, and the tensors it yields.
//
// Nothing a file names is ever imported or called unless it is on the
// allowlist the caller passes: the child process installs a sys.addaudithook
// before it imports anything, records every pickle.find_class audit event
// (raised by both the C and the Python unpickler) and raises for any global
// off the allowlist, so torch.load stops there. As a backstop the hook also
// refuses, once torch and everything torch.load needs are imported, any
// import, exec/compile, process, ctypes or socket event and any open for
// writing outside the child's temporary directory; the child runs in a new
// network namespace where unshare(1) allows it, in a throwaway working
// directory, with its address space capped.
//
// Known blind spot, inherited from torch: torch's find_class answers every
// name containing "Storage" that names a storage type with a StorageType
// without calling the base find_class, so no event fires for those (and
// nothing is imported either). A TorchScript archive (constants.pkl) is not
// loaded: torch.load would hand it to torch.jit.load, which the child replaces
// with a refusal and reports as Result.TorchScript.
//
// The package is test support: Require skips the calling test, with the
// reason, where /usr/bin/python3 or torch is missing.
package torchoracle

import (
	"bufio"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

//go:embed oracle.py
var script string

// Python is the interpreter that has torch (the python3 on PATH may not).
const Python = "/usr/bin/python3"

// ErrUnavailable is returned by Start when Python or torch is missing.
var ErrUnavailable = errors.New("torchoracle: python3 with torch is not available")

// Options configures an Oracle.
type Options struct {
	// Allow is the allowlist, "module.name" each: any other global torch's
	// unpickler asks for is refused (and torch.load fails there).
	Allow []string
	// Timeout bounds each file's load (default 5s). A file that takes longer
	// is reported with Result.Timeout and the child is restarted.
	Timeout time.Duration
	// StartTimeout bounds the child's start (importing torch; default 60s).
	StartTimeout time.Duration
	// WeightsOnly also loads each file with torch.load(weights_only=True)
	// (torch's own restricted unpickler) and reports whether it succeeded.
	WeightsOnly bool
	// WatchBuild loads with CPython's pure-Python unpickler (pickle's
	// _Unpickler, which behaves as the C one and raises the same audit
	// events) instrumented at BUILD: a BUILD that would call a __setstate__
	// the instance got from the pickle's data (an instance attribute, or an
	// item a class's __getattr__ answers with) instead of its class's own is
	// refused and reported in Result.Events. For files whose globals the
	// caller allowed (torch.WithAllow): the audit hook sees no call that
	// is not a find_class.
	WatchBuild bool
	// AddressSpace caps the child's address space in bytes once torch is
	// imported (default 4 GiB; negative: no cap).
	AddressSpace int64
}

// Tensor is one tensor torch.load returned, named by flattening the loaded
// object as torch/flatten.go does (dict keys and list/tuple indices joined
// with ".").
type Tensor struct {
	Name         string  `json:"name"`
	DType        string  `json:"dtype"` // safetensors name ("F32", "BOOL", ...) or torch's ("torch.complex128")
	Shape        []int64 `json:"shape"`
	RequiresGrad bool    `json:"requires_grad"`
	Parameter    bool    `json:"parameter"`
	// OptimizerState is set for tensors inside a dict shaped like an
	// optimizer's state_dict() ("state" keyed by ints, "param_groups" a list
	// of dicts with "params"), judged on the loaded Python objects.
	OptimizerState bool `json:"optimizer_state"`
	// SHA256 is the hex SHA-256 of the tensor's C-contiguous little-endian
	// bytes, complex as (real, imaginary) pairs, and BOOL as the values torch
	// computes with (0 or 1, whatever byte the storage held). Empty when
	// torch cannot give the bytes (quantized, sparse, meta; see BytesError).
	SHA256     string `json:"sha256"`
	NBytes     int64  `json:"nbytes"`
	BytesError string `json:"bytes_error"`
}

// Result is what the oracle saw for one file.
type Result struct {
	Path string `json:"-"`
	// Globals lists every pickle.find_class torch's unpickler made, in order,
	// as "module.name" (after torch's own module mapping, e.g.
	// torch.tensor -> torch._tensor; before pickle's protocol-2 fix_imports).
	Globals []string `json:"globals"`
	// Refused lists the globals off the allowlist (the load stopped at the first).
	Refused []string `json:"refused"`
	// Events lists backstop events the hook refused (an import, exec, a
	// process...): a file that gets here found a way around the allowlist.
	Events      []string `json:"events"`
	Loaded      bool     `json:"loaded"`
	Error       string   `json:"error"` // torch.load's exception, when !Loaded
	Root        string   `json:"root"`  // Python type of the loaded object
	TorchScript bool     `json:"torchscript"`
	Tensors     []Tensor `json:"tensors"`
	// DescribeError is set when the loaded object could not be walked.
	DescribeError string `json:"describe_error"`
	// WeightsOnlyLoaded (with Options.WeightsOnly) says whether
	// torch.load(weights_only=True) succeeded; WeightsOnlyError why not.
	WeightsOnlyLoaded bool   `json:"weights_only_loaded"`
	WeightsOnlyError  string `json:"weights_only_error"`
	// Timeout is set when the load did not finish in Options.Timeout; the
	// fields above hold what was seen until then (Globals streams live).
	Timeout bool `json:"-"`
}

// OffAllowlist reports whether torch asked for a global off the allowlist.
func (r *Result) OffAllowlist() bool { return len(r.Refused) > 0 }

// Oracle is a running child process; it loads one file at a time.
type Oracle struct {
	opts Options
	dir  string

	mu    sync.Mutex
	cmd   *exec.Cmd
	stdin io.WriteCloser
	lines chan line
	next  int
}

type line struct {
	ID     *int    `json:"id"`
	Ready  bool    `json:"ready"`
	Global string  `json:"global"`
	Done   *Result `json:"done"`
	err    error
}

// Available reports whether Python with torch can be run, and why not.
func Available() (bool, string) {
	if _, err := os.Stat(Python); err != nil {
		return false, Python + " not installed"
	}
	out, err := exec.Command(Python, "-I", "-c", "import torch, numpy; print(torch.__version__)").CombinedOutput()
	if err != nil {
		return false, "torch not importable by " + Python + " (apt-get install python3-torch python3-numpy): " + lastLine(out)
	}
	return true, strings.TrimSpace(string(out))
}

var availability = sync.OnceValues(func() (bool, string) { return Available() })

// Require starts an Oracle for a test, closed when the test ends, or skips
// the test (with the reason) where Python with torch is missing, and with
// -short (the oracle tests test no concurrency and take seconds).
func Require(tb testing.TB, opts Options) *Oracle {
	tb.Helper()
	skipUnavailable(tb)
	o, err := Start(opts)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { o.Close() })
	return o
}

func skipUnavailable(tb testing.TB) {
	tb.Helper()
	if testing.Short() {
		tb.Skip("the torch oracle is not run with -short")
	}
	if ok, why := availability(); !ok {
		tb.Skip("torch oracle unavailable: " + why)
	}
}

var shared struct {
	sync.Mutex
	m map[string]*Oracle
}

// Shared is Require with one Oracle per set of options for the whole test
// binary (starting torch costs seconds); call CloseShared from TestMain.
func Shared(tb testing.TB, opts Options) *Oracle {
	tb.Helper()
	skipUnavailable(tb)
	key := fmt.Sprint(opts.Allow, opts.Timeout, opts.StartTimeout, opts.WeightsOnly, opts.AddressSpace, opts.WatchBuild)
	shared.Lock()
	defer shared.Unlock()
	if o := shared.m[key]; o != nil {
		return o
	}
	o, err := Start(opts)
	if err != nil {
		tb.Fatal(err)
	}
	if shared.m == nil {
		shared.m = map[string]*Oracle{}
	}
	shared.m[key] = o
	return o
}

// CloseShared closes every Oracle Shared started.
func CloseShared() {
	shared.Lock()
	defer shared.Unlock()
	for k, o := range shared.m {
		o.Close()
		delete(shared.m, k)
	}
}

// Start starts the child process (it is restarted as needed).
func Start(opts Options) (*Oracle, error) {
	if ok, why := availability(); !ok {
		return nil, fmt.Errorf("%w: %s", ErrUnavailable, why)
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 5 * time.Second
	}
	if opts.StartTimeout <= 0 {
		opts.StartTimeout = 60 * time.Second
	}
	if opts.AddressSpace == 0 {
		opts.AddressSpace = 4 << 30
	}
	for _, g := range opts.Allow {
		if !strings.Contains(g, ".") || strings.ContainsAny(g, "\n\x00") {
			return nil, fmt.Errorf("torchoracle: allowlist entry %q is not module.name", g)
		}
	}
	dir, err := os.MkdirTemp("", "torchoracle-")
	if err != nil {
		return nil, err
	}
	o := &Oracle{opts: opts, dir: dir}
	if err := o.start(); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	return o, nil
}

var unshareWorks = sync.OnceValue(func() bool {
	return exec.Command("unshare", "-rn", "true").Run() == nil
})

func (o *Oracle) start() error {
	work := filepath.Join(o.dir, "work")
	if err := os.RemoveAll(work); err != nil {
		return err
	}
	if err := os.Mkdir(work, 0o700); err != nil {
		return err
	}
	args := []string{Python, "-I", "-c", script}
	if unshareWorks() {
		args = append([]string{"unshare", "-rn"}, args...)
	}
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Dir = work
	cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + work, "TMPDIR=" + work, "LC_ALL=C.UTF-8",
		"OMP_NUM_THREADS=1", "MKL_NUM_THREADS=1", "PYTHONDONTWRITEBYTECODE=1", "PYTHONHASHSEED=0"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	pr, pw, err := os.Pipe()
	if err != nil {
		return err
	}
	cmd.ExtraFiles = []*os.File{pw}
	var stderr tail
	cmd.Stderr = &stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		pr.Close()
		pw.Close()
		return err
	}
	if err := cmd.Start(); err != nil {
		pr.Close()
		pw.Close()
		return fmt.Errorf("torchoracle: %w", err)
	}
	pw.Close()
	lines := make(chan line, 64)
	go func() {
		defer close(lines)
		defer pr.Close()
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 64<<10), 256<<20)
		for sc.Scan() {
			var l line
			if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
				l.err = fmt.Errorf("torchoracle: bad line from the child: %v", err)
			}
			lines <- l
		}
		lines <- line{err: fmt.Errorf("torchoracle: child ended: %s", stderr.String())}
	}()
	o.cmd, o.stdin, o.lines = cmd, stdin, lines
	cfg, _ := json.Marshal(map[string]any{"allow": o.opts.Allow, "tmp": work,
		"weights_only": o.opts.WeightsOnly, "watch_build": o.opts.WatchBuild, "address_space": max(o.opts.AddressSpace, 0)})
	if _, err := stdin.Write(append(cfg, '\n')); err != nil {
		o.kill()
		return fmt.Errorf("torchoracle: %w", err)
	}
	timer := time.NewTimer(o.opts.StartTimeout)
	defer timer.Stop()
	select {
	case l := <-lines:
		if l.err != nil || !l.Ready {
			o.kill()
			return fmt.Errorf("torchoracle: child did not start: %v", l.err)
		}
		return nil
	case <-timer.C:
		o.kill()
		return fmt.Errorf("torchoracle: child did not start within %v: %s", o.opts.StartTimeout, stderr.String())
	}
}

func (o *Oracle) kill() {
	if o.cmd == nil {
		return
	}
	if o.cmd.Process != nil {
		syscall.Kill(-o.cmd.Process.Pid, syscall.SIGKILL)
	}
	o.stdin.Close()
	o.cmd.Wait()
	for range o.lines {
	}
	o.cmd = nil
}

// Load runs torch.load on path (an absolute path is not required) and
// reports what torch did. An error means the oracle itself failed (the
// child could not be started or answered garbage), not the file.
func (o *Oracle) Load(path string) (*Result, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.cmd == nil {
		if err := o.start(); err != nil {
			return nil, err
		}
	}
	o.next++
	id := o.next
	req, _ := json.Marshal(map[string]any{"id": id, "path": abs})
	if _, err := o.stdin.Write(append(req, '\n')); err != nil {
		o.kill()
		return nil, fmt.Errorf("torchoracle: %w", err)
	}
	res := &Result{Path: path}
	timer := time.NewTimer(o.opts.Timeout)
	defer timer.Stop()
	for {
		select {
		case l := <-o.lines:
			if l.err != nil {
				o.kill()
				// the child died on this file (a crash in torch, the address
				// space cap): that is torch's answer, not the oracle failing
				res.Error = "child died: " + l.err.Error()
				return res, nil
			}
			if l.ID == nil || *l.ID != id {
				continue
			}
			if l.Global != "" {
				res.Globals = append(res.Globals, l.Global)
				continue
			}
			if l.Done != nil {
				d := l.Done
				d.Path = path
				return d, nil
			}
		case <-timer.C:
			o.kill()
			res.Timeout = true
			res.Error = fmt.Sprintf("torch.load did not finish within %v", o.opts.Timeout)
			for _, g := range res.Globals {
				if !o.allowed(g) {
					res.Refused = append(res.Refused, g)
				}
			}
			return res, nil
		}
	}
}

func (o *Oracle) allowed(g string) bool {
	for _, a := range o.opts.Allow {
		if a == g {
			return true
		}
	}
	return false
}

// Close ends the child process and removes its directory.
func (o *Oracle) Close() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.cmd != nil {
		o.stdin.Close()
		done := make(chan struct{})
		go func() { o.cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			syscall.Kill(-o.cmd.Process.Pid, syscall.SIGKILL)
			<-done
		}
		for range o.lines {
		}
		o.cmd = nil
	}
	return os.RemoveAll(o.dir)
}

// tail keeps the last few KiB a child wrote to stderr, for error messages.
type tail struct {
	mu  sync.Mutex
	buf []byte
}

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if len(t.buf) > 4096 {
		t.buf = t.buf[len(t.buf)-4096:]
	}
	return len(p), nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.TrimSpace(string(t.buf))
}

func lastLine(b []byte) string {
	s := strings.TrimSpace(string(b))
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	return s
}
