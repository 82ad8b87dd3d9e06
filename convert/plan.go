package convert

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unsafe"

	"github.com/gosafetensors/safetensors"
	"github.com/gosafetensors/safetensors/sharded"
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
	// ErrNoCheckpoint reports a directory given to [Dir] that holds no
	// checkpoint: nothing was read that could be wrong. It is
	// sharded.ErrNoModel, the error every package gives for a folder
	// without a model.
	ErrNoCheckpoint = sharded.ErrNoModel
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
	opt     planOptions
	ck      *torch.Checkpoint
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
// entries are skipped, which aliases are dropped; [Plan.Write] writes it.
// An invalid option is an error wrapping [ErrOption], and so is
// [WithReaderOptions]: c is read already.
func NewPlan(c *torch.Checkpoint, opts ...PlanOption) (*Plan, error) {
	opt, err := planOnly(opts)
	if err != nil {
		return nil, err
	}
	return newPlan(c, opt)
}

// planOnly builds the options of a function given an open checkpoint.
func planOnly(opts []PlanOption) (planOptions, error) {
	opt, err := buildPlanOptions(opts)
	if err == nil && len(opt.torch) > 0 {
		err = fmt.Errorf("%w: WithReaderOptions: the checkpoint is open already (give its options to torch.Open)", ErrOption)
	}
	return opt, err
}

// newPlan decides the plan in steps: the entry to unwrap, the entries in
// scope (the rest skipped), the aliases dropped, the tensors written and
// their metadata, their order in the file, and the output cap.
func newPlan(c *torch.Checkpoint, opt planOptions) (*Plan, error) {
	p := &Plan{opt: opt, sources: map[string]*torch.Tensor{}, ck: c}
	p.report.Format = c.Format
	prefix, err := choosePrefix(c, opt.key)
	if err != nil {
		return nil, err
	}
	p.report.Unwrapped = prefix
	var cands []candidate
	cands, p.report.Skipped = selectEntries(c.Entries, prefix)
	if len(cands) == 0 && len(c.Entries) > 0 {
		return nil, noModelTensors(p.report.Skipped, prefix)
	}
	var removed map[string]bool
	if !opt.keepAliases {
		removed, p.report.Removed = dropAliases(cands, opt.prefer, opt.discard)
	}
	infos, err := p.addTensors(cands, removed)
	if err != nil {
		return nil, err
	}
	p.report.Metadata = aliasMetadata(p.report.Removed)
	if err := p.layout(infos); err != nil {
		return nil, err
	}
	stored := storedBytes(p.sources)
	if limit := opt.outputCap(stored); p.report.Bytes > limit {
		return nil, &OutputCapError{Bytes: p.report.Bytes, Stored: stored, Cap: limit}
	}
	return p, nil
}

// candidate is a tensor entry in scope, under the name it is written as.
type candidate struct {
	name string
	t    *torch.Tensor
}

// selectEntries returns the tensors of entries under prefix ("" for the
// root), named relative to it, in checkpoint order, and the entries
// skipped: outside prefix, not tensors, or optimizer state (wherever it
// sits, unless prefix lies inside it: WithKey("optimizer.state")).
func selectEntries(entries []torch.Entry, prefix string) ([]candidate, []Skipped) {
	var optimizers []string
	for _, o := range optimizerSubtrees(entries) {
		if prefix == "" || !under(prefix, o) {
			optimizers = append(optimizers, o)
		}
	}
	inOptimizer := func(name string) bool {
		for _, o := range optimizers {
			if under(name, o) {
				return true
			}
		}
		return false
	}
	var cands []candidate
	var skipped []Skipped
	for _, e := range entries {
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
			skipped = append(skipped, Skipped{Name: e.Name, Kind: e.Kind, Reason: reason})
		}
		switch {
		case !inScope && (underAny(e.Name, optimizerRoots) || inOptimizer(e.Name)):
			skip("optimizer state")
		case !inScope:
			skip("outside " + prefix)
		case e.Tensor == nil:
			skip("not a tensor")
		case prefix == "" && underAny(e.Name, optimizerRoots) || inOptimizer(e.Name):
			skip("optimizer state")
		case e.Name == "" && prefix == "":
			// the root is one tensor: nothing names it
			cands = append(cands, candidate{bareTensorName, e.Tensor})
		default:
			cands = append(cands, candidate{name, e.Tensor})
		}
	}
	return cands, skipped
}

// dropAliases groups identical views and keeps one name of each group
// (chooseKept, by convert.py's rule): it returns the names dropped, and
// the aliases sorted by name.
func dropAliases(cands []candidate, prefer, discard []string) (map[string]bool, []Alias) {
	removed := map[string]bool{}
	var aliases []Alias
	groups := map[string][]string{}
	var order []string
	for _, c := range cands {
		k := viewKey(c.t)
		if _, ok := groups[k]; !ok {
			order = append(order, k)
		}
		groups[k] = append(groups[k], c.name)
	}
	for _, k := range order {
		g := groups[k]
		if len(g) < 2 {
			continue
		}
		keep := chooseKept(g, prefer, discard)
		for _, n := range g {
			if n != keep {
				removed[n] = true
				aliases = append(aliases, Alias{Name: n, Kept: keep})
			}
		}
	}
	slices.SortFunc(aliases, func(a, b Alias) int { return strings.Compare(a.Name, b.Name) })
	return removed, aliases
}

// addTensors records the candidates not removed as the plan's tensors,
// in checkpoint order, refusing names and dtypes safetensors cannot hold;
// it returns their infos.
func (p *Plan) addTensors(cands []candidate, removed map[string]bool) ([]safetensors.TensorInfo, error) {
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
	return infos, nil
}

