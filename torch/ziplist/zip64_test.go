package ziplist

import (
	"encoding/binary"
	"strings"
	"testing"
)

// TestZip64Extra: a ZIP64 extra field claiming 2^63 bytes, or missing a
// field its placeholders need, is malformed.
func TestZip64Extra(t *testing.T) {
	// ZIP64 extra claiming a huge size
	e := &Entry{Size: 0xffffffff, CompressedSize: 0xffffffff, HeaderOffset: 0}
	x := append([]byte{1, 0, 16, 0}, append(binary.LittleEndian.AppendUint64(nil, 1<<63), binary.LittleEndian.AppendUint64(nil, 1<<63)...)...)
	if e.zip64(x) == "" {
		t.Fatal("2^63 zip64 size accepted")
	}
	e = &Entry{Size: 0xffffffff, CompressedSize: 0xffffffff}
	if e.zip64(append([]byte{1, 0, 8, 0}, binary.LittleEndian.AppendUint64(nil, 5)...)) == "" {
		t.Fatal("zip64 extra missing the csize field accepted")
	}
}

// Red-team round 9: two ZIP64 extra fields on one central entry. miniz
// applies the first, we applied both, so torch could read a data.pkl at
// another offset than the one checked: such an entry is refused.
func TestTwoZip64ExtraFields(t *testing.T) {
	field := func(v uint64) []byte {
		f := binary.LittleEndian.AppendUint16(nil, 0x0001)
		f = binary.LittleEndian.AppendUint16(f, 8)
		return binary.LittleEndian.AppendUint64(f, v)
	}
	e := &Entry{Size: 10, CompressedSize: 10, HeaderOffset: 0xffffffff}
	if msg := e.zip64(append(field(0xffffffff), field(0)...)); !strings.Contains(msg, "two zip64") {
		t.Fatalf("two fields: %q", msg)
	}
	e = &Entry{Size: 10, CompressedSize: 10, HeaderOffset: 0xffffffff}
	if msg := e.zip64(field(1234)); msg != "" || e.HeaderOffset != 1234 {
		t.Fatalf("one field: %q, offset %d", msg, e.HeaderOffset)
	}
}
