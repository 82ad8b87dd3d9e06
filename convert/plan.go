package convert

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unsafe"

	"github.com/gosafetensors/safetensors"
	"github.com/gosafetensors/safetensors/torch"
)

// Errors. Errors from reading the checkpoint are *torch.Error values and
// match torch.ErrNotAllowed, torch.ErrUnsupported, torch.ErrCorrupt or
// torch.ErrLimit.
var (
	// ErrInput reports a checkpoint that is readable but cannot be converted
	// as asked: the WithKey entry does not exist, a tensor has no
	// safetensors dtype, two names collide.
	ErrInput = errors.New("cannot convert")
	// ErrExists reports an output file that already exists (see
	// WithOverwrite). It is safetensors.ErrExists, shared by every package
	// that writes.
	ErrExists = safetensors.ErrExists
	// ErrOutputIsInput reports an output that is the checkpoint being
	// read (through any link), refused even with WithOverwrite. It is
	// safetensors.ErrOutputIsInput.
	ErrOutputIsInput = safetensors.ErrOutputIsInput
	// ErrVerify reports an output whose re-read tensors differ from the
	// source: a disk or file-system problem. The output is removed. It is
	// safetensors.ErrVerify.
	ErrVerify = safetensors.ErrVerify
)

// OutputCapError is a conversion refused because views with zero strides
// would expand the checkpoint's stored bytes into more tensor data than
// the cap allows (see WithMaxOutputBytes). It wraps ErrInput.
type OutputCapError struct {
	Bytes  int64 // tensor data the output would hold
	Stored int64 // bytes the checkpoint's storages hold
	Cap    int64 // the cap in force
}

func (e *OutputCapError) Error() string {
	return fmt.Sprintf("%v: the output would hold %d bytes of tensor data from %d stored bytes (views with zero strides expand); the cap is %d", ErrInput, e.Bytes, e.Stored, e.Cap)
}

func (e *OutputCapError) Unwrap() error { return ErrInput }

// Alias is a name dropped because it is an identical view of a kept name.
type Alias struct {
	Name string // removed
	Kept string // written instead, holding the same bytes
}

// Skipped is a checkpoint entry that is not written.
type Skipped struct {
	Name   string // entry name in the checkpoint (full dotted path)
	Kind   string // "tensor", "int", "float", "str", "bytes", "bool", "none", "dict", "list", "tuple"
	Reason string // "not a tensor", "optimizer state", "outside state_dict"
}

// TensorReport describes one output tensor.
type TensorReport struct {
	Name         string  // name in the output
	Source       string  // entry name in the checkpoint
	DType        string  // safetensors dtype
	Shape        []int64 // dimensions
	Bytes        int64   // data size
	Materialized bool    // a strided view (transpose, step, expand...): the bytes were gathered into C order
	SHA256       string  // hex digest of the bytes written, with WithDigests; else empty
}

// Report describes a conversion, planned or done.
type Report struct {
	Input     string            // checkpoint path
	Output    string            // safetensors path; empty in a plan
	Format    torch.Format      // checkpoint container: torch.FormatZip or torch.FormatLegacy
	Unwrapped string            // entry whose contents were converted ("state_dict", "model", the WithKey entry) or "" for the root
	Tensors   []TensorReport    // in file order
	Removed   []Alias           // aliases dropped, sorted by name
	Skipped   []Skipped         // entries not written, in checkpoint order
	Metadata  map[string]string // __metadata__ written
	Bytes     int64             // tensor data bytes
	FileSize  int64             // output file size (header included)
	Verified  bool              // the output was re-read and every tensor matched
}

// Plan is a conversion decided but not yet written.
type Plan struct {
	report  Report
	sources map[string]*torch.Tensor // output name -> source view
	opt     options
}

// Report returns what the plan will write (without digests).
func (p *Plan) Report() *Report {
	r := p.report
	r.Tensors = slices.Clone(r.Tensors)
	return &r
}

// optimizerRoots are top-level entries holding optimizer and scheduler state
// in the training checkpoints people actually save (torchvision/DeiT style,
// Lightning, DeepSpeed).
var optimizerRoots = []string{"optimizer", "optimizers", "optimizer_states", "optim", "lr_scheduler", "lr_schedulers", "scheduler"}

func underAny(name string, roots []string) bool {
	for _, r := range roots {
		if name == r || strings.HasPrefix(name, r+".") {
			return true
		}
	}
	return false
}

