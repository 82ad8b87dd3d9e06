package torch

import (
	"errors"
	"fmt"
	"math"
	"math/big"
	"slices"
	"strconv"
	"strings"

	"github.com/gosafetensors/safetensors/torch/pickle"
)

// Reduce handles REDUCE: only allowlisted callables, each turned into an
// inert record after its arguments are validated.
func (p *policy) Reduce(callee, args any, off int64) (any, error) {
	g, isGlobal := callee.(*global)
	callable := isGlobal && g.allow != nil && (g.allow.role < roleStorageType || g.allow.role == roleUser)
	if !callable {
		if p.scan != nil {
			p.scan.opcode(pickle.OpReduce, off, pickle.Describe(callee))
			return &pickle.Opaque{What: pickle.Describe(callee) + "(...)", Offset: off}, nil
		}
		if isGlobal && g.allow != nil {
			return nil, &Error{Kind: ErrNotAllowed, Entry: p.entry, Offset: off, Global: g.String(),
				Msg: fmt.Sprintf("refusing to call %s (it is only allowed %s)", g, placeOf(g.allow))}
		}
		return nil, p.errf(ErrNotAllowed, off, "REDUCE on a %s (only allowlisted functions may be called)", pickle.Describe(callee))
	}
	t, ok := args.(pickle.Tuple)
	if !ok {
		if p.scan != nil {
			p.scan.problem(p.entry, off, fmt.Sprintf("REDUCE %s with %s arguments", g, pickle.TypeName(args)))
			return &pickle.Opaque{What: g.String() + "(...)", Offset: off}, nil
		}
		return nil, p.errf(ErrCorrupt, off, "REDUCE %s: arguments are a %s, not a tuple", g, pickle.TypeName(args))
	}
	v, err := p.call(g, t, off)
	if err != nil {
		if p.scan != nil {
			if g.allow.role == roleUser {
				p.scanRefusal(pickle.OpReduce, off, err)
			} else {
				p.scan.problem(p.entry, off, err.Msg)
			}
			return &pickle.Opaque{What: g.String() + "(...)", Offset: off}, nil
		}
		return nil, err
	}
	return v, nil
}

// scanRefusal records a refused call, NEWOBJ or BUILD of an object the
// caller allowed in scan mode: one that would make CPython call or use
// what the pickle chose (ErrNotAllowed) is a dangerous opcode, anything
// else (a tensor inside) a problem.
func (p *policy) scanRefusal(op pickle.Op, off int64, err *Error) {
	if errors.Is(err, ErrNotAllowed) {
		p.scan.opcode(op, off, err.Msg)
		return
	}
	p.scan.problem(p.entry, off, err.Msg)
}

func placeOf(a *allowEntry) string {
	switch a.role {
	case roleStorageType:
		return "as the storage type of a persistent id, or as a value"
	case roleValue:
		return "as a value"
	}
	return "as the dtype argument of torch._utils._rebuild_tensor_v3, or as a value"
}

