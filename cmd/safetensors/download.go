package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/gosafetensors/safetensors/download"
	"github.com/gosafetensors/safetensors/internal/redact"
	"github.com/gosafetensors/safetensors/remote"
	"github.com/spf13/cobra"
)

func init() { register(newDownloadCmd) }

type downloadFlags struct {
	include, exclude, files []string
	localDir, cacheDir      string
	concurrency             int
	chunk                   string
	json                    bool
}

func newDownloadCmd() *cobra.Command {
	var fl downloadFlags
	cmd := &cobra.Command{
		Use:   "download LOCATION",
		Short: "Put a model on disk: into the Hugging Face cache, or a local directory, checked and resumable",
		Long: `Download puts the files of a Hub repository, an HTTP directory or a bucket
prefix on disk, reading --concurrency ranges at once (files in parallel,
ranges within a file too), streaming each to disk.

hf://ORG/REPO[@REV][/PATH] goes into the Hugging Face cache exactly as
huggingface_hub lays it out ($HF_HUB_CACHE, else $HF_HOME/hub, else
~/.cache/huggingface/hub; or --cache-dir), so transformers, huggingface_hub
and every hf:// read of this tool find it offline; --local-dir DIR writes
plain files instead. http(s)://HOST/DIR/ (its model, or --file NAME...) and
s3://BUCKET/PREFIX/ (gs://, azblob://) need --local-dir.

Every LFS file is checked against its SHA-256, every other Hub file against
its git blob id, as the bytes arrive; a mismatch removes the partial file
and names the file and both digests. No file appears under its final name
before it is complete and checked; a download that is interrupted (even
killed) continues from what is on disk when run again. --include and
--exclude take huggingface_hub's patterns ('*' matches '/' too; 'dir/'
matches what is under it).

Exit status: 0 downloaded (or already there), 1 the bytes served are not
the ones listed (digest mismatch), 2 could not download (network, disk,
bad usage, offline without a cached copy).`,
		Example: `  safetensors download hf://meta-llama/Llama-3.1-8B --include '*.safetensors' --include '*.json'
  safetensors download hf://org/model@v1.0 --local-dir ./model
  safetensors download https://example.com/models/llama/ --local-dir ./llama
  safetensors download s3://bucket/models/llama/ --local-dir ./llama --concurrency 32`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runDownload(cmd, cmd.OutOrStdout(), cmd.ErrOrStderr(), args[0], fl)
		},
	}
	f := cmd.Flags()
	f.StringArrayVar(&fl.include, "include", nil, "download only files matching `GLOB` (repeatable)")
	f.StringArrayVar(&fl.exclude, "exclude", nil, "skip files matching `GLOB` (repeatable; wins over --include)")
	f.StringVar(&fl.localDir, "local-dir", "", "write plain files under `DIR` instead of the Hugging Face cache")
	f.StringVar(&fl.cacheDir, "cache-dir", "", "the Hugging Face cache `DIR` (default $HF_HUB_CACHE, $HF_HOME/hub, ~/.cache/huggingface/hub)")
	f.StringArrayVar(&fl.files, "file", nil, "a file of an HTTP directory to download, relative to it (repeatable; default: its model)")
	f.IntVarP(&fl.concurrency, "concurrency", "c", download.DefaultConcurrency, "ranges read at once, over as many connections (`N`)")
	f.StringVar(&fl.chunk, "chunk", "", "largest range one request reads (default: sized to the link, 16MiB to 64MiB)")
	f.BoolVar(&fl.json, "json", false, "print one JSON object (schema in docs/download.md)")
	return cmd
}

// downloadJSON is the --json output of download:
//
//	{
//	  "location":  string   as given, a URL without its query (internal/redact)
//	  "commit":    string   the commit a Hub download was made at, "" otherwise
//	  "dir":       string   the snapshot folder in the cache, or the local directory
//	  "files":     [{"path": string, "size": int, "digest": string ("sha256:HEX", "git-blob:HEX" or "none"),
//	                 "local": string, "present": bool (already complete, nothing read)}]
//	  "bytes":     int      bytes of the files selected
//	  "moved":     int      bytes moved over the network by this run
//	  "resumed":   int      bytes an interrupted run had left on disk
//	  "requests":  int      HTTP or object-store requests
//	  "seconds":   float
//	  "bytes_per_second": float   moved / seconds
//	}
type downloadJSON struct {
	Location string             `json:"location"`
	Commit   string             `json:"commit"`
	Dir      string             `json:"dir"`
	Files    []downloadFileJSON `json:"files"`
	Bytes    int64              `json:"bytes"`
	Moved    int64              `json:"moved"`
	Resumed  int64              `json:"resumed"`
	Requests int64              `json:"requests"`
	Seconds  float64            `json:"seconds"`
	Rate     float64            `json:"bytes_per_second"`
}

