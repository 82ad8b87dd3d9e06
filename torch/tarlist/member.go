package tarlist

// Member is one member as tarfile lists it.
type Member struct {
	Header             // after every extension header was applied
	HeaderOffset int64 // offset of its (first) header block
	DataOffset   int64 // offset of its data (after a GNU sparse 1.0 map)
	Stored       int64 // sparse: the size of the stored data; Size is the original size
	// HasSparse is set when tarinfo.sparse is (old GNU 'S', or the pax GNU
	// sparse formats 0.0, 0.1 and 1.0); Sparse is then the map
	HasSparse bool
}

// IsRegular reports whether tarfile treats m as a regular file whose data
// follows its header.
func (m *Member) IsRegular() bool { return IsRegularType(m.Type) }

// IsRegularType reports whether tarfile treats the type as a regular file
// whose data follows the header (unknown types included).
func IsRegularType(t byte) bool {
	switch t {
	case '1', '2', '3', '4', '5', '6', 'L', 'K':
		return false
	}
	return true
}