// call validates the arguments of an allowlisted callable and builds its record.
func (p *policy) call(g *global, args pickle.Tuple, off int64) (any, *Error) {
	bad := func(kind error, format string, a ...any) *Error {
		return p.errf(kind, off, "%s: %s", g, fmt.Sprintf(format, a...))
	}
	switch g.allow.role {
	case roleOrderedDict:
		d := &pickle.Dict{Type: "OrderedDict"}
		if len(args) == 0 {
			return d, nil
		}
		if len(args) != 1 {
			return nil, bad(ErrCorrupt, "expected at most 1 argument, got %d", len(args))
		}
		var pairs []any
		switch x := args[0].(type) {
		case *pickle.List:
			pairs = x.Items
		case pickle.Tuple:
			pairs = x
		case *pickle.Dict:
			// copying is work the opcode count does not see: a memo GET of
			// one big dict, reduced again and again, would be quadratic
			if err := p.charge(len(x.Keys)); err != nil {
				return nil, err
			}
			for i := range x.Keys {
				d.Set(x.Keys[i], x.Values[i])
			}
			return d, nil
		default:
			return nil, bad(ErrCorrupt, "argument is a %s, not a sequence of pairs", pickle.TypeName(args[0]))
		}
		if err := p.charge(len(pairs)); err != nil { // see above
			return nil, err
		}
		for _, pair := range pairs {
			var kv []any
			switch x := pair.(type) {
			case pickle.Tuple:
				kv = x
			case *pickle.List:
				kv = x.Items
			}
			if len(kv) != 2 {
				return nil, bad(ErrCorrupt, "item is not a (key, value) pair")
			}
			if !d.Set(kv[0], kv[1]) {
				return nil, bad(ErrUnsupported, "dict key of type %s is not supported", pickle.TypeName(kv[0]))
			}
		}
		return d, nil
	case roleCodecsEncode:
		if len(args) != 2 {
			return nil, bad(ErrNotAllowed, "expected (str, 'latin1'), got %d arguments", len(args))
		}
		s, ok1 := args[0].(string)
		enc, ok2 := args[1].(string)
		if !ok1 || !ok2 || enc != "latin1" {
			return nil, bad(ErrNotAllowed, "only (str, 'latin1') is allowed, got (%s, %s)", pickle.TypeName(args[0]), describeArg(args[1]))
		}
		// Each call copies its (possibly memo-shared) argument: without a
		// budget, one big string encoded again and again allocates without
		// bound. Legitimate pickles encode each string once, so the output
		// never exceeds the stream's own length.
		if p.encoded += int64(len(s)); p.encoded > p.limit {
			return nil, bad(ErrLimit, "_codecs.encode output exceeds the %d-byte pickle (a memo-shared string encoded repeatedly)", p.limit)
		}
		b := make([]byte, 0, len(s))
		for _, r := range s {
			if r > 0xff {
				return nil, bad(ErrCorrupt, "character U+%04X cannot be encoded as latin1", r)
			}
			b = append(b, byte(r))
		}
		return b, nil
	case roleTorchSize:
		if len(args) != 1 {
			return nil, bad(ErrCorrupt, "expected 1 argument, got %d", len(args))
		}
		dims, ok := intsOf(args[0], p.lim.MaxDims)
		if !ok {
			return nil, bad(ErrCorrupt, "argument is not a sequence of at most %d ints", p.lim.MaxDims)
		}
		t := make(pickle.Tuple, len(dims))
		for i, d := range dims {
			t[i] = d
		}
		return t, nil
	case roleSet:
		return p.makeSet(g, args, bad)
	case roleByteArray:
		return p.makeByteArray(args, bad)
	case roleComplex:
		return makeComplex(args, bad)
	case roleCounter:
		d := &pickle.Dict{Type: "Counter"}
		if len(args) == 0 {
			return d, nil
		}
		src, ok := args[0].(*pickle.Dict)
		if len(args) != 1 || !ok {
			return nil, bad(ErrUnsupported, "only Counter() and Counter(dict) are supported (torch pickles a Counter as the second)")
		}
		if err := p.charge(len(src.Keys)); err != nil {
			return nil, err
		}
		for i := range src.Keys {
			d.Set(src.Keys[i], src.Values[i])
		}
		return d, nil
	case roleDevice:
		return makeDevice(args, bad)
	case roleUser:
		if err := p.userCall(g, off); err != nil {
			return nil, err
		}
		if err := p.inertInside(g.String()+"(...)", args, off); err != nil {
			return nil, err
		}
		return &userObject{cls: g.String(), off: off, args: args}, nil
	case roleRebuildTensor, roleRebuildTensorV2, roleRebuildTensorV3:
		return p.rebuildTensor(g, args, off)
	case roleRebuildParam, roleRebuildParamState:
		return p.rebuildParameter(g, args, off)
	}
	return nil, bad(ErrNotAllowed, "not callable")
}

// makeSet is set(iterable) / frozenset(iterable), as protocol 2 pickles
// them: REDUCE of builtins.set with a list of the items.
func (p *policy) makeSet(g *global, args pickle.Tuple, bad func(error, string, ...any) *Error) (any, *Error) {
	set := &pickle.Set{Frozen: g.name == "frozenset"}
	if len(args) == 0 {
		return set, nil
	}
	if len(args) != 1 {
		return nil, bad(ErrCorrupt, "expected at most 1 argument, got %d", len(args))
	}
	var items []any
	switch x := args[0].(type) {
	case *pickle.List:
		items = x.Items
	case pickle.Tuple:
		items = x
	case *pickle.Set:
		items = x.Items
	default:
		return nil, bad(ErrUnsupported, "argument is a %s, not a list, tuple or set", pickle.TypeName(args[0]))
	}
	// copying is work the opcode count does not see (see OrderedDict)
	if err := p.charge(len(items)); err != nil {
		return nil, err
	}
	set.Items = slices.Clone(items)
	return set, nil
}

