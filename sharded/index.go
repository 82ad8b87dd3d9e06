package sharded

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/gosafetensors/safetensors"
	"github.com/gosafetensors/safetensors/internal/atomicfile"
)

// IndexName is the name Hugging Face gives the index of a sharded
// safetensors model.
const IndexName = "model.safetensors.index.json"

// SingleName is the name of an unsharded safetensors model.
const SingleName = "model.safetensors"

// DefaultMaxIndexSize bounds the index files [ParseIndex] reads: 100 MB,
// the limit safetensors puts on a header. An index with a million tensors
// is about 80 MB.
const DefaultMaxIndexSize = 100_000_000

// Index is a model.safetensors.index.json: which shard holds each tensor,
// and the model's totals.
//
//	{"metadata": {"total_parameters": P, "total_size": N}, "weight_map": {"name": "model-00001-of-00002.safetensors", ...}}
type Index struct {
	// TotalSize is metadata.total_size, the sum of the tensors' bytes;
	// -1 when the index has none.
	TotalSize int64
	// TotalParameters is metadata.total_parameters, the sum of the tensors'
	// element counts (written by recent transformers); -1 when absent.
	TotalParameters int64
	// WeightMap maps each tensor name to the shard file that holds it.
	WeightMap map[string]string
	// Metadata holds the other members of "metadata", verbatim.
	Metadata map[string]jsontext.Value
	// Extra holds top-level members other than metadata and weight_map,
	// verbatim.
	Extra map[string]jsontext.Value
}

// NewIndex returns an empty index with zero totals, ready for [Index.Add].
func NewIndex() *Index {
	return &Index{WeightMap: map[string]string{}}
}

// Add records that shard holds the tensor described by info, adding its
// bytes (from its dtype and shape) and elements to the totals. A tensor added twice, an unsafe shard
// name or totals that overflow are errors.
func (x *Index) Add(shard string, info safetensors.TensorInfo) error {
	if err := CheckShardName(shard); err != nil {
		return err
	}
	if x.WeightMap == nil {
		x.WeightMap = map[string]string{}
	}
	if s, dup := x.WeightMap[info.Name]; dup {
		return tensorErr(ErrInvalidIndex, "", shard, info.Name, "already in shard %s", s)
	}
	params, ok := numel(info.Shape)
	bits := int64(info.DType.Bits())
	if !ok || !info.DType.Valid() || params > maxSize/8 || params*bits%8 != 0 {
		return tensorErr(ErrInvalidIndex, "", shard, info.Name, "%s of shape %v is not a valid tensor", info.DType, info.Shape)
	}
	size, sizeOK := addSize(max(x.TotalSize, 0), params*bits/8)
	total, paramsOK := addSize(max(x.TotalParameters, 0), params)
	if !sizeOK || !paramsOK {
		return tensorErr(ErrInvalidIndex, "", shard, info.Name, "model totals overflow")
	}
	x.WeightMap[info.Name] = shard
	x.TotalSize, x.TotalParameters = size, total
	return nil
}