// NewPlan decides what converting c writes: which entry is unwrapped, which
// entries are skipped, which aliases are dropped. The writing options
// (WithVerify, WithDigests, WithOverwrite, WithProgress) are kept for
// [Plan.Write]; an invalid option is an error wrapping [ErrOption].
func NewPlan(c *torch.Checkpoint, opts ...Option) (*Plan, error) {
	opt, err := buildOptions(opts)
	if err != nil {
		return nil, err
	}
	return newPlan(c, opt)
}

func newPlan(c *torch.Checkpoint, opt options) (*Plan, error) {
	p := &Plan{opt: opt, sources: map[string]*torch.Tensor{}}
	p.report.Format = c.Format
	prefix, err := choosePrefix(c, opt.key)
	if err != nil {
		return nil, err
	}
	p.report.Unwrapped = prefix
	bareOptimizer := prefix == "" && isOptimizerStateDict(c.Entries)

	type cand struct {
		name string
		t    *torch.Tensor
	}
	var cands []cand
	for _, e := range c.Entries {
		name, inScope := e.Name, true
		if prefix != "" {
			switch {
			case e.Name == prefix:
				// A tensor stored directly under the key keeps its name.
			case strings.HasPrefix(e.Name, prefix+"."):
				name = e.Name[len(prefix)+1:]
			default:
				inScope = false
			}
		}
		skip := func(reason string) {
			p.report.Skipped = append(p.report.Skipped, Skipped{Name: e.Name, Kind: e.Kind, Reason: reason})
		}
		switch {
		case !inScope && (underAny(e.Name, optimizerRoots)):
			skip("optimizer state")
		case !inScope:
			skip("outside " + prefix)
		case e.Tensor == nil:
			skip("not a tensor")
		case prefix == "" && (underAny(e.Name, optimizerRoots) || bareOptimizer):
			skip("optimizer state")
		default:
			cands = append(cands, cand{name, e.Tensor})
		}
	}

	// Group identical views; keep one name per group.
	removed := map[string]bool{}
	if !opt.keepAliases {
		groups := map[string][]string{}
		var order []string
		byName := map[string]*torch.Tensor{}
		for _, c := range cands {
			k := viewKey(c.t)
			if _, ok := groups[k]; !ok {
				order = append(order, k)
			}
			groups[k] = append(groups[k], c.name)
			byName[c.name] = c.t
		}
		for _, k := range order {
			g := groups[k]
			if len(g) < 2 {
				continue
			}
			keep := chooseKept(g, opt.prefer, opt.discard)
			for _, n := range g {
				if n != keep {
					removed[n] = true
					p.report.Removed = append(p.report.Removed, Alias{Name: n, Kept: keep})
				}
			}
		}
		slices.SortFunc(p.report.Removed, func(a, b Alias) int { return strings.Compare(a.Name, b.Name) })
	}

	var infos []safetensors.TensorInfo
	for _, c := range cands {
		if removed[c.name] {
			continue
		}
		if c.name == "__metadata__" {
			return nil, fmt.Errorf("%w: tensor %q: safetensors reserves the name __metadata__", ErrInput, c.t.Name)
		}
		if _, dup := p.sources[c.name]; dup {
			return nil, fmt.Errorf("%w: two entries become the tensor %q", ErrInput, c.name)
		}
		dt := c.t.DType
		if !dt.Valid() {
			return nil, fmt.Errorf("%w: tensor %q: dtype %s has no safetensors equivalent", ErrInput, c.t.Name, c.t.DType)
		}
		p.sources[c.name] = c.t
		infos = append(infos, safetensors.TensorInfo{Name: c.name, DType: dt, Shape: c.t.Shape})
		p.report.Tensors = append(p.report.Tensors, TensorReport{
			Name: c.name, Source: c.t.Name, DType: dt.String(), Shape: c.t.Shape, Bytes: c.t.NBytes(),
			Materialized: !c.t.Contiguous(),
		})
	}

	md := map[string]string{"format": "pt"}
	for _, a := range p.report.Removed {
		if _, ok := md[a.Name]; !ok {
			md[a.Name] = a.Kept
		}
	}
	p.report.Metadata = md

	// Put the tensors in file order and check the header can be written.
	h, _, err := safetensors.Layout(infos, md)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInput, err)
	}
	byName := make(map[string]int, len(p.report.Tensors))
	for i, t := range p.report.Tensors {
		byName[t.Name] = i
	}
	ordered := make([]TensorReport, len(h.Tensors))
	for i, t := range h.Tensors {
		ordered[i] = p.report.Tensors[byName[t.Name]]
		p.report.Bytes += t.Size()
	}
	p.report.Tensors = ordered
	p.report.FileSize = h.FileSize()
	stored := int64(0)
	seen := map[*torch.Storage]bool{}
	for _, t := range p.sources {
		if !seen[t.Storage] {
			seen[t.Storage] = true
			stored += t.Storage.NBytes()
		}
	}
	if limit := opt.outputCap(stored); p.report.Bytes > limit {
		return nil, &OutputCapError{Bytes: p.report.Bytes, Stored: stored, Cap: limit}
	}
	return p, nil
}

