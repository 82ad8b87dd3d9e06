package torch

import (
	"fmt"
	"math"
	"math/big"
	"strconv"
)

// Decoded pickle values. Primitive values use Go types directly: nil (None),
// bool, int64, *big.Int (only when an int does not fit in int64), float64,
// string and []byte. Containers and records use the types below. None of
// them has behaviour: they are plain data.

// tuple is an immutable Python tuple.
type tuple []any

// list is a Python list; a pointer so memo references see APPENDs.
type list struct{ items []any }

// dict is a Python dict or collections.OrderedDict, in insertion order.
type dict struct {
	keys, vals []any
	index      map[dictKey]int
	ordered    bool  // built by collections.OrderedDict
	state      *dict // BUILD state (the _metadata of state_dict()), ignored
}

// global is the name pushed by GLOBAL/STACK_GLOBAL; it is never resolved.
type global struct {
	module, name string
	off          int64
	allow        *allowEntry // nil only in scan mode for names not on the allowlist
}

func (g *global) String() string { return globalName(g.module, g.name) }

// opaque stands for the result of a construct that strict decoding refuses;
// it only exists in scan mode, so that the audit can continue.
type opaque struct {
	what string
	off  int64
}

// storageRef is a validated ('storage', type, key, location, numel) persistent id.
type storageRef struct {
	key      string
	typ      *storageType
	location string
	numel    int64
	off      int64 // offset of the BINPERSID
	nbytes   int64
}

// tensorRec is a validated _rebuild_tensor* (or _rebuild_parameter*) call.
type tensorRec struct {
	storage      *storageRef
	dtype        *dtypeInfo
	offset       int64
	size, stride []int64
	requiresGrad bool
	isParameter  bool
	off          int64 // offset of the REDUCE that built it
	id           int   // object identity, shared by memo references
}

// dictKey is the hashable form of a dict key. Python treats True, 1 and 1.0
// as the same key; so does this. bytes keys are not supported (torch never
// writes them, and hashing them would copy attacker-sized data per SETITEM).
type dictKey struct {
	kind byte // 'n' None, 'i' int, 'f' float, 's' str, 'L' big int
	i    int64
	s    string
}

func makeDictKey(v any) (dictKey, bool) {
	switch x := v.(type) {
	case nil:
		return dictKey{kind: 'n'}, true
	case bool:
		if x {
			return dictKey{kind: 'i', i: 1}, true
		}
		return dictKey{kind: 'i'}, true
	case int64:
		return dictKey{kind: 'i', i: x}, true
	case float64:
		if x == math.Trunc(x) && x >= -(1<<63) && x < 1<<63 {
			return dictKey{kind: 'i', i: int64(x)}, true
		}
		if x != x { // NaN keys never compare equal; give each a distinct key
			return dictKey{}, false
		}
		if x == math.Trunc(x) && !math.IsInf(x, 0) {
			// 2.0**70 == 2**70 in Python: same key as the big int
			b, _ := big.NewFloat(x).Int(nil)
			return dictKey{kind: 'L', s: b.String()}, true
		}
		return dictKey{kind: 'f', s: strconv.FormatFloat(x, 'g', -1, 64)}, true
	case string:
		return dictKey{kind: 's', s: x}, true
	case *big.Int:
		return dictKey{kind: 'L', s: x.String()}, true
	}
	return dictKey{}, false
}

// set stores key/value, keeping the first insertion position like Python.
func (d *dict) set(k, v any) bool {
	hk, ok := makeDictKey(k)
	if !ok {
		return false
	}
	if d.index == nil {
		d.index = make(map[dictKey]int)
	}
	if i, dup := d.index[hk]; dup {
		d.vals[i] = v
		return true
	}
	d.index[hk] = len(d.keys)
	d.keys = append(d.keys, k)
	d.vals = append(d.vals, v)
	return true
}

// typeName is the Python-ish name of a decoded value, for messages.
func typeName(v any) string {
	switch x := v.(type) {
	case nil:
		return "None"
	case bool:
		return "bool"
	case int64, *big.Int:
		return "int"
	case float64:
		return "float"
	case string:
		return "str"
	case []byte:
		return "bytes"
	case tuple:
		return "tuple"
	case *list:
		return "list"
	case *dict:
		if x.ordered {
			return "OrderedDict"
		}
		return "dict"
	case *global:
		return "global " + x.String()
	case *storageRef:
		return "storage"
	case *tensorRec:
		return "tensor"
	case *opaque:
		return x.what
	}
	return fmt.Sprintf("%T", v)
}

// keyString renders a dict key as a path component of an entry name.
func keyString(v any) string {
	switch x := v.(type) {
	case nil:
		return "None"
	case bool:
		if x {
			return "True"
		}
		return "False"
	case int64:
		return strconv.FormatInt(x, 10)
	case float64:
		return strconv.FormatFloat(x, 'g', -1, 64)
	case string:
		return x
	case []byte:
		return string(x)
	case *big.Int:
		return x.String()
	}
	return typeName(v)
}
