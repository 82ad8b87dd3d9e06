package pickle

// Op is a pickle opcode (one byte).
type Op byte

// The opcodes of pickle protocols 0 to 5, as Lib/pickle.py names them.
const (
	OpMark           Op = '('
	OpStop           Op = '.'
	OpPop            Op = '0'
	OpPopMark        Op = '1'
	OpDup            Op = '2'
	OpFloat          Op = 'F'
	OpInt            Op = 'I'
	OpBinInt         Op = 'J'
	OpBinInt1        Op = 'K'
	OpLong           Op = 'L'
	OpBinInt2        Op = 'M'
	OpNone           Op = 'N'
	OpPersID         Op = 'P'
	OpBinPersID      Op = 'Q'
	OpReduce         Op = 'R'
	OpString         Op = 'S'
	OpBinString      Op = 'T'
	OpShortBinString Op = 'U'
	OpUnicode        Op = 'V'
	OpBinUnicode     Op = 'X'
	OpAppend         Op = 'a'
	OpBuild          Op = 'b'
	OpGlobal         Op = 'c'
	OpDict           Op = 'd'
	OpEmptyDict      Op = '}'
	OpAppends        Op = 'e'
	OpGet            Op = 'g'
	OpBinGet         Op = 'h'
	OpInst           Op = 'i'
	OpLongBinGet     Op = 'j'
	OpList           Op = 'l'
	OpEmptyList      Op = ']'
	OpObj            Op = 'o'
	OpPut            Op = 'p'
	OpBinPut         Op = 'q'
	OpLongBinPut     Op = 'r'
	OpSetItem        Op = 's'
	OpTuple          Op = 't'
	OpEmptyTuple     Op = ')'
	OpSetItems       Op = 'u'
	OpBinFloat       Op = 'G'

	OpProto    Op = 0x80
	OpNewObj   Op = 0x81
	OpExt1     Op = 0x82
	OpExt2     Op = 0x83
	OpExt4     Op = 0x84
	OpTuple1   Op = 0x85
	OpTuple2   Op = 0x86
	OpTuple3   Op = 0x87
	OpNewTrue  Op = 0x88
	OpNewFalse Op = 0x89
	OpLong1    Op = 0x8a
	OpLong4    Op = 0x8b

	OpBinBytes      Op = 'B'
	OpShortBinBytes Op = 'C'

	OpShortBinUnicode Op = 0x8c
	OpBinUnicode8     Op = 0x8d
	OpBinBytes8       Op = 0x8e
	OpEmptySet        Op = 0x8f
	OpAddItems        Op = 0x90
	OpFrozenSet       Op = 0x91
	OpNewObjEx        Op = 0x92
	OpStackGlobal     Op = 0x93
	OpMemoize         Op = 0x94
	OpFrame           Op = 0x95

	OpByteArray8     Op = 0x96
	OpNextBuffer     Op = 0x97
	OpReadOnlyBuffer Op = 0x98
)

// names maps every defined opcode to its pickletools name; undefined bytes
// map to "".
var names = [256]string{
	OpMark: "MARK", OpStop: "STOP", OpPop: "POP", OpPopMark: "POP_MARK", OpDup: "DUP",
	OpFloat: "FLOAT", OpInt: "INT", OpBinInt: "BININT", OpBinInt1: "BININT1", OpLong: "LONG",
	OpBinInt2: "BININT2", OpNone: "NONE", OpPersID: "PERSID", OpBinPersID: "BINPERSID",
	OpReduce: "REDUCE", OpString: "STRING", OpBinString: "BINSTRING",
	OpShortBinString: "SHORT_BINSTRING", OpUnicode: "UNICODE", OpBinUnicode: "BINUNICODE",
	OpAppend: "APPEND", OpBuild: "BUILD", OpGlobal: "GLOBAL", OpDict: "DICT",
	OpEmptyDict: "EMPTY_DICT", OpAppends: "APPENDS", OpGet: "GET", OpBinGet: "BINGET",
	OpInst: "INST", OpLongBinGet: "LONG_BINGET", OpList: "LIST", OpEmptyList: "EMPTY_LIST",
	OpObj: "OBJ", OpPut: "PUT", OpBinPut: "BINPUT", OpLongBinPut: "LONG_BINPUT",
	OpSetItem: "SETITEM", OpTuple: "TUPLE", OpEmptyTuple: "EMPTY_TUPLE", OpSetItems: "SETITEMS",
	OpBinFloat: "BINFLOAT",
	OpProto:    "PROTO", OpNewObj: "NEWOBJ", OpExt1: "EXT1", OpExt2: "EXT2", OpExt4: "EXT4",
	OpTuple1: "TUPLE1", OpTuple2: "TUPLE2", OpTuple3: "TUPLE3", OpNewTrue: "NEWTRUE",
	OpNewFalse: "NEWFALSE", OpLong1: "LONG1", OpLong4: "LONG4",
	OpBinBytes: "BINBYTES", OpShortBinBytes: "SHORT_BINBYTES",
	OpShortBinUnicode: "SHORT_BINUNICODE", OpBinUnicode8: "BINUNICODE8", OpBinBytes8: "BINBYTES8",
	OpEmptySet: "EMPTY_SET", OpAddItems: "ADDITEMS", OpFrozenSet: "FROZENSET",
	OpNewObjEx: "NEWOBJ_EX", OpStackGlobal: "STACK_GLOBAL", OpMemoize: "MEMOIZE", OpFrame: "FRAME",
	OpByteArray8: "BYTEARRAY8", OpNextBuffer: "NEXT_BUFFER", OpReadOnlyBuffer: "READONLY_BUFFER",
}

// String returns the pickletools name of op ("MARK", "STACK_GLOBAL"), or
// "" if op is not a defined opcode.
func (op Op) String() string { return names[op] }
