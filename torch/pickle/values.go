package pickle

import (
	"fmt"
	"math"
	"math/big"
	"strconv"
)

// Decoded values. Primitive values use Go types directly: nil (None),
// bool, int64, *big.Int (only when an int does not fit in int64), float64,
// string (str) and []byte (bytes). Containers use the types below. What a
// Policy returns (a class, a rebuilt object) is whatever it chooses. None
// of them has behaviour: they are plain data.

// Tuple is an immutable Python tuple.
type Tuple []any

// List is a Python list; a pointer, so that memo references see APPENDs.
type List struct{ Items []any }

// Dict is a Python dict, in insertion order. SETITEM(S) onto a Dict a
// Policy built (a dict subclass such as collections.OrderedDict, which
// torch's state dicts are) fills it as CPython's does.
type Dict struct {
	Keys, Values []any
	// Type is the Python type for messages: "" for a dict the pickle
	// built, what the Policy set for one it built ("OrderedDict").
	Type string
	// State is what a Policy's Build stored (an OrderedDict's __dict__).
	State any

	index map[dictKey]int
}

// Len returns the number of items.
func (d *Dict) Len() int { return len(d.Keys) }

// Set stores key k with value v, keeping the first insertion position
// like Python. Keys are compared as Python compares them (True, 1 and 1.0
// are one key); false means the key is of a type the machine does not
// hash (bytes, containers, objects).
func (d *Dict) Set(k, v any) bool {
	hk, ok := makeDictKey(k)
	if !ok {
		return false
	}
	if d.index == nil {
		d.index = make(map[dictKey]int)
	}
	if i, dup := d.index[hk]; dup {
		d.Values[i] = v
		return true
	}
	d.index[hk] = len(d.Keys)
	d.Keys = append(d.Keys, k)
	d.Values = append(d.Values, v)
	return true
}

// Set is a Python set or frozenset (EMPTY_SET, ADDITEMS, FROZENSET), its
// items in the order the pickle gave them. Nothing deduplicates them: the
// machine never hashes set items (an inert set is only ever skipped).
type Set struct {
	Items  []any
	Frozen bool
}

// ByteArray is a Python bytearray (BYTEARRAY8), as distinct from bytes.
type ByteArray []byte

// Opaque stands for a value the machine did not compute: the result of a
// call it refused, in audit mode, where it goes on so that the audit sees
// the rest of the pickle. At load time it may be anything, a str included.
type Opaque struct {
	What   string // what it is the result of, for messages ("posix.system(...)")
	Offset int64  // of the opcode that made it
}

// Describer is implemented by values a Policy returns, so that messages
// name them.
type Describer interface {
	TypeName() string // Python-ish type: "tensor", "global posix.system"
	Describe() string // the value itself where it has a name: "posix.system"
}

// dictKey is the hashable form of a dict key. Python treats True, 1 and 1.0
// as the same key; so does this. bytes keys are not supported (torch never
// writes them, and hashing them would copy attacker-sized data per SETITEM).
type dictKey struct {
	kind byte // 'n' None, 'i' int, 'f' float, 's' str, 'L' big int, 't' tuple
	i    int64
	s    string
}

// Tuple keys: at most maxKeyItems items in all, at most maxKeyDepth
// tuples deep (torch's own checkpoints never use them; training code puts
// small tuples in non-tensor values). Hashing one costs its items, which
// setItems charges.
const (
	maxKeyItems = 64
	maxKeyDepth = 4
)

func makeDictKey(v any) (dictKey, bool) {
	if t, ok := v.(Tuple); ok {
		b, n, ok := appendTupleKey(nil, t, 0, 0)
		if !ok || n > maxKeyItems {
			return dictKey{}, false
		}
		return dictKey{kind: 't', s: string(b)}, true
	}
	return scalarKey(v)
}

// appendTupleKey appends an unambiguous encoding of the tuple t (each
// item's kind, then its value, length-prefixed) and returns how many items
// it holds in all.
func appendTupleKey(b []byte, t Tuple, depth, n int) ([]byte, int, bool) {
	if depth >= maxKeyDepth {
		return nil, 0, false
	}
	b = append(b, '(')
	b = strconv.AppendInt(b, int64(len(t)), 10)
	for _, x := range t {
		if n++; n > maxKeyItems {
			return nil, 0, false
		}
		if sub, ok := x.(Tuple); ok {
			var ok2 bool
			if b, n, ok2 = appendTupleKey(b, sub, depth+1, n); !ok2 {
				return nil, 0, false
			}
			continue
		}
		k, ok := scalarKey(x)
		if !ok {
			return nil, 0, false
		}
		b = append(b, k.kind)
		b = strconv.AppendInt(b, k.i, 10)
		b = append(b, ':')
		b = strconv.AppendInt(b, int64(len(k.s)), 10)
		b = append(b, ':')
		b = append(b, k.s...)
	}
	return append(b, ')'), n, true
}

// keyCost is the work hashing the dict key v costs, for the machine's
// budget.
func keyCost(v any) int {
	t, ok := v.(Tuple)
	if !ok {
		return 0
	}
	n := len(t)
	for _, x := range t {
		if sub, ok := x.(Tuple); ok && n < maxKeyItems {
			n += keyCost(sub)
		}
	}
	return min(n, maxKeyItems+1)
}

func scalarKey(v any) (dictKey, bool) {
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

// TypeName is the Python-ish name of a decoded value's type, for messages.
func TypeName(v any) string {
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
	case Tuple:
		return "tuple"
	case *List:
		return "list"
	case *Dict:
		if x.Type != "" {
			return x.Type
		}
		return "dict"
	case *Set:
		if x.Frozen {
			return "frozenset"
		}
		return "set"
	case ByteArray:
		return "bytearray"
	case *Opaque:
		return x.What
	case Describer:
		return x.TypeName()
	}
	return fmt.Sprintf("%T", v)
}

// Describe names a value for messages: the name of an opaque result or a
// global, else its type.
func Describe(v any) string {
	switch x := v.(type) {
	case *Opaque:
		return x.What
	case Describer:
		return x.Describe()
	}
	return TypeName(v)
}

// mayBeStr reports whether v may be a str when CPython unpickles: a str,
// or the stand-in for a value the machine did not compute.
func mayBeStr(v any) bool {
	switch v.(type) {
	case string, *Opaque:
		return true
	}
	return false
}
