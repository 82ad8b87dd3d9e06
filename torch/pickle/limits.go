package pickle

// Limits bounds the work and memory one Machine spends on one pickle.
// Every field must be at least 1.
type Limits struct {
	MaxPickleBytes int64 // bytes of one pickle stream
	MaxStringBytes int64 // one str or bytes value, one text line
	MaxLongBytes   int   // LONG1/LONG4 magnitude in bytes (text LONG and INT: 3 digits per byte)
	MaxMemo        int   // memo entries
	MaxStack       int   // values on the stack
	MaxMarks       int   // nested MARKs
	MaxObjects     int64 // opcodes stepped plus items moved (see Machine.Charge)
}