// Shards returns the shard names the weight_map uses, sorted.
func (x *Index) Shards() []string {
	seen := map[string]bool{}
	var out []string
	for _, s := range x.WeightMap {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	slices.Sort(out)
	return out
}

// Validate checks what can be checked without the shards: a non-empty
// weight_map, plain shard names ([CheckShardName]), no tensor named
// "__metadata__", totals not below -1. name is used in errors.
func (x *Index) Validate(name string) error {
	if len(x.WeightMap) == 0 {
		return indexErr(ErrInvalidIndex, name, "", "weight_map is empty")
	}
	for _, t := range slices.Sorted(maps.Keys(x.WeightMap)) {
		if t == "__metadata__" {
			return tensorErr(ErrInvalidIndex, name, "", t, "the name is reserved for metadata")
		}
	}
	for _, s := range x.Shards() {
		if err := CheckShardName(s); err != nil {
			msg := strings.TrimPrefix(err.Error(), ErrUnsafeName.Error()+": ")
			return &IndexError{Index: name, Msg: "weight_map: " + msg, Err: ErrUnsafeName}
		}
	}
	if x.TotalSize < -1 || x.TotalParameters < -1 {
		return indexErr(ErrInvalidIndex, name, "", "negative totals")
	}
	return nil
}

// rawIndex is the index JSON before its members are checked.
type rawIndex struct {
	Metadata  jsontext.Value            `json:"metadata"`
	WeightMap jsontext.Value            `json:"weight_map"`
	Extra     map[string]jsontext.Value `json:",embed"`
}

// ParseIndex parses and validates index JSON; name (a path or URL) is used
// in errors. The JSON must be one object, valid UTF-8, with no duplicate
// key anywhere (two readers must never disagree about which shard holds a
// tensor), a weight_map of strings to strings, and integer totals.
func ParseIndex(b []byte, name string) (*Index, error) {
	if len(b) > DefaultMaxIndexSize {
		return nil, indexErr(ErrInvalidIndex, name, "", "%d bytes is more than the %d an index may have", len(b), DefaultMaxIndexSize)
	}
	bad := func(format string, args ...any) (*Index, error) {
		return nil, indexErr(ErrInvalidIndex, name, "", format, args...)
	}
	var raw rawIndex
	// json v2 rejects duplicate names, invalid UTF-8 and trailing data.
	if err := json.Unmarshal(b, &raw); err != nil {
		return bad("not a JSON object with a weight_map: %v", err)
	}
	if len(raw.WeightMap) == 0 || raw.WeightMap.Kind() != '{' {
		return bad("no weight_map object")
	}
	x := &Index{TotalSize: -1, TotalParameters: -1, Extra: raw.Extra}
	if err := json.Unmarshal(raw.WeightMap, &x.WeightMap); err != nil {
		return bad("weight_map must map tensor names to file names: %v", err)
	}
	if len(raw.Metadata) > 0 && raw.Metadata.Kind() != 'n' {
		if raw.Metadata.Kind() != '{' {
			return bad("metadata is not an object")
		}
		if err := json.Unmarshal(raw.Metadata, &x.Metadata); err != nil {
			return bad("metadata: %v", err)
		}
		for key, dst := range map[string]*int64{"total_size": &x.TotalSize, "total_parameters": &x.TotalParameters} {
			v, ok := x.Metadata[key]
			if !ok {
				continue
			}
			n, ok := parseCount(v)
			if !ok {
				return bad("metadata.%s is %s, not a non-negative integer", key, v)
			}
			*dst = n
			delete(x.Metadata, key)
		}
		if len(x.Metadata) == 0 {
			x.Metadata = nil
		}
	}
	if err := x.Validate(name); err != nil {
		return nil, err
	}
	return x, nil
}

// parseCount reads a non-negative integer below 2^62; an integral float
// such as 1.5e10 is accepted, since some writers produced them.
func parseCount(v jsontext.Value) (int64, bool) {
	if v.Kind() != '0' {
		return 0, false
	}
	if n, err := strconv.ParseInt(string(v), 10, 64); err == nil {
		return n, n >= 0 && n <= maxSize
	}
	f, err := strconv.ParseFloat(string(v), 64)
	if err != nil || f < 0 || f > maxSize || f != math.Trunc(f) {
		return 0, false
	}
	return int64(f), true
}

// ReadIndex reads and parses the index file at path.
func ReadIndex(path string) (*Index, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return readIndexFrom(f, path)
}

// readIndexFrom reads at most DefaultMaxIndexSize+1 bytes, so a huge or
// endless input costs no more than the limit.
func readIndexFrom(r io.Reader, name string) (*Index, error) {
	b, err := io.ReadAll(io.LimitReader(r, DefaultMaxIndexSize+1))
	if err != nil {
		return nil, fmt.Errorf("%s: reading the index: %w", name, err)
	}
	return ParseIndex(b, name)
}

// Marshal encodes the index exactly as transformers' save_pretrained does
// (json.dumps(index, indent=2, sort_keys=True) + "\n"): two-space indent,
// keys sorted at every level, non-ASCII escaped as \uXXXX, a trailing
// newline. Totals of -1 are left out. Numbers in Metadata and Extra are
// written as they were read.
func (x *Index) Marshal() ([]byte, error) {
	top := map[string]jsontext.Value{}
	maps.Copy(top, x.Extra)
	meta := map[string]jsontext.Value{}
	maps.Copy(meta, x.Metadata)
	if x.TotalSize >= 0 {
		meta["total_size"] = jsontext.Value(strconv.FormatInt(x.TotalSize, 10))
	}
	if x.TotalParameters >= 0 {
		meta["total_parameters"] = jsontext.Value(strconv.FormatInt(x.TotalParameters, 10))
	}
	mb, err := json.Marshal(meta)
	if err != nil {
		return nil, err
	}
	wb, err := json.Marshal(x.WeightMap)
	if err != nil {
		return nil, err
	}
	top["metadata"], top["weight_map"] = mb, wb
	tb, err := json.Marshal(top)
	if err != nil {
		return nil, err
	}
	out, err := appendPython(nil, tb)
	if err != nil {
		return nil, err
	}
	return append(out, '\n'), nil
}

// WriteFile writes the index to path atomically (a temporary file in the
// same directory, synced, renamed over path).
func (x *Index) WriteFile(path string) error {
	b, err := x.Marshal()
	if err != nil {
		return err
	}
	f, err := atomicfile.Create(path)
	if err != nil {
		return err
	}
	defer f.Abort()
	if _, err := f.Write(b); err != nil {
		return err
	}
	return f.Commit()
}

// numel is the element count of shape; false on overflow past 2^62.
func numel(shape []int64) (int64, bool) {
	n := int64(1)
	for _, d := range shape {
		if d < 0 {
			return 0, false
		}
		if d == 0 {
			return 0, true
		}
		if n > maxSize/d {
			// Later zero dimensions would make it 0; check them first.
			if slices.Contains(shape, 0) {
				return 0, true
			}
			return 0, false
		}
		n *= d
	}
	return n, true
}

// addSize adds two sizes, false past 2^62.
func addSize(a, b int64) (int64, bool) {
	if a < 0 || b < 0 || a > maxSize-b {
		return 0, false
	}
	return a + b, true
}

var errNotJSON = errors.New("sharded: not JSON")