// makeByteArray is bytearray(), bytearray(bytes) or, as protocol 2 pickles
// it, bytearray(str, 'latin-1').
func (p *policy) makeByteArray(args pickle.Tuple, bad func(error, string, ...any) *Error) (any, *Error) {
	var out pickle.ByteArray
	switch {
	case len(args) == 0:
		return pickle.ByteArray{}, nil
	case len(args) == 1:
		b, ok := args[0].([]byte)
		if !ok {
			// bytearray(n) would allocate n zero bytes: torch never writes it
			return nil, bad(ErrUnsupported, "only bytearray(bytes) and bytearray(str, 'latin-1') are supported, got a %s", pickle.TypeName(args[0]))
		}
		if p.encoded += int64(len(b)); p.encoded > p.limit {
			return nil, bad(ErrLimit, "bytearray output exceeds the %d-byte pickle (a memo-shared value copied repeatedly)", p.limit)
		}
		out = pickle.ByteArray(slices.Clone(b))
	case len(args) == 2:
		str, ok1 := args[0].(string)
		enc, ok2 := args[1].(string)
		if !ok1 || !ok2 || enc != "latin-1" && enc != "latin1" {
			return nil, bad(ErrUnsupported, "only bytearray(str, 'latin-1') is supported, got (%s, %s)", pickle.TypeName(args[0]), describeArg(args[1]))
		}
		if p.encoded += int64(len(str)); p.encoded > p.limit {
			return nil, bad(ErrLimit, "bytearray output exceeds the %d-byte pickle (a memo-shared value copied repeatedly)", p.limit)
		}
		out = make(pickle.ByteArray, 0, len(str))
		for _, r := range str {
			if r > 0xff {
				return nil, bad(ErrCorrupt, "character U+%04X cannot be encoded as latin-1", r)
			}
			out = append(out, byte(r))
		}
	default:
		return nil, bad(ErrCorrupt, "expected at most 2 arguments, got %d", len(args))
	}
	return out, nil
}

// makeComplex is complex(real[, imag]) of ints or floats.
func makeComplex(args pickle.Tuple, bad func(error, string, ...any) *Error) (any, *Error) {
	if len(args) > 2 {
		return nil, bad(ErrCorrupt, "expected at most 2 arguments, got %d", len(args))
	}
	var parts [2]float64
	for i, a := range args {
		switch x := a.(type) {
		case float64:
			parts[i] = x
		case int64:
			parts[i] = float64(x)
		case bool:
			if x {
				parts[i] = 1
			}
		default:
			return nil, bad(ErrUnsupported, "argument %d is a %s, not a number", i+1, pickle.TypeName(a))
		}
	}
	return complex(parts[0], parts[1]), nil
}

// device is a torch.device value ("cpu", "cuda:0").
type device string

func (d device) TypeName() string { return "torch.device" }
func (d device) Describe() string { return "torch.device(" + strconv.Quote(string(d)) + ")" }

// deviceTypes are the device types torch.device accepts (torch 1.13's
// list, and those added since).
var deviceTypes = map[string]bool{"cpu": true, "cuda": true, "ipu": true, "xpu": true, "mkldnn": true, "opengl": true,
	"opencl": true, "ideep": true, "hip": true, "ve": true, "fpga": true, "ort": true, "xla": true, "lazy": true,
	"vulkan": true, "mps": true, "meta": true, "hpu": true, "privateuseone": true, "mtia": true, "maia": true}

// makeDevice is torch.device(type[, index]), as torch pickles a device.
func makeDevice(args pickle.Tuple, bad func(error, string, ...any) *Error) (any, *Error) {
	if len(args) == 0 || len(args) > 2 {
		return nil, bad(ErrCorrupt, "expected (type[, index]), got %d arguments", len(args))
	}
	typ, ok := args[0].(string)
	if !ok || typ == "" || len(typ) > 64 {
		return nil, bad(ErrCorrupt, "device type is a %s, not a short str", pickle.TypeName(args[0]))
	}
	kind, index, hasIndex := strings.Cut(typ, ":")
	if !deviceTypes[kind] || hasIndex && (index == "" || strings.Trim(index, "0123456789") != "" || len(args) == 2) {
		// torch.device refuses it ("Expected one of cpu, cuda, ...")
		return nil, bad(ErrCorrupt, "%s is not a device torch knows", strconv.Quote(typ))
	}
	if len(args) == 2 {
		switch i := args[1].(type) {
		case nil:
		case int64:
			if i < 0 {
				return nil, bad(ErrCorrupt, "device index %d is negative", i)
			}
			typ += ":" + strconv.FormatInt(i, 10)
		default:
			return nil, bad(ErrCorrupt, "device index is a %s, not an int", pickle.TypeName(args[1]))
		}
	}
	return device(typ), nil
}

// userObject is what a global the caller allowed (WithAllow) builds: a
// call, NEWOBJ, and BUILDs of it. Nothing is ever called; conversion skips
// it like any other value that is not a tensor.
type userObject struct {
	cls  string
	off  int64
	args any // the constructor's arguments, rechecked at each BUILD (a constructor may keep them)
}

func (u *userObject) TypeName() string { return u.cls + " object" }
func (u *userObject) Describe() string { return u.cls + " object" }

