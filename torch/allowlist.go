package torch

import (
	"strings"

	"github.com/gosafetensors/safetensors"
)

// role says what an allowlisted global may be used for.
type role int

const (
	roleRebuildTensor     role = iota + 1 // torch._utils._rebuild_tensor
	roleRebuildTensorV2                   // torch._utils._rebuild_tensor_v2
	roleRebuildTensorV3                   // torch._utils._rebuild_tensor_v3
	roleRebuildParam                      // torch._utils._rebuild_parameter
	roleRebuildParamState                 // torch._utils._rebuild_parameter_with_state
	roleOrderedDict                       // collections.OrderedDict
	roleCodecsEncode                      // _codecs.encode
	roleTorchSize                         // torch.Size
	roleSet                               // builtins.set, builtins.frozenset: a set of what REDUCE gives
	roleByteArray                         // builtins.bytearray
	roleComplex                           // builtins.complex
	roleCounter                           // collections.Counter: a dict
	roleDevice                            // torch.device
	roleStorageType                       // torch.*Storage, only inside a persistent id (or as a value)
	roleDType                             // torch.<dtype>, only as _rebuild_tensor_v3's dtype (or as a value)
	roleValue                             // a class only ever used as a value (torch.Tensor, torch.FloatTensor...)
	roleUser                              // allowed by the caller (WithAllow): its calls build inert objects
)

// Roles below roleStorageType are callables whose REDUCE the policy models;
// roleStorageType and above are never called.

// storageType describes a torch storage class.
type storageType struct {
	name     string            // "torch.FloatStorage"
	dtype    safetensors.DType // dtype of the elements
	itemSize int
	untyped  bool // torch.UntypedStorage: numel counts bytes
}

// dtypeInfo describes a torch dtype global.
type dtypeInfo struct {
	name     string // "torch.float8_e4m3fn"
	dtype    safetensors.DType
	itemSize int
}

// allowEntry is one allowlisted global.
type allowEntry struct {
	role    role
	storage *storageType
	dtype   *dtypeInfo
}

var allowlist = map[string]*allowEntry{
	"torch._utils._rebuild_tensor":               {role: roleRebuildTensor},
	"torch._utils._rebuild_tensor_v2":            {role: roleRebuildTensorV2},
	"torch._utils._rebuild_tensor_v3":            {role: roleRebuildTensorV3},
	"torch._utils._rebuild_parameter":            {role: roleRebuildParam},
	"torch._utils._rebuild_parameter_with_state": {role: roleRebuildParamState},
	"collections.OrderedDict":                    {role: roleOrderedDict},
	"_codecs.encode":                             {role: roleCodecsEncode},
	"torch.Size":                                 {role: roleTorchSize},

	// Inert data classes torch's own weights_only unpickler allows (torch
	// 2.x, _weights_only_unpickler._get_allowed_globals), protocol 2's
	// __builtin__ spelling included (pickle maps it to builtins); frozenset
	// besides, as inert as set (protocol 4 writes it with no global).
	"builtins.set":          {role: roleSet},
	"__builtin__.set":       {role: roleSet},
	"builtins.frozenset":    {role: roleSet},
	"__builtin__.frozenset": {role: roleSet},
	"builtins.bytearray":    {role: roleByteArray},
	"__builtin__.bytearray": {role: roleByteArray},
	"builtins.complex":      {role: roleComplex},
	"__builtin__.complex":   {role: roleComplex},
	"collections.Counter":   {role: roleCounter},
	"torch.device":          {role: roleDevice},
	"torch.Tensor":          {role: roleValue},
}

