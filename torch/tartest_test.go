package torch

import "github.com/gosafetensors/safetensors/torch/internal/tartest"

// Tar builders and layouts shared with the tarlist tests.
var (
	cat                = tartest.Cat // also the pickle builders'
	tarHdr             = tartest.Hdr
	setTarChecksum     = tartest.SetChecksum
	pad512             = tartest.Pad
	ustarHdr           = tartest.Ustar
	ustarMember        = tartest.UstarMember
	tarLink            = tartest.Link
	gnuLong            = tartest.GNULong
	paxTyp             = tartest.Pax
	gadgetMember       = tartest.GadgetMember
	tarBase            = tartest.Base
	negSize            = tartest.NegSize
	sparseHdr          = tartest.SparseHdr
	paxSparse          = tartest.PaxSparse
	tarListCases       = tartest.ListCases
	tarNegCases        = tartest.NegCases
	tarNegGoCases      = tartest.NegGoCases
	tarLinkCases       = tartest.LinkCases
	tarSparseCases     = tartest.SparseCases
	tarPaxSparseCases  = tartest.PaxSparseCases
	tarExtractCases    = tartest.ExtractCases
	tarSparseExtPickle = tartest.SparseExtPickle

	tarStorages0 = tartest.Storages0
	tarTensors0  = tartest.Tensors0
	tarEnd       = tartest.End
	tarHarmless  = tartest.Harmless
)

const (
	tarBlock   = 512
	tarCopyBuf = 16 << 10 // tarfile copyfileobj's buffer
)
