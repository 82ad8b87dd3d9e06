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
