package torch

import (
	"github.com/gosafetensors/safetensors/torch/pickle"
	"math/big"
	"strconv"
)

// maxEntryName caps one entry name; names are built by concatenation, so a
// deep chain of long (memo-shared) keys would otherwise cost quadratic time.
const maxEntryName = 64 << 10

// build flattens the decoded root into Entries (iteratively: no recursion,
// depth and size capped, cycles refused) and turns tensor records into
// Tensors over the resolved storages.
func (c *Checkpoint) build(root any, stores map[*storageRef]*Storage, entry string, lim *Limits) error {
	type frame struct {
		c     any // pickle.Tuple, *pickle.List or *pickle.Dict
		i     int
		name  string
		depth int
	}
	var stack []frame
	onPath := make(map[any]bool)
	names := make(map[string]bool)
	firstName := make(map[int]string) // tensor object id -> first entry name
	var nameBytes int64

	fail := func(kind error, off int64, format string, args ...any) error {
		return newError(kind, entry, off, format, args...)
	}
	visit := func(name string, v any, depth int) error {
		if len(c.Entries) >= lim.MaxEntries {
			return fail(ErrLimit, -1, "more than %d entries in the checkpoint object", lim.MaxEntries)
		}
		switch x := v.(type) {
		case pickle.Tuple, *pickle.List, *pickle.Dict:
			n := 0
			switch y := x.(type) {
			case pickle.Tuple:
				n = len(y)
			case *pickle.List:
				n = len(y.Items)
			case *pickle.Dict:
				n = len(y.Keys)
			}
			if n > 0 {
				if depth >= lim.MaxDepth {
					return fail(ErrLimit, -1, "entry %q: containers nested deeper than %d", name, lim.MaxDepth)
				}
				if _, isTuple := x.(pickle.Tuple); !isTuple {
					if onPath[x] {
						return fail(ErrUnsupported, -1, "entry %q: the object contains itself (cyclic structure)", name)
					}
					onPath[x] = true
				}
				stack = append(stack, frame{c: x, name: name, depth: depth + 1})
				return nil
			}
			if name == "" && depth == 0 {
				return nil // an empty root has no leaves
			}
			kind := "tuple"
			if _, ok := x.(*pickle.List); ok {
				kind = "list"
			} else if _, ok := x.(*pickle.Dict); ok {
				kind = "dict"
			}
			return c.leaf(names, Entry{Name: name, Kind: kind}, entry)
		case *tensorRec:
			s := stores[x.storage]
			if s == nil {
				return fail(ErrCorrupt, x.off, "entry %q: storage %q was not resolved", name, x.storage.key)
			}
			t := &Tensor{
				Name: name, DType: x.dtype.dtype, Shape: x.size, Stride: x.stride, Offset: x.offset,
				Storage: s, RequiresGrad: x.requiresGrad, IsParameter: x.isParameter,
				itemSize: x.dtype.itemSize, maxBuffer: lim.MaxViewBuffer,
			}
			e := Entry{Name: name, Tensor: t, Kind: "tensor"}
			if first, ok := firstName[x.id]; ok {
				e.SameAs = first
			} else {
				firstName[x.id] = name
			}
			if err := c.leaf(names, e, entry); err != nil {
				return err
			}
			c.tensors = append(c.tensors, t)
			return nil
		case *storageRef:
			return fail(ErrUnsupported, x.off, "entry %q is a bare storage (%s %q), not a tensor", name, x.typ.name, x.key)
		case *global:
			if x.allow == nil { // only in scan mode, which does not build
				return &Error{Kind: ErrNotAllowed, Entry: entry, Offset: x.off, Global: x.String(),
					Msg: "entry " + strconv.Quote(name) + " is the global " + x.String() + ", which is not allowed"}
			}
			// an allowed class or function as a value: inert (a dtype saved
			// beside the weights, a tensor class, an allowed class)
			kind := "global"
			if x.allow.role == roleDType {
				kind = "dtype"
			}
			return c.leaf(names, Entry{Name: name, Kind: kind, Value: x.String()}, entry)
		case *pickle.Set:
			for _, it := range x.Items {
				if _, isT := it.(*tensorRec); isT {
					return fail(ErrUnsupported, -1, "entry %q is a set holding tensors (a set has no names to give them)", name)
				}
			}
			kind := "set"
			if x.Frozen {
				kind = "frozenset"
			}
			return c.leaf(names, Entry{Name: name, Kind: kind}, entry)
		case pickle.ByteArray:
			return c.leaf(names, Entry{Name: name, Kind: "bytearray", Value: []byte(x)}, entry)
		case complex128:
			return c.leaf(names, Entry{Name: name, Kind: "complex", Value: x}, entry)
		case device:
			return c.leaf(names, Entry{Name: name, Kind: "device", Value: string(x)}, entry)
		case *userObject:
			return c.leaf(names, Entry{Name: name, Kind: "object", Value: x.cls}, entry)
		case *pickle.Opaque:
			return fail(ErrNotAllowed, x.Offset, "entry %q is %s", name, x.What)
		}
		e := Entry{Name: name, Value: v}
		switch v.(type) {
		case nil:
			e.Kind = "none"
		case bool:
			e.Kind = "bool"
		case int64, *big.Int:
			e.Kind = "int"
		case float64:
			e.Kind = "float"
		case string:
			e.Kind = "str"
		case []byte:
			e.Kind = "bytes"
		default:
			return fail(ErrCorrupt, -1, "entry %q has an unexpected value %T", name, v)
		}
		return c.leaf(names, e, entry)
	}

	c.Root = typeName(root)
	if err := visit("", root, 0); err != nil {
		return err
	}
	for len(stack) > 0 {
		f := &stack[len(stack)-1]
		var child any
		var key string
		done := false
		switch x := f.c.(type) {
		case pickle.Tuple:
			if f.i >= len(x) {
				done = true
			} else {
				child, key = x[f.i], strconv.Itoa(f.i)
			}
		case *pickle.List:
			if f.i >= len(x.Items) {
				done = true
			} else {
				child, key = x.Items[f.i], strconv.Itoa(f.i)
			}
		case *pickle.Dict:
			if f.i >= len(x.Keys) {
				done = true
			} else {
				child, key = x.Values[f.i], keyString(x.Keys[f.i])
			}
		}
		if done {
			if _, isTuple := f.c.(pickle.Tuple); !isTuple {
				delete(onPath, f.c)
			}
			stack = stack[:len(stack)-1]
			continue
		}
		f.i++
		n := int64(len(key))
		if f.name != "" {
			n += int64(len(f.name)) + 1
		}
		if n > maxEntryName {
			return newError(ErrLimit, entry, -1, "entry name longer than %d bytes (under %q)", maxEntryName, truncate([]byte(f.name)))
		}
		if nameBytes += n; nameBytes > lim.MaxNameBytes {
			return newError(ErrLimit, entry, -1, "entry names total more than %d bytes", lim.MaxNameBytes)
		}
		name := key
		if f.name != "" {
			name = f.name + "." + key
		}
		if err := visit(name, child, f.depth); err != nil {
			return err
		}
	}
	return nil
}

func (c *Checkpoint) leaf(names map[string]bool, e Entry, entry string) error {
	if names[e.Name] {
		return newError(ErrUnsupported, entry, -1, "two entries flatten to the same name %q", e.Name)
	}
	names[e.Name] = true
	c.Entries = append(c.Entries, e)
	return nil
}