// NewObj handles NEWOBJ (cls.__new__(cls, *args)) of a global the caller
// allowed; anything else is refused by the machine.
func (p *policy) NewObj(cls, args any, off int64) (any, bool, error) {
	g, ok := cls.(*global)
	if !ok || g.allow == nil || g.allow.role != roleUser {
		return nil, false, nil
	}
	err := p.userCall(g, off)
	if err == nil {
		err = p.inertInside(g.String()+" instance", args, off)
	}
	if err != nil {
		if p.scan != nil {
			p.scanRefusal(pickle.OpNewObj, off, err)
			return &pickle.Opaque{What: g.String() + " instance", Offset: off}, true, nil
		}
		return nil, false, err
	}
	return &userObject{cls: g.String(), off: off, args: args}, true, nil
}

// userCall refuses a call (or NEWOBJ) of an allowed name that is allowed
// as a value only (valueOnlyAllow).
func (p *policy) userCall(g *global, off int64) *Error {
	if name := g.String(); valueOnlyAllow[name] {
		return p.errf(ErrNotAllowed, off, "%s called with arguments the pickle chose (it is allowed as a value only: bytes(10**12) or list(range(10**12)) allocates what it is told, and no pickle of its values calls it)", name)
	}
	return nil
}

// isDunder reports whether s is a name Python reserves for behaviour
// (__setstate__, __reduce_ex__, __class__, __dict__...).
func isDunder(s string) bool {
	return len(s) > 4 && strings.HasPrefix(s, "__") && strings.HasSuffix(s, "__")
}

// dunderKey returns the first str key of d (a dict, or nil) that is a
// dunder name.
func dunderKey(d any) (string, bool) {
	x, ok := d.(*pickle.Dict)
	if !ok {
		return "", false
	}
	for _, k := range x.Keys {
		if s, isStr := k.(string); isStr && isDunder(s) {
			return s, true
		}
	}
	return "", false
}

// inertInside checks v, the arguments of an object the caller allowed:
// a tensor reachable from it is unsupported (conversion would lose it); a
// dict with a dunder-named str key is not allowed, since a constructor that
// sets its items as attributes (EasyDict, AttrDict) gives the instance a
// __setstate__ the next BUILD calls, or a __reduce_ex__ the next pickle does.
func (p *policy) inertInside(what string, v any, off int64) *Error {
	return p.walkInside(what, v, off, true)
}

// noTensorInside refuses a tensor reachable from v, the arguments or state
// of an object the caller allowed: conversion would lose it.
func (p *policy) noTensorInside(what string, v any, off int64) *Error {
	return p.walkInside(what, v, off, false)
}

func (p *policy) walkInside(what string, v any, off int64, dunders bool) *Error {
	stack := []any{v}
	seen := map[any]bool{}
	for len(stack) > 0 {
		x := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if err := p.charge(1); err != nil {
			return err
		}
		var items []any
		switch y := x.(type) {
		case *tensorRec, *storageRef:
			return p.errf(ErrUnsupported, off, "%s holds a %s: converting would lose it (allowed objects are skipped)", what, pickle.TypeName(x))
		case pickle.Tuple:
			items = y
		case *pickle.List:
			if seen[y] {
				continue
			}
			seen[y] = true
			items = y.Items
		case *pickle.Dict:
			if seen[y] {
				continue
			}
			seen[y] = true
			if k, ok := dunderKey(y); ok && dunders {
				return p.errf(ErrNotAllowed, off, "%s: a dict in the arguments has the key %q (a constructor that sets its items as attributes gives the instance a %s that pickle or Python would call)", what, k, k)
			}
			items = append(slices.Clone(y.Keys), y.Values...)
		case *pickle.Set:
			if seen[y] {
				continue
			}
			seen[y] = true
			items = y.Items
		}
		stack = append(stack, items...)
	}
	return nil
}

func describeArg(v any) string {
	if s, ok := v.(string); ok {
		return fmt.Sprintf("%q", s)
	}
	return pickle.TypeName(v)
}

// intsOf converts a tuple or list of at most max ints to []int64. The length
// is checked first: a memo-shared sequence of a million items passed to many
// REDUCEs must not be converted (allocated) once per call.
func intsOf(v any, max int) ([]int64, bool) {
	var items []any
	switch x := v.(type) {
	case pickle.Tuple:
		items = x
	case *pickle.List:
		items = x.Items
	default:
		return nil, false
	}
	if len(items) > max {
		return nil, false
	}
	out := make([]int64, len(items))
	for i, it := range items {
		n, ok := it.(int64)
		if !ok {
			return nil, false
		}
		out[i] = n
	}
	return out, true
}

// boolOf accepts a bool only: torch's requires_grad setter refuses
// anything else ("requires_grad must be a bool"), the int 1 included.
// Protocol 0 and 1 write booleans as INT "01"/"00", which decode as bools.
func boolOf(v any) (bool, bool) {
	b, ok := v.(bool)
	return b, ok
}

