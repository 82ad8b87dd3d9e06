package torch

import (
	"github.com/gosafetensors/safetensors/torch/pickle"
	"math/big"
	"strconv"
)

// The values torch's policy gives the pickle machine: globals (never
// resolved), storage persistent ids and tensor records. Everything else
// the machine decodes is one of package pickle's values.

// global is the name pushed by GLOBAL/STACK_GLOBAL; it is never resolved.
type global struct {
	module, name string
	off          int64
	allow        *allowEntry // nil only in scan mode for names not on the allowlist
}

func (g *global) String() string { return globalName(g.module, g.name) }

// TypeName and Describe name the global in the machine's messages.
func (g *global) TypeName() string { return "global " + g.String() }
func (g *global) Describe() string { return g.String() }

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

func (s *storageRef) TypeName() string { return "storage" }
func (s *storageRef) Describe() string { return "storage" }
func (t *tensorRec) TypeName() string  { return "tensor" }
func (t *tensorRec) Describe() string  { return "tensor" }

// typeName is the Python-ish name of a decoded value, for messages.
func typeName(v any) string { return pickle.TypeName(v) }

// keyString renders a dict key as a path component of an entry name: a
// tuple key as its items, "(enc, 0)".
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
	case pickle.Tuple:
		// a tuple key (bounded: the machine hashes at most 64 items)
		b := []byte{'('}
		for i, it := range x {
			if i > 0 {
				b = append(b, ", "...)
			}
			b = append(b, keyString(it)...)
		}
		return string(append(b, ')'))
	}
	return pickle.TypeName(v)
}