// aliasMetadata is the __metadata__ written: "format": "pt" and, as
// convert.py records them, each dropped alias naming the tensor kept (a
// name "format" keeps the format).
func aliasMetadata(aliases []Alias) map[string]string {
	md := map[string]string{"format": "pt"}
	for _, a := range aliases {
		if _, ok := md[a.Name]; !ok {
			md[a.Name] = a.Kept
		}
	}
	return md
}

// layout puts the plan's tensors in file order, checking that the header
// can be written, and sums their bytes and the file size.
func (p *Plan) layout(infos []safetensors.TensorInfo) error {
	h, _, err := safetensors.Layout(infos, p.report.Metadata)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrInput, err)
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
	return nil
}

// storedBytes sums the storages the sources view, each once.
func storedBytes(sources map[string]*torch.Tensor) int64 {
	stored := int64(0)
	seen := map[*torch.Storage]bool{}
	for _, t := range sources {
		if !seen[t.Storage] {
			seen[t.Storage] = true
			stored += t.Storage.NBytes()
		}
	}
	return stored
}

// bareTensorName names the tensor of a checkpoint whose root is one tensor
// (torch.save(t, path)): a safetensors name of "" would be legal but
// useless.
const bareTensorName = "tensor"

// noModelTensors explains a checkpoint with entries but nothing to write.
func noModelTensors(skipped []Skipped, prefix string) error {
	var opt, other, tensors int
	for _, s := range skipped {
		switch {
		case s.Kind == "tensor" && s.Reason == "optimizer state":
			opt++
		case s.Kind == "tensor":
			tensors++
		default:
			other++
		}
	}
	where := "the checkpoint"
	if prefix != "" {
		where = strconv.Quote(prefix)
	}
	switch {
	case opt > 0 && tensors == 0:
		return fmt.Errorf("%w: no model tensors: %s holds only optimizer state (%d tensors skipped; convert the model's checkpoint, or choose an entry: WithKey, convert --key)", ErrInput, where, opt)
	case tensors > 0:
		return fmt.Errorf("%w: no model tensors in %s (%d tensors outside it; choose another entry: WithKey, convert --key)", ErrInput, where, tensors)
	}
	return fmt.Errorf("%w: no model tensors: %s holds no tensors (%d other values)", ErrInput, where, other)
}

// under reports whether name is the entry prefix or inside it ("" is the
// root, which holds everything).
func under(name, prefix string) bool {
	return prefix == "" || name == prefix || strings.HasPrefix(name, prefix+".")
}

// optimizerSubtrees returns the entries ("" for the root) shaped like an
// optimizer's state_dict(): a "param_groups" list whose groups list their
// "params" (parameter indices), beside a "state" keyed by parameter index
// (empty before the first step). torch.optim writes exactly this for
// every optimizer; flattened names show list indices and int keys as
// digits, so the shape is read from the names.
func optimizerSubtrees(entries []Entry) []string {
	type evidence struct{ groups, state, badState bool }
	found := map[string]*evidence{}
	var order []string
	get := func(p string) *evidence {
		ev := found[p]
		if ev == nil {
			ev = &evidence{}
			found[p] = ev
			order = append(order, p)
		}
		return ev
	}
	isIndex := func(s string) bool {
		_, err := strconv.ParseUint(s, 10, 64)
		return err == nil
	}
	for _, e := range entries {
		parts := strings.Split(e.Name, ".")
		for k, part := range parts {
			p := strings.Join(parts[:k], ".")
			switch part {
			case "param_groups":
				// param_groups.<i>.params[.<j>]
				if k+2 < len(parts) && isIndex(parts[k+1]) && parts[k+2] == "params" {
					get(p).groups = true
				}
			case "state":
				switch {
				case k+1 == len(parts) && e.Kind == "dict" && e.Tensor == nil:
					get(p).state = true // empty state: no step taken yet
				case k+1 < len(parts) && isIndex(parts[k+1]):
					get(p).state = true
				case k+1 < len(parts):
					get(p).badState = true
				}
			}
		}
	}
	var out []string
	for _, p := range order {
		if ev := found[p]; ev.groups && ev.state && !ev.badState {
			out = append(out, p)
		}
	}
	return out
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
	// convert.py unwraps "state_dict" whenever the root has it; PyTorch's
	// "saving a general checkpoint" recipe writes "model_state_dict".
	for _, k := range []string{"state_dict", "model_state_dict"} {
		if has(k) {
			return k, nil
		}
	}
	// "model" (and "module", DeepSpeed's) is also a common first component
	// of plain state-dict keys (model.embed_tokens.weight, DataParallel's
	// module.*), and flattened names do not say whether it was a dict of
	// its own. Unwrap it only in what is clearly a training checkpoint:
	// every weight under it, and something else (epoch, args, optimizer
	// state) beside it.
	optimizers := optimizerSubtrees(c.Entries)
	isOptimizer := func(name string) bool {
		if underAny(name, optimizerRoots) {
			return true
		}
		for _, o := range optimizers {
			if under(name, o) {
				return true
			}
		}
		return false
	}
candidates:
	for _, k := range []string{"model", "module"} {
		if !has(k) {
			continue
		}
		other := false
		for _, e := range c.Entries {
			if under(e.Name, k) {
				continue
			}
			if e.Tensor != nil && !isOptimizer(e.Name) {
				continue candidates
			}
			other = true
		}
		if other {
			return k, nil
		}
	}
	return "", nil
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