// canRequireGrad reports whether torch lets a tensor of dtype d require
// gradients: only floating point and complex tensors can ("only Tensors of
// floating point and complex dtype can require gradients").
func canRequireGrad(d *dtypeInfo) bool { return d.dtype.IsFloat() || d.dtype.IsComplex() }

// emptyDict accepts an empty dict/OrderedDict (backward hooks) and, if
// allowNone, None.
func emptyDict(v any, allowNone bool) bool {
	if v == nil {
		return allowNone
	}
	d, ok := v.(*pickle.Dict)
	return ok && d.Len() == 0
}

// rebuildTensor validates _rebuild_tensor{,_v2,_v3} arguments:
//
//	_rebuild_tensor(storage, storage_offset, size, stride)
//	_rebuild_tensor_v2(storage, storage_offset, size, stride, requires_grad, backward_hooks[, metadata])
//	_rebuild_tensor_v3(storage, storage_offset, size, stride, requires_grad, backward_hooks, dtype[, metadata])
func (p *policy) rebuildTensor(g *global, args pickle.Tuple, off int64) (any, *Error) {
	bad := func(kind error, format string, a ...any) *Error {
		return p.errf(kind, off, "%s: %s", g, fmt.Sprintf(format, a...))
	}
	role := g.allow.role
	min, max := 4, 4
	switch role {
	case roleRebuildTensorV2:
		min, max = 6, 7
	case roleRebuildTensorV3:
		min, max = 7, 8
	}
	if len(args) < min || len(args) > max {
		return nil, bad(ErrCorrupt, "expected %d to %d arguments, got %d", min, max, len(args))
	}
	st, ok := args[0].(*storageRef)
	if !ok {
		return nil, bad(ErrCorrupt, "first argument is a %s, not a storage persistent id", pickle.Describe(args[0]))
	}
	offset, ok := args[1].(int64)
	if !ok {
		return nil, bad(ErrCorrupt, "storage offset is a %s, not an int", pickle.TypeName(args[1]))
	}
	size, ok := intsOf(args[2], p.lim.MaxDims)
	if !ok {
		return nil, bad(ErrCorrupt, "size is not a tuple of at most %d ints", p.lim.MaxDims)
	}
	stride, ok := intsOf(args[3], p.lim.MaxDims)
	if !ok {
		return nil, bad(ErrCorrupt, "stride is not a tuple of at most %d ints", p.lim.MaxDims)
	}
	rec := &tensorRec{storage: st, offset: offset, size: size, stride: stride, off: off}
	dt := &dtypeInfo{name: st.typ.name, dtype: st.typ.dtype, itemSize: st.typ.itemSize}
	if role != roleRebuildTensor {
		rg, ok := boolOf(args[4])
		if !ok {
			return nil, bad(ErrCorrupt, "requires_grad is a %s, not a bool", pickle.TypeName(args[4]))
		}
		rec.requiresGrad = rg
		if !emptyDict(args[5], true) {
			return nil, bad(ErrUnsupported, "backward hooks (%s) are not supported", pickle.Describe(args[5]))
		}
		meta := 6
		if role == roleRebuildTensorV3 {
			dg, ok := args[6].(*global)
			if !ok || dg.allow == nil || dg.allow.role != roleDType {
				return nil, bad(ErrCorrupt, "dtype argument is a %s, not a torch dtype", pickle.Describe(args[6]))
			}
			if !st.typ.untyped {
				return nil, bad(ErrCorrupt, "storage type %s is not torch.UntypedStorage", st.typ.name)
			}
			dt = dg.allow.dtype
			meta = 7
		}
		if len(args) > meta && !emptyDict(args[meta], true) {
			return nil, bad(ErrUnsupported, "tensor metadata (%s) is not supported", pickle.Describe(args[meta]))
		}
	}
	rec.dtype = dt
	if rec.requiresGrad && !canRequireGrad(dt) {
		return nil, bad(ErrCorrupt, "requires_grad is True on a %s tensor: torch refuses it (only floating point and complex tensors can require gradients)", dt.dtype)
	}
	if err := p.checkView(rec); err != "" {
		return nil, bad(ErrCorrupt, "%s", err)
	}
	if n := viewBytes(rec); n > p.lim.MaxTensorBytes {
		return nil, bad(ErrLimit, "tensor of %d bytes exceeds the %d-byte limit", n, p.lim.MaxTensorBytes)
	}
	rec.id = p.nextID()
	return rec, nil
}