// choosePrefix returns the entry to unwrap.
func choosePrefix(c *torch.Checkpoint, key string) (string, error) {
	if key != "" {
		for _, e := range c.Entries {
			if e.Name == key || strings.HasPrefix(e.Name, key+".") {
				return key, nil
			}
		}
		return "", fmt.Errorf("%w: the checkpoint has no entry %q (top-level entries: %s)", ErrInput, key, topLevel(c.Entries))
	}
	has := func(prefix string) bool {
		for _, e := range c.Entries {
			if e.Tensor != nil && strings.HasPrefix(e.Name, prefix+".") {
				return true
			}
		}
		return false
	}
	// convert.py unwraps "state_dict" whenever the root has it.
	if has("state_dict") {
		return "state_dict", nil
	}
	// "model" is also a common first component of plain state-dict keys
	// (model.embed_tokens.weight), and flattened names do not say whether
	// "model" was a dict of its own. Unwrap it only in what is clearly a
	// training checkpoint: every weight under "model", and something else
	// (epoch, args, optimizer state) beside it.
	if has("model") {
		other := false
		for _, e := range c.Entries {
			if strings.HasPrefix(e.Name, "model.") || e.Name == "model" {
				continue
			}
			if e.Tensor != nil && !underAny(e.Name, optimizerRoots) {
				return "", nil
			}
			other = true
		}
		if other {
			return "model", nil
		}
	}
	return "", nil
}

// isOptimizerStateDict reports whether the root itself is an optimizer's
// state_dict(): "state" keyed by parameter index, plus "param_groups".
func isOptimizerStateDict(entries []Entry) bool {
	groups, state := false, false
	for _, e := range entries {
		switch {
		case strings.HasPrefix(e.Name, "param_groups."):
			groups = true
		case strings.HasPrefix(e.Name, "state."):
			i, _, _ := strings.Cut(e.Name[len("state."):], ".")
			if _, err := strconv.Atoi(i); err == nil {
				state = true
			}
		}
	}
	return groups && state
}

// Entry is torch.Entry, named here for brevity.
type Entry = torch.Entry

func topLevel(entries []Entry) string {
	var names []string
	seen := map[string]bool{}
	for _, e := range entries {
		top, _, _ := strings.Cut(e.Name, ".")
		if !seen[top] {
			seen[top] = true
			names = append(names, strconv.Quote(top))
		}
		if len(names) == 10 {
			names = append(names, "...")
			break
		}
	}
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}

// viewKey identifies a view: storage, dtype, offset, shape and stride, as
// torch.Tensor.SameView compares them.
func viewKey(t *torch.Tensor) string {
	// Built by hand: fmt costs more than the rest of planning together on
	// checkpoints with 100,000 tensors.
	b := make([]byte, 0, 64)
	b = strconv.AppendUint(b, uint64(uintptr(unsafe.Pointer(t.Storage))), 16)
	b = append(b, '|')
	b = append(b, t.DType.String()...)
	b = append(b, '|')
	b = strconv.AppendInt(b, t.Offset, 10)
	for _, dims := range [][]int64{t.Shape, t.Stride} {
		b = append(b, '|')
		for i, d := range dims {
			if i > 0 {
				b = append(b, ',')
			}
			b = strconv.AppendInt(b, d, 10)
		}
	}
	return string(b)
}

// chooseKept applies convert.py's rule to a group of identical views.
func chooseKept(group, prefer, discard []string) string {
	g := slices.Clone(group)
	slices.Sort(g)
	for _, n := range g {
		if slices.Contains(prefer, n) {
			return n
		}
	}
	for _, n := range g {
		if !slices.Contains(discard, n) {
			return n
		}
	}
	return g[0]
}