type downloadFileJSON struct {
	Path    string `json:"path"`
	Size    int64  `json:"size"`
	Digest  string `json:"digest"`
	Local   string `json:"local"`
	Present bool   `json:"present"`
}

func runDownload(cmd *cobra.Command, stdout, stderr io.Writer, loc string, fl downloadFlags) error {
	opts, err := downloadOptions(cmd, fl)
	if err != nil {
		return err
	}
	var prog *progress
	opts = append(opts, download.WithProgress(func(p download.Progress) {
		prog.setTotal(p.Total)
		prog.update(p.Bytes)
	}))
	prog = newProgress(stderr, "download", 1)
	res, err := download.Download(cmdContext(cmd), loc, opts...)
	prog.done()
	if err != nil {
		return downloadProblem(err)
	}
	out := downloadJSON{Location: redact.Location(loc), Commit: res.Commit, Dir: res.Dir, Bytes: res.Bytes, Moved: res.Moved, Resumed: res.Resumed,
		Requests: res.Requests, Seconds: res.Duration.Seconds(), Files: []downloadFileJSON{}}
	if out.Seconds > 0 {
		out.Rate = float64(res.Moved) / out.Seconds
	}
	present := 0
	for _, f := range res.Files {
		out.Files = append(out.Files, downloadFileJSON{Path: f.Path, Size: f.Size, Digest: f.Digest.String(), Local: f.Local, Present: f.Present})
		if f.Present {
			present++
		}
	}
	if fl.json {
		enc := json.NewEncoder(stdout)
		enc.SetEscapeHTML(false)
		enc.SetIndent("", "  ")
		return enc.Encode(out)
	}
	var b strings.Builder
	name := display(redact.Location(loc))
	if res.Commit != "" {
		name += " @ " + res.Commit[:12]
	}
	fmt.Fprintf(&b, "%s: %s, %s", name, plural(int64(len(res.Files)), "file"), humanBytes(res.Bytes))
	switch {
	case res.Moved == 0:
		b.WriteString(", all on disk already\n")
	default:
		fmt.Fprintf(&b, "; %s moved in %.2f s (%s/s)", humanBytes(res.Moved), out.Seconds, humanBytes(int64(out.Rate)))
		if res.Resumed > 0 {
			fmt.Fprintf(&b, ", %s resumed", humanBytes(res.Resumed))
		}
		if present > 0 {
			fmt.Fprintf(&b, ", %d already present", present)
		}
		b.WriteString("\n")
	}
	fmt.Fprintf(&b, "  %s\n", res.Dir)
	_, err = io.WriteString(stdout, b.String())
	return err
}

func downloadOptions(cmd *cobra.Command, fl downloadFlags) ([]download.Option, error) {
	if fl.concurrency < 1 || fl.concurrency > 1024 {
		return nil, usageError("--concurrency %d: want 1 to 1024", fl.concurrency)
	}
	opts := []download.Option{download.WithConcurrency(fl.concurrency)}
	if fl.chunk != "" {
		n, err := parseSize(fl.chunk)
		if err != nil || n < 64<<10 || n > 1<<30 {
			return nil, usageError("--chunk %q: want a size from 64KiB to 1GiB", fl.chunk)
		}
		opts = append(opts, download.WithChunkSize(n))
	}
	if len(fl.include) > 0 {
		opts = append(opts, download.WithInclude(fl.include...))
	}
	if len(fl.exclude) > 0 {
		opts = append(opts, download.WithExclude(fl.exclude...))
	}
	if fl.localDir != "" {
		opts = append(opts, download.WithLocalDir(fl.localDir))
	}
	if fl.cacheDir != "" {
		opts = append(opts, download.WithCacheDir(fl.cacheDir))
	}
	if len(fl.files) > 0 {
		opts = append(opts, download.WithFiles(fl.files...))
	}
	if trust, _ := cmd.Flags().GetBool("trust-server"); trust {
		opts = append(opts, download.WithRemote(remote.WithTrustUnvalidated(true)))
	}
	return opts, nil
}

// downloadProblem: bytes that are not the ones listed are problems found
// (exit 1); anything else kept the download from being made (exit 2).
func downloadProblem(err error) error {
	if errors.Is(err, download.ErrDigest) {
		return &exitError{Code: exitProblems, Err: err}
	}
	return &exitError{Code: exitNoCheck, Err: err}
}