// checkView verifies that the view lies inside its storage, with overflow
// checks; it returns "" or the problem.
func (p *policy) checkView(t *tensorRec) string {
	if len(t.size) != len(t.stride) {
		return fmt.Sprintf("size has %d dims but stride has %d", len(t.size), len(t.stride))
	}
	if len(t.size) > p.lim.MaxDims {
		return fmt.Sprintf("%d dims exceed the limit of %d", len(t.size), p.lim.MaxDims)
	}
	if t.offset < 0 {
		return fmt.Sprintf("negative storage offset %d", t.offset)
	}
	numel := int64(1)
	for i, s := range t.size {
		if s < 0 {
			return fmt.Sprintf("negative size %d in dim %d", s, i)
		}
		if t.stride[i] < 0 {
			return fmt.Sprintf("negative stride %d in dim %d", t.stride[i], i)
		}
	}
	for _, s := range t.size {
		var ok bool
		if numel, ok = mulCheck(numel, s); !ok {
			return fmt.Sprintf("size %v overflows", t.size)
		}
	}
	is := int64(t.dtype.itemSize)
	if _, ok := mulCheck(numel, is); !ok {
		return fmt.Sprintf("size %v overflows", t.size)
	}
	limit := t.storage.nbytes
	if numel == 0 {
		end, ok := mulCheck(t.offset, is)
		if !ok || end > limit {
			return fmt.Sprintf("empty view at offset %d lies past the end of storage %q (%d bytes)", t.offset, t.storage.key, limit)
		}
		return ""
	}
	last := t.offset
	for i, s := range t.size {
		d, ok := mulCheck(s-1, t.stride[i])
		if !ok {
			return fmt.Sprintf("view size %v stride %v overflows", t.size, t.stride)
		}
		if last, ok = addCheck(last, d); !ok {
			return fmt.Sprintf("view size %v stride %v overflows", t.size, t.stride)
		}
	}
	end, ok := addCheck(last, 1)
	if ok {
		end, ok = mulCheck(end, is)
	}
	if !ok || end > limit {
		return fmt.Sprintf("view (offset %d, size %v, stride %v) does not fit in storage %q of %d elements", t.offset, t.size, t.stride, t.storage.key, t.storage.numel)
	}
	return ""
}

// emptyState accepts the state torch's _set_obj_state treats as a no-op that
// a state of this shape can be: None, an empty dict, or a (dict, slots) pair
// of those.
func emptyState(v any) bool {
	if t, ok := v.(pickle.Tuple); ok {
		return len(t) == 2 && emptyDict(t[0], true) && emptyDict(t[1], true)
	}
	return emptyDict(v, true)
}

// rebuildParameter validates _rebuild_parameter(data, requires_grad,
// backward_hooks) and _rebuild_parameter_with_state(..., state).
func (p *policy) rebuildParameter(g *global, args pickle.Tuple, off int64) (any, *Error) {
	bad := func(kind error, format string, a ...any) *Error {
		return p.errf(kind, off, "%s: %s", g, fmt.Sprintf(format, a...))
	}
	want := 3
	if g.allow.role == roleRebuildParamState {
		want = 4
	}
	if len(args) != want {
		return nil, bad(ErrCorrupt, "expected %d arguments, got %d", want, len(args))
	}
	data, ok := args[0].(*tensorRec)
	if !ok {
		return nil, bad(ErrCorrupt, "data is a %s, not a rebuilt tensor", pickle.Describe(args[0]))
	}
	rg, ok := boolOf(args[1])
	if !ok {
		return nil, bad(ErrCorrupt, "requires_grad is a %s, not a bool", pickle.TypeName(args[1]))
	}
	if !emptyDict(args[2], true) {
		return nil, bad(ErrUnsupported, "backward hooks (%s) are not supported", pickle.Describe(args[2]))
	}
	// torch's _set_obj_state does setattr(param, k, v) for every item of
	// the state (a dict, or a (dict, slots) pair): {"data": other_tensor}
	// swaps the parameter's contents, {"real": 0.0} overwrites them. Only an
	// empty state is accepted, so the data argument is what torch returns.
	if want == 4 && !emptyState(args[3]) {
		return nil, bad(ErrUnsupported, "non-empty parameter state (%s) is not supported: torch would setattr its items on the parameter", pickle.Describe(args[3]))
	}
	if rg && !canRequireGrad(data.dtype) {
		return nil, bad(ErrCorrupt, "requires_grad is True on a %s parameter: torch refuses it (only floating point and complex tensors can require gradients)", data.dtype.dtype)
	}
	param := *data
	param.isParameter = true
	param.requiresGrad = rg
	param.off = off
	param.id = p.nextID()
	return &param, nil
}

