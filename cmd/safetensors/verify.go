package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/gosafetensors/safetensors/download"
	"github.com/spf13/cobra"
)

func init() { register(newVerifyCmd) }

func newVerifyCmd() *cobra.Command {
	var asJSON bool
	var cacheDir string
	cmd := &cobra.Command{
		Use:   "verify DIR|hf://ORG/REPO[@REV]",
		Short: "Check a downloaded model on disk: every file against its digest, every index against its shards",
		Long: `Verify re-checks what a download left on disk, reading every byte:

  a cache repository (…/hub/models--ORG--NAME): every blob against its name
    (a SHA-256 for LFS files, a git blob id for others), every snapshot link;
  hf://ORG/REPO[@REV], or a snapshot folder: each file, through its link,
    against the blob it names and the commit's file list;
  any other folder (a --local-dir download): each file against the digest
    huggingface_hub's metadata records for it (files without one are
    reported as unverified);

and, in each folder, every safetensors index against its shards' headers
(every tensor listed is in its shard, no shard holds one the index does not
list), every pytorch_model.bin.index.json against its checkpoints, and a
model held in both formats for agreement in dtype and shape.

Exit status: 0 everything checks, 1 problems found, 2 could not check.`,
		Example: `  safetensors verify hf://meta-llama/Llama-3.1-8B
  safetensors verify ~/.cache/huggingface/hub/models--meta-llama--Llama-3.1-8B
  safetensors verify ./model --json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var opts []download.Option
			if cacheDir != "" {
				opts = append(opts, download.WithCacheDir(cacheDir))
			}
			rep, err := download.Verify(cmdContext(cmd), args[0], opts...)
			if err != nil {
				return &exitError{Code: exitNoCheck, Err: err}
			}
			if err := printVerify(cmd.OutOrStdout(), rep, asJSON); err != nil {
				return err
			}
			if !rep.OK() {
				return &exitError{Code: exitProblems}
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON object (schema in docs/download.md)")
	cmd.Flags().StringVar(&cacheDir, "cache-dir", "", "the Hugging Face cache `DIR` for hf:// locations")
	return cmd
}

// verifyJSON is the --json output of verify:
//
//	{
//	  "location": string, "dir": string,
//	  "ok":       bool     no problem found
//	  "files":    [{"path": string, "size": int, "digest": string, "status": "ok"|"mismatch"|"unverified"|"broken", "detail": string}]
//	  "indexes":  [string] indexes checked against their shards
//	  "problems": [string]
//	  "warnings": [string]
//	  "bytes":    int      bytes hashed
//	}
type verifyJSON struct {
	Location string           `json:"location"`
	Dir      string           `json:"dir"`
	OK       bool             `json:"ok"`
	Files    []verifyFileJSON `json:"files"`
	Indexes  []string         `json:"indexes"`
	Problems []string         `json:"problems"`
	Warnings []string         `json:"warnings"`
	Bytes    int64            `json:"bytes"`
}

type verifyFileJSON struct {
	Path   string `json:"path"`
	Size   int64  `json:"size"`
	Digest string `json:"digest"`
	Status string `json:"status"`
	Detail string `json:"detail,omitempty"`
}

func printVerify(w io.Writer, rep *download.Report, asJSON bool) error {
	if asJSON {
		out := verifyJSON{Location: rep.Location, Dir: rep.Dir, OK: rep.OK(), Files: []verifyFileJSON{},
			Indexes: append([]string{}, rep.Indexes...), Problems: append([]string{}, rep.Problems...), Warnings: append([]string{}, rep.Warnings...), Bytes: rep.Bytes}
		for _, f := range rep.Files {
			out.Files = append(out.Files, verifyFileJSON{Path: f.Path, Size: f.Size, Digest: f.Digest.String(), Status: f.Status, Detail: f.Detail})
		}
		enc := json.NewEncoder(w)
		enc.SetEscapeHTML(false)
		enc.SetIndent("", "  ")
		return enc.Encode(out)
	}
	counts := map[string]int64{}
	for _, f := range rep.Files {
		counts[f.Status]++
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %s checked (%s), %d verified", display(rep.Location), plural(int64(len(rep.Files)), "file"), humanBytes(rep.Bytes), counts["ok"])
	if n := counts["unverified"]; n > 0 {
		fmt.Fprintf(&b, ", %d without a known digest", n)
	}
	if len(rep.Indexes) > 0 {
		fmt.Fprintf(&b, "; %s checked against the shards", plural(int64(len(rep.Indexes)), "index"))
	}
	if rep.OK() {
		b.WriteString(": ok\n")
	} else {
		fmt.Fprintf(&b, ": %s\n", plural(int64(len(rep.Problems)), "problem"))
	}
	for _, p := range rep.Problems {
		fmt.Fprintf(&b, "  problem: %s\n", p)
	}
	for _, p := range rep.Warnings {
		fmt.Fprintf(&b, "  warning: %s\n", p)
	}
	_, err := io.WriteString(w, b.String())
	return err
}
