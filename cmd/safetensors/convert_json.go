package main

import (
	"encoding/json"
	"io"

	"github.com/gosafetensors/safetensors/convert"
)

// convertJSON is one converted checkpoint in the output of convert --json,
// which prints an array of them (one per file, several for a directory):
//
//	[{"input": string, "output": string,       output is "" for --dry-run
//	  "format": "zip" | "legacy",
//	  "unwrapped": string,                      "state_dict", "model", --key, or "" for the root
//	  "tensors": [{"name", "source", "dtype", "shape": [int], "bytes": int,
//	               "materialized": bool,        a strided view gathered into C order
//	               "sha256": string}],          with --sha256, else ""
//	  "removed": [{"name", "kept"}],            identical views written once
//	  "skipped": [{"name", "kind", "reason"}],  entries not written
//	  "metadata": {string: string},             __metadata__ written
//	  "bytes": int, "file_size": int,
//	  "verified": bool}]
type convertJSON struct {
	Input     string            `json:"input"`
	Output    string            `json:"output"`
	Format    string            `json:"format"`
	Unwrapped string            `json:"unwrapped"`
	Tensors   []tensorReport    `json:"tensors"`
	Removed   []aliasReport     `json:"removed"`
	Skipped   []skippedReport   `json:"skipped"`
	Metadata  map[string]string `json:"metadata"`
	Bytes     int64             `json:"bytes"`
	FileSize  int64             `json:"file_size"`
	Verified  bool              `json:"verified"`
}

type tensorReport struct {
	Name         string  `json:"name"`
	Source       string  `json:"source"`
	DType        string  `json:"dtype"`
	Shape        []int64 `json:"shape"`
	Bytes        int64   `json:"bytes"`
	Materialized bool    `json:"materialized"`
	SHA256       string  `json:"sha256"`
}

type aliasReport struct {
	Name string `json:"name"`
	Kept string `json:"kept"`
}

type skippedReport struct {
	Name   string `json:"name"`
	Kind   string `json:"kind"`
	Reason string `json:"reason"`
}

func toConvertJSON(r *convert.Report) convertJSON {
	out := convertJSON{Input: r.Input, Output: r.Output, Format: r.Format.String(), Unwrapped: r.Unwrapped,
		Tensors: []tensorReport{}, Removed: []aliasReport{}, Skipped: []skippedReport{},
		Metadata: r.Metadata, Bytes: r.Bytes, FileSize: r.FileSize, Verified: r.Verified}
	if out.Metadata == nil {
		out.Metadata = map[string]string{}
	}
	for _, t := range r.Tensors {
		shape := t.Shape
		if shape == nil {
			shape = []int64{}
		}
		out.Tensors = append(out.Tensors, tensorReport{t.Name, t.Source, t.DType, shape, t.Bytes, t.Materialized, t.SHA256})
	}
	for _, a := range r.Removed {
		out.Removed = append(out.Removed, aliasReport{a.Name, a.Kept})
	}
	for _, s := range r.Skipped {
		out.Skipped = append(out.Skipped, skippedReport{s.Name, s.Kind, s.Reason})
	}
	return out
}

func writeConvertJSON(w io.Writer, reports ...*convert.Report) error {
	out := make([]convertJSON, len(reports))
	for i, r := range reports {
		out[i] = toConvertJSON(r)
	}
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}