// PersistentLoad validates a BINPERSID tuple: only torch's
// ('storage', <storage class>, key, location, numel[, view_metadata]).
//
// In scan mode, ids that torch's persistent_load answers with a part of the
// id itself yield that part (see pidValue), so that a STACK_GLOBAL fed by
// them is named.
func (p *policy) PersistentLoad(pid any, off int64) (any, error) {
	if p.scan != nil {
		if v, ok := p.pidValue(pid); ok {
			return v, nil
		}
	}
	v, err := p.storagePID(pid, off)
	if err != nil {
		if p.scan != nil {
			p.scan.problem(p.entry, off, err.Msg)
			return &pickle.Opaque{What: "persistent id", Offset: off}, nil
		}
		return nil, err
	}
	return v, nil
}

// pidValue is what torch's persistent_load returns for an id that is not a
// storage, where that is part of the id: the legacy loader returns data[0]
// of a ('module', data...) id (a whole-module save's class), the tar
// loader's "pickle" member saved_id[0] of any tuple, and for anything else
// the tensor its tensors member stored under that key (tarTensor: not a
// str). ok is false where torch reads the id as a storage (or refuses it).
func (p *policy) pidValue(pid any) (any, bool) {
	t, isTuple := pid.(pickle.Tuple)
	switch p.pids {
	case pidTar:
		if isTuple && len(t) > 0 {
			return t[0], true
		}
		return tarTensor{}, true
	case pidLegacy:
		if isTuple && len(t) >= 2 && pidTag(t[0]) == "module" {
			return t[1], true
		}
	}
	return nil, false
}

// tarTensor stands for what a tar checkpoint's persistent id names: a
// tensor (or storage) read from its tensors (storages) member.
type tarTensor struct{}

func (tarTensor) TypeName() string { return "tensor of the tar checkpoint" }
func (tarTensor) Describe() string { return "tensor of the tar checkpoint" }

// pidTag is a persistent id's type name as torch decodes it
// (_maybe_decode_ascii: bytes are ASCII-decoded).
func pidTag(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case []byte:
		return string(x)
	}
	return ""
}

func (p *policy) storagePID(pid any, off int64) (*storageRef, *Error) {
	if p.pids == pidNone {
		return nil, p.errf(ErrCorrupt, off, "persistent id (BINPERSID) in a pickle that cannot contain one")
	}
	t, ok := pid.(pickle.Tuple)
	if !ok || len(t) == 0 {
		return nil, p.errf(ErrCorrupt, off, "persistent id is a %s, not a ('storage', ...) tuple", pickle.Describe(pid))
	}
	if tag := pidTag(t[0]); tag != "storage" {
		return nil, p.errf(ErrCorrupt, off, "persistent id tag %s; only 'storage' is allowed", describeArg(t[0]))
	}
	want := 5
	if p.pids == pidLegacy {
		want = 6
	}
	if len(t) != want {
		return nil, p.errf(ErrCorrupt, off, "storage persistent id has %d fields, want %d", len(t), want)
	}
	g, ok := t[1].(*global)
	if !ok || g.allow == nil || g.allow.role != roleStorageType {
		return nil, p.errf(ErrCorrupt, off, "storage type is a %s, not a torch storage class", pickle.Describe(t[1]))
	}
	key, ok := t[2].(string)
	if !ok {
		return nil, p.errf(ErrCorrupt, off, "storage key is a %s, not a str", pickle.TypeName(t[2]))
	}
	loc, ok := t[3].(string)
	if !ok {
		return nil, p.errf(ErrCorrupt, off, "storage location is a %s, not a str", pickle.TypeName(t[3]))
	}
	numel, ok := t[4].(int64)
	if !ok || numel < 0 {
		return nil, p.errf(ErrCorrupt, off, "storage %q numel is %s", key, describeNum(t[4]))
	}
	if want == 6 && t[5] != nil {
		return nil, p.errf(ErrUnsupported, off, "storage %q has view metadata (pre-1.0 legacy storage views are not supported)", key)
	}
	st := g.allow.storage
	nbytes, ok := mulCheck(numel, int64(st.itemSize))
	if !ok {
		return nil, p.errf(ErrCorrupt, off, "storage %q numel %d overflows", key, numel)
	}
	if p.storages == nil {
		p.storages = make(map[string]*storageRef)
	}
	if prev, ok := p.storages[key]; ok {
		if prev.typ != st {
			return nil, p.errf(ErrCorrupt, off, "storage %q used as both %s and %s", key, prev.typ.name, st.name)
		}
		if prev.numel != numel {
			return nil, p.errf(ErrCorrupt, off, "storage %q declared with numel %d and %d", key, prev.numel, numel)
		}
		return prev, nil
	}
	ref := &storageRef{key: key, typ: st, location: loc, numel: numel, off: off, nbytes: nbytes}
	p.storages[key] = ref
	return ref, nil
}

