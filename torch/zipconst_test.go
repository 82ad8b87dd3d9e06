package torch

// Zip record signatures and fixed lengths, for the tests that craft
// archives byte by byte.
const (
	sigLocal    = 0x04034b50
	sigCentral  = 0x02014b50
	sigEnd      = 0x06054b50
	sigEnd64    = 0x06064b50
	sigLocator  = 0x07064b50
	lenLocal    = 30
	lenCentral  = 46
	lenEnd      = 22
	lenLocator  = 20
	lenEnd64Min = 56
)