func init() {
	for _, s := range []storageType{
		{name: "torch.FloatStorage", dtype: safetensors.F32, itemSize: 4},
		{name: "torch.HalfStorage", dtype: safetensors.F16, itemSize: 2},
		{name: "torch.BFloat16Storage", dtype: safetensors.BF16, itemSize: 2},
		{name: "torch.DoubleStorage", dtype: safetensors.F64, itemSize: 8},
		{name: "torch.CharStorage", dtype: safetensors.I8, itemSize: 1},
		{name: "torch.ByteStorage", dtype: safetensors.U8, itemSize: 1},
		{name: "torch.ShortStorage", dtype: safetensors.I16, itemSize: 2},
		{name: "torch.IntStorage", dtype: safetensors.I32, itemSize: 4},
		{name: "torch.LongStorage", dtype: safetensors.I64, itemSize: 8},
		{name: "torch.BoolStorage", dtype: safetensors.BOOL, itemSize: 1},
		{name: "torch.ComplexFloatStorage", dtype: safetensors.C64, itemSize: 8},
		{name: "torch.UntypedStorage", dtype: safetensors.U8, itemSize: 1, untyped: true},
	} {
		s := s
		allowlist[s.name] = &allowEntry{role: roleStorageType, storage: &s}
	}
	for _, d := range []dtypeInfo{
		{name: "torch.float32", dtype: safetensors.F32, itemSize: 4},
		{name: "torch.float16", dtype: safetensors.F16, itemSize: 2},
		{name: "torch.bfloat16", dtype: safetensors.BF16, itemSize: 2},
		{name: "torch.float64", dtype: safetensors.F64, itemSize: 8},
		{name: "torch.int8", dtype: safetensors.I8, itemSize: 1},
		{name: "torch.uint8", dtype: safetensors.U8, itemSize: 1},
		{name: "torch.int16", dtype: safetensors.I16, itemSize: 2},
		{name: "torch.int32", dtype: safetensors.I32, itemSize: 4},
		{name: "torch.int64", dtype: safetensors.I64, itemSize: 8},
		{name: "torch.bool", dtype: safetensors.BOOL, itemSize: 1},
		{name: "torch.complex64", dtype: safetensors.C64, itemSize: 8},
		{name: "torch.uint16", dtype: safetensors.U16, itemSize: 2},
		{name: "torch.uint32", dtype: safetensors.U32, itemSize: 4},
		{name: "torch.uint64", dtype: safetensors.U64, itemSize: 8},
		{name: "torch.float8_e4m3fn", dtype: safetensors.F8_E4M3, itemSize: 1},
		{name: "torch.float8_e5m2", dtype: safetensors.F8_E5M2, itemSize: 1},
		{name: "torch.float8_e4m3fnuz", dtype: safetensors.F8_E4M3FNUZ, itemSize: 1},
		{name: "torch.float8_e5m2fnuz", dtype: safetensors.F8_E5M2FNUZ, itemSize: 1},
		{name: "torch.float8_e8m0fnu", dtype: safetensors.F8_E8M0, itemSize: 1},
	} {
		d := d
		allowlist[d.name] = &allowEntry{role: roleDType, dtype: &d}
	}
	// tensor classes (old checkpoints name them; torch's weights_only
	// loader allows them), as values only
	for _, c := range []string{"Float", "Half", "BFloat16", "Double", "Char", "Byte", "Short", "Int", "Long", "Bool", "ComplexFloat"} {
		allowlist["torch."+c+"Tensor"] = &allowEntry{role: roleValue}
	}
}