func describeNum(v any) string {
	switch x := v.(type) {
	case int64:
		return fmt.Sprint(x)
	case *big.Int:
		return x.String()
	}
	return "a " + pickle.TypeName(v)
}

// build handles BUILD: only OrderedDict instances with a dict state (the
// _metadata attribute of state_dict()).
// orderedDictMethods are the names a BUILD state may not put into an
// OrderedDict's __dict__.
var orderedDictMethods = map[string]bool{"keys": true, "values": true, "items": true, "get": true, "pop": true,
	"popitem": true, "setdefault": true, "update": true, "copy": true, "clear": true, "move_to_end": true,
	"fromkeys": true, "append": true, "extend": true}

func (p *policy) Build(inst, state any, off int64) error {
	d, ok := inst.(*pickle.Dict)
	st, ok2 := state.(*pickle.Dict)
	if ok && d.Type == "OrderedDict" && ok2 {
		// The state goes into the instance's __dict__, where a name
		// CPython looks up later (__setstate__ on the next BUILD, keys
		// when the dict is copied, ...) would be called: torch's
		// _metadata needs none of them, and only one BUILD.
		bad := ""
		if d.State != nil {
			bad = "a second BUILD on one OrderedDict (CPython would call a __setstate__ the first one stored)"
		}
		for _, k := range st.Keys {
			if s, isStr := k.(string); bad == "" && (!isStr || strings.HasPrefix(s, "__") || orderedDictMethods[s]) {
				bad = fmt.Sprintf("BUILD state key %s would shadow an OrderedDict attribute CPython may call", pickle.Describe(k))
			}
		}
		if bad != "" {
			if p.scan != nil {
				p.scan.opcode(pickle.OpBuild, off, "OrderedDict state that shadows a method")
				return nil
			}
			return p.errf(ErrNotAllowed, off, "%s", bad)
		}
		d.State = st
		return nil
	}
	if u, isUser := inst.(*userObject); isUser {
		// the caller allowed the class: its state is data (CPython calls
		// the class's __setstate__ with it, or updates the instance's
		// __dict__ with a dict and setattrs a (dict, slots) pair's second)
		// unless it names behaviour
		err := p.userState(u, state, off)
		if err == nil {
			err = p.noTensorInside("the state of a "+u.cls+" object", state, off)
		}
		if err != nil {
			if p.scan != nil {
				p.scanRefusal(pickle.OpBuild, off, err)
				return nil
			}
			return err
		}
		return nil
	}
	if p.scan != nil {
		p.scan.opcode(pickle.OpBuild, off, pickle.Describe(inst))
		return nil
	}
	if !ok || d.Type != "OrderedDict" {
		return p.errf(ErrNotAllowed, off, "BUILD on a %s (only an OrderedDict may receive state)", pickle.Describe(inst))
	}
	return p.errf(ErrNotAllowed, off, "BUILD with a %s state (only a dict is allowed)", pickle.Describe(state))
}

// userState refuses a BUILD state that gives an allowed object an attribute
// with a dunder name. CPython's load_build looks __setstate__ up on the
// instance (getattr: an instance attribute wins over the class's method),
// so a state that stores one makes the next BUILD call it with the next
// state (bytearray(10**12), or any allowed callable); __class__ and
// __dict__ set through the slot state swap the object's type or attributes;
// __reduce_ex__, __deepcopy__ and the like are called by whoever copies or
// pickles the loaded object. The arguments the object was made from are
// checked again: a constructor may have kept them, and they may have been
// changed since (through the memo).
func (p *policy) userState(u *userObject, state any, off int64) *Error {
	forms := []any{state}
	if t, ok := state.(pickle.Tuple); ok && len(t) == 2 {
		forms = []any{t[0], t[1]}
	}
	for i, f := range forms {
		if k, ok := dunderKey(f); ok {
			how := "puts %q into its __dict__"
			if i == 1 {
				how = "setattrs %q on it"
			}
			return p.errf(ErrNotAllowed, off, "%s object: the state "+how+" (pickle and Python look dunder names up as behaviour: the next BUILD calls a __setstate__ there)", u.cls, k)
		}
	}
	return p.inertInside(u.cls+" object", u.args, off)
}

func mulCheck(a, b int64) (int64, bool) {
	if a == 0 || b == 0 {
		return 0, true
	}
	if a < 0 || b < 0 {
		return 0, false
	}
	if a > math.MaxInt64/b {
		return 0, false
	}
	return a * b, true
}

func addCheck(a, b int64) (int64, bool) {
	if a < 0 || b < 0 || a > math.MaxInt64-b {
		return 0, false
	}
	return a + b, true
}

// viewBytes is the contiguous size of a validated view.
func viewBytes(t *tensorRec) int64 {
	n := int64(t.dtype.itemSize)
	for _, s := range t.size {
		n *= s
	}
	return n
}
