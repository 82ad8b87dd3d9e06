package inspect

import (
	"encoding/json"
	"io"

	"github.com/gosafetensors/safetensors"
)

// Report is the JSON object `inspect --json` prints:
//
//	{
//	  "file":         string  the location as given
//	  "format":       string  "safetensors", "safetensors (zstd)", "sharded", or "pytorch-zip" / "pytorch-legacy" for a checkpoint
//	  "file_size":    int     bytes
//	  "header_size":  int     N, the header JSON length with padding; data starts at byte 8+N (0 for checkpoints)
//	  "tensor_count": int     number of tensors in the file (before --filter)
//	  "tensors": [            name order (h.2 before h.10) unless --sort; only those matching --filter
//	    {"name": string, "dtype": string, "shape": [int], "data_offsets": [begin, end] (null for checkpoints),
//	     "parameters": int, "bytes": int, "shard": string (sharded models only)}
//	  ],
//	  "metadata":            {string: string}   {} when the file has none
//	  "total_parameters":    int                over the listed tensors; a scalar counts 1
//	  "total_bytes":         int                over the listed tensors
//	  "parameters_by_dtype": {dtype: int}
//	  "bytes_by_dtype":      {dtype: int}
//	  "warnings":            [string]           [] when none
//	  "shards":              [{"name", "tensors", "parameters", "bytes"}]  [] unless sharded
//	}
//
// data_offsets are relative to the start of the data section, as in the file.
type Report struct {
	File              string            `json:"file"`
	Format            string            `json:"format"`
	FileSize          int64             `json:"file_size"`
	HeaderSize        int64             `json:"header_size"`
	TensorCount       int               `json:"tensor_count"`
	Tensors           []Tensor          `json:"tensors"`
	Metadata          map[string]string `json:"metadata"`
	TotalParameters   int64             `json:"total_parameters"`
	TotalBytes        int64             `json:"total_bytes"`
	ParametersByDType map[string]int64  `json:"parameters_by_dtype"`
	BytesByDType      map[string]int64  `json:"bytes_by_dtype"`
	Warnings          []string          `json:"warnings"`
	Shards            []Shard           `json:"shards"`
}

// Shard is one shard of a sharded model in a [Report].
type Shard struct {
	Name       string `json:"name"`
	Tensors    int    `json:"tensors"`
	Parameters int64  `json:"parameters"`
	Bytes      int64  `json:"bytes"`
}

// Tensor is one tensor in a [Report].
type Tensor struct {
	Name        string    `json:"name"`
	DType       string    `json:"dtype"`
	Shape       []int64   `json:"shape"`
	DataOffsets *[2]int64 `json:"data_offsets"`
	Parameters  int64     `json:"parameters"`
	Bytes       int64     `json:"bytes"`
	Shard       string    `json:"shard,omitempty"`
}

// Totals are the parameters and bytes of some tensors, in all and per
// dtype.
type Totals struct {
	Parameters int64
	Bytes      int64
	ByDType    map[safetensors.DType]DTypeTotal
}

// DTypeTotal is one dtype's share of [Totals].
type DTypeTotal struct {
	Parameters, Bytes int64
}

// Sum adds up tensors; a scalar counts one parameter.
func Sum(tensors []safetensors.TensorInfo) Totals {
	t := Totals{ByDType: map[safetensors.DType]DTypeTotal{}}
	for _, x := range tensors {
		n := x.NumElements()
		t.Parameters += n
		t.Bytes += x.Size()
		d := t.ByDType[x.DType]
		d.Parameters += n
		d.Bytes += x.Size()
		t.ByDType[x.DType] = d
	}
	return t
}

// Report returns the JSON report of d named file, listing tensors (all of
// d.Tensors, or the ones a caller selected and ordered) with totals over
// them.
func (d *Description) Report(file string, tensors []safetensors.TensorInfo) *Report {
	tot := Sum(tensors)
	out := &Report{
		File:              file,
		Format:            d.Format,
		FileSize:          d.FileSize,
		HeaderSize:        d.HeaderSize,
		TensorCount:       len(d.Tensors),
		Tensors:           make([]Tensor, len(tensors)),
		Metadata:          d.Metadata,
		TotalParameters:   tot.Parameters,
		TotalBytes:        tot.Bytes,
		ParametersByDType: map[string]int64{},
		BytesByDType:      map[string]int64{},
		Warnings:          d.Warnings,
		Shards:            []Shard{},
	}
	for _, sh := range d.Shards {
		out.Shards = append(out.Shards, Shard{Name: sh.Name, Tensors: sh.Tensors, Parameters: sh.Parameters, Bytes: sh.Bytes})
	}
	for i, t := range tensors {
		shape := t.Shape
		if shape == nil {
			shape = []int64{}
		}
		out.Tensors[i] = Tensor{Name: t.Name, DType: t.DType.String(), Shape: shape, Parameters: t.NumElements(), Bytes: t.Size()}
		if d.Offsets {
			offs := t.DataOffsets
			out.Tensors[i].DataOffsets = &offs
		}
		if d.ShardOf != nil {
			out.Tensors[i].Shard = d.ShardOf[t.Name]
		}
	}
	if out.Metadata == nil {
		out.Metadata = map[string]string{}
	}
	if out.Warnings == nil {
		out.Warnings = []string{}
	}
	for dt, v := range tot.ByDType {
		out.ParametersByDType[dt.String()] = v.Parameters
		out.BytesByDType[dt.String()] = v.Bytes
	}
	return out
}

// WriteJSON writes r as `inspect --json` prints it: indented unless it
// lists more than 1,000 tensors, HTML characters not escaped, one newline
// at the end.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	if len(r.Tensors) <= 1000 {
		enc.SetIndent("", "  ")
	}
	return enc.Encode(r)
}