// unsupportedGlobals are torch names that are harmless (torch's own
// weights_only loader accepts most of them) but have no safetensors
// equivalent. They are refused with ErrUnsupported instead of ErrNotAllowed.
var unsupportedGlobals = map[string]string{
	"torch._utils._rebuild_qtensor":                       "quantized tensors have no safetensors dtype",
	"torch.per_tensor_affine":                             "quantized tensors have no safetensors dtype",
	"torch.per_channel_affine":                            "quantized tensors have no safetensors dtype",
	"torch.per_channel_affine_float_qparams":              "quantized tensors have no safetensors dtype",
	"torch.QInt8Storage":                                  "quantized storages have no safetensors dtype",
	"torch.QUInt8Storage":                                 "quantized storages have no safetensors dtype",
	"torch.QInt32Storage":                                 "quantized storages have no safetensors dtype",
	"torch.QUInt4x2Storage":                               "quantized storages have no safetensors dtype",
	"torch.QUInt2x4Storage":                               "quantized storages have no safetensors dtype",
	"torch.qint8":                                         "quantized dtypes have no safetensors dtype",
	"torch.quint8":                                        "quantized dtypes have no safetensors dtype",
	"torch.qint32":                                        "quantized dtypes have no safetensors dtype",
	"torch.quint4x2":                                      "quantized dtypes have no safetensors dtype",
	"torch.quint2x4":                                      "quantized dtypes have no safetensors dtype",
	"torch.ComplexDoubleStorage":                          "complex128 has no safetensors dtype",
	"torch.complex128":                                    "complex128 has no safetensors dtype",
	"torch.complex32":                                     "complex32 has no safetensors dtype",
	"torch._utils._rebuild_sparse_tensor":                 "sparse tensors are not supported",
	"torch._utils._rebuild_sparse_csr_tensor":             "sparse tensors are not supported",
	"torch.serialization._get_layout":                     "non-strided layouts (sparse) are not supported",
	"torch._tensor._rebuild_from_type":                    "tensor subclasses are not supported",
	"torch._tensor._rebuild_from_type_v2":                 "tensor subclasses are not supported",
	"torch._utils._rebuild_wrapper_subclass":              "tensor subclasses are not supported",
	"torch._utils._rebuild_meta_tensor_no_storage":        "meta tensors carry no data",
	"torch._utils._rebuild_device_tensor_from_numpy":      "numpy-backed device tensors are not supported",
	"torch._utils._rebuild_device_tensor_from_cpu_tensor": "device tensors are not supported",
	"torch._utils._rebuild_nested_tensor":                 "nested tensors are not supported",
	"torch._utils._rebuild_xla_tensor":                    "XLA tensors are not supported",
	"torch._utils._rebuild_mlc_tensor":                    "MLC tensors are not supported",
}

// globalVerdict is how a global is treated.
type globalVerdict int

const (
	verdictAllowed     globalVerdict = iota
	verdictUnsupported               // known torch name, inert, not convertible
	verdictNotAllowed                // anything else
	verdictUserAllowed               // allowed by the caller (WithAllow)
)

// userEntry is the allowEntry of every global the caller allowed.
var userEntry = &allowEntry{role: roleUser}

// classifyGlobal looks module.name up (user: the globals the caller
// allowed, see WithAllow); reason explains non-allowed verdicts.
func classifyGlobal(module, name string, user map[string]bool) (*allowEntry, globalVerdict, string) {
	if len(module)+len(name) > maxKnownGlobal {
		// not worth concatenating: a memo-shared multi-megabyte string
		// named by every STACK_GLOBAL would be copied each time
		return nil, verdictNotAllowed, notAllowedReason(module)
	}
	full := module + "." + name
	if a, ok := allowlist[full]; ok {
		return a, verdictAllowed, ""
	}
	if why, ok := unsupportedGlobals[full]; ok {
		return nil, verdictUnsupported, why
	}
	// the caller's names match as written, name without dots: a
	// protocol-4 STACK_GLOBAL's dotted name ("os.system" in posixpath) is
	// an attribute chain, never the class that was allowed
	if user[full] && !strings.Contains(name, ".") {
		return userEntry, verdictUserAllowed, "allowed by the caller (--allow)"
	}
	return nil, verdictNotAllowed, notAllowedReason(module)
}

// maxKnownGlobal exceeds len(module)+len(name) of every allowlisted or
// known-unsupported global.
const maxKnownGlobal = 128

// maxGlobalPart bounds how much of a global's module or name is copied into
// messages, errors and scan reports.
const maxGlobalPart = 1 << 10

func clip(s string) string {
	if len(s) > maxGlobalPart {
		return s[:maxGlobalPart] + "..."
	}
	return s
}

// globalName is module.name for messages, each part clipped to maxGlobalPart.
func globalName(module, name string) string { return clip(module) + "." + clip(name) }

// notAllowedReason gives a hint for common families of refused names.
func notAllowedReason(module string) string {
	switch {
	case module == "__main__":
		return "a class from the saving script (whole-object pickle)"
	case hasPrefix(module, "torch.nn.modules"):
		return "a whole nn.Module pickle; save model.state_dict() instead"
	case module == "numpy" || hasPrefix(module, "numpy."):
		return "numpy objects are not allowed"
	case module == "__torch__" || hasPrefix(module, "__torch__.") || hasPrefix(module, "torch.jit"):
		return "TorchScript objects are not allowed"
	}
	return "not in the allowlist"
}

func hasPrefix(s, p string) bool { return len(s) >= len(p) && s[:len(p)] == p }
