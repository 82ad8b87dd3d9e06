package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path"
	"strconv"
	"strings"

	"github.com/gosafetensors/safetensors/load"
	"github.com/spf13/cobra"
)

func init() { register(newLoadCmd) }

type loadFlags struct {
	concurrency int
	chunk       string
	tp          string
	rules       []string
	noDefaults  bool
	uneven      string
	filters     []string
	into        string
	bufferedIO  bool
	json        bool
}

func newLoadCmd() *cobra.Command {
	var fl loadFlags
	cmd := &cobra.Command{
		Use:   "load LOCATION",
		Short: "Read every tensor of a model as an inference engine would, and report the throughput",
		Long: `Load reads the tensors of a model — all of them, those --filter selects, or
one tensor-parallel rank's parts — from a local file or directory, an index,
http(s)://, hf://ORG/REPO[@REV], s3://, gs:// or azblob://, with
--concurrency ranged reads of up to --chunk bytes in flight, and reports the
bytes, reads, requests, seconds and GB/s: a benchmark of the storage a node
loads its weights from.

--into discard (the default) reads into a pool of concurrency+1 chunk
buffers and keeps nothing; --into memory reads each tensor into new memory,
as an engine's host copy would be (page faults included), and frees it.

--tp RANK/WORLD reads only the rank's part of each tensor that the rule table
splits: by rows (dimension 0: q, k, v, gate and up projections, embeddings,
lm_head), by columns (dimension 1: o and down projections) or not at all
(norms, biases of row-parallel layers, anything else). --tp-rule
'PATTERN=rows|cols|replicate|dimN' (repeatable, first match wins) comes
before the defaults; --tp-no-defaults drops them. A split dimension the world
size does not divide is refused unless --tp-uneven chunk gives torch.chunk's
parts. Each part is what 'get --slice' returns for it.

Exit status: 0 loaded, 1 the model is not valid, 2 it could not be read (or
bad usage).`,
		Example: `  safetensors load ./Llama-3.1-8B
  safetensors load hf://meta-llama/Llama-3.1-8B --concurrency 32 --chunk 16MiB
  safetensors load s3://bucket/model/ --tp 1/8 --json
  safetensors load model.safetensors --filter '*.layers.0.*' --into memory`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runLoad(cmd, cmd.OutOrStdout(), cmd.ErrOrStderr(), args[0], fl)
		},
	}
	f := cmd.Flags()
	f.IntVarP(&fl.concurrency, "concurrency", "c", load.DefaultConcurrency, "reads in flight at once (`N`)")
	f.StringVar(&fl.chunk, "chunk", "", "largest read, e.g. 8MiB (default 16 MiB remote, 1 MiB local)")
	f.StringVar(&fl.tp, "tp", "", "load tensor-parallel rank `RANK/WORLD`'s parts, e.g. 0/8")
	f.StringArrayVar(&fl.rules, "tp-rule", nil, "split tensors matching a glob: `PATTERN=rows|cols|replicate|dimN` (repeatable; before the defaults)")
	f.BoolVar(&fl.noDefaults, "tp-no-defaults", false, "use only the --tp-rule rules")
	f.StringVar(&fl.uneven, "tp-uneven", "refuse", "a split dimension the world does not divide: refuse, or chunk (torch.chunk parts)")
	f.StringArrayVar(&fl.filters, "filter", nil, "load only tensors whose name contains `PATTERN`, or matches it as a glob when it has * ? or [ (repeatable: any may match)")
	f.StringVar(&fl.into, "into", "discard", "where the bytes go: discard (a reused pool of chunk buffers) or memory (a new buffer per tensor, freed)")
	f.BoolVar(&fl.bufferedIO, "buffered-io", false, "read local files only through the page cache (default on Linux: O_DIRECT where pages are not cached; which is faster is the machine's, docs/loading.md)")
	f.BoolVar(&fl.json, "json", false, "print one JSON object (schema in docs/loading.md)")
	return cmd
}

// loadJSON is the --json output of load:
//
//	{
//	  "location":         string  as given
//	  "tensors":          int     parts loaded
//	  "bytes":            int     tensor bytes read
//	  "model_bytes":      int     bytes of the selected tensors, whole
//	  "seconds":          float   wall time of the reads (opening excluded)
//	  "bytes_per_second": float
//	  "files":            int     files or objects read
//	  "concurrency":      int
//	  "chunk_size":       int     largest read, bytes
//	  "chunks":           int     reads of up to chunk_size bytes
//	  "reads":            int     read calls (a multi-range read counts once)
//	  "requests":         int     HTTP or object-store requests meanwhile, retries included; 0 for local files
//	  "retries":          int
//	  "wire_bytes":       int     response body bytes received (remote)
//	  "into":             string  "discard" or "memory"
//	  "tp":               null, or {"rank": int, "world": int, "split": int, "replicated": int,
//	                              "replicated_bytes": int}   parts split / replicated, bytes replicated
//	}
type loadJSON struct {
	Location       string  `json:"location"`
	Tensors        int     `json:"tensors"`
	Bytes          int64   `json:"bytes"`
	ModelBytes     int64   `json:"model_bytes"`
	Seconds        float64 `json:"seconds"`
	BytesPerSecond float64 `json:"bytes_per_second"`
	Files          int     `json:"files"`
	Concurrency    int     `json:"concurrency"`
	ChunkSize      int64   `json:"chunk_size"`
	Chunks         int64   `json:"chunks"`
	Reads          int64   `json:"reads"`
	Requests       int64   `json:"requests"`
	Retries        int64   `json:"retries"`
	WireBytes      int64   `json:"wire_bytes"`
	Into           string  `json:"into"`
	TP             *tpJSON `json:"tp"`
}

type tpJSON struct {
	Rank            int   `json:"rank"`
	World           int   `json:"world"`
	Split           int   `json:"split"`
	Replicated      int   `json:"replicated"`
	ReplicatedBytes int64 `json:"replicated_bytes"`
}

func runLoad(cmd *cobra.Command, stdout, stderr io.Writer, loc string, fl loadFlags) error {
	opts, rank, world, err := loadOptions(fl)
	if err != nil {
		return err
	}
	var prog *progress // set before the load starts reporting
	opts = append(opts, load.WithProgress(func(p load.Progress) { prog.update(p.Bytes) }))
	ctx := cmdContext(cmd)
	if so := sourceOptions(ctx); len(so) > 0 { // --trust-server
		opts = append(opts, load.WithSourceOptions(so...))
	}
	l, err := load.Open(ctx, loc, opts...)
	if err != nil {
		return loadProblem(loc, err)
	}
	defer l.Close()
	prog = newProgress(stderr, "load", l.Size())
	var st load.Stats
	if fl.into == "memory" {
		st, err = l.Load(ctx, func(*load.Tensor) error { return nil })
	} else {
		st, err = l.Discard(ctx)
	}
	prog.done()
	if err != nil {
		return loadProblem(loc, err)
	}
	out := loadJSON{
		Location: loc, Tensors: st.Tensors, Bytes: st.Bytes, Seconds: st.Duration.Seconds(), BytesPerSecond: st.Rate(),
		Concurrency: l.Concurrency(), ChunkSize: l.ChunkSize(), Chunks: st.Chunks, Reads: st.Reads,
		Requests: st.Requests, Retries: st.Retries, WireBytes: st.Wire, Into: fl.into,
	}
	files := map[string]bool{}
	var tp tpJSON
	for _, p := range l.Parts() {
		out.ModelBytes += p.Info.Size()
		files[p.File] = true
		if p.Split >= 0 {
			tp.Split++
		} else {
			tp.Replicated++
		}
	}
	out.Files = len(files)
	if world > 1 {
		tp.Rank, tp.World, tp.ReplicatedBytes = rank, world, l.Replicated()
		out.TP = &tp
	}
	if fl.json {
		enc := json.NewEncoder(stdout)
		enc.SetEscapeHTML(false)
		enc.SetIndent("", "  ")
		return enc.Encode(out)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %s, %s in %.2f s: %s/s\n", display(loc), plural(int64(out.Tensors), "tensor"), humanBytes(out.Bytes), out.Seconds, humanBytes(int64(out.BytesPerSecond)))
	fmt.Fprintf(&b, "  %s, %s of up to %s, %d at a time", plural(int64(out.Files), "file"), plural(out.Chunks, "read"), humanBytes(out.ChunkSize), out.Concurrency)
	if out.Requests > 0 {
		fmt.Fprintf(&b, "; %s (%s)", plural(out.Requests, "request"), plural(out.Retries, "retry"))
	}
	b.WriteString("\n")
	if out.TP != nil {
		fmt.Fprintf(&b, "  tensor parallel: rank %d of %d, %s of %s; %d parts split, %d replicated (%s)\n",
			rank, world, humanBytes(out.Bytes), humanBytes(out.ModelBytes), tp.Split, tp.Replicated, humanBytes(tp.ReplicatedBytes))
	}
	_, err = io.WriteString(stdout, b.String())
	return err
}

// loadOptions turns the flags into loader options.
func loadOptions(fl loadFlags) (opts []load.Option, rank, world int, err error) {
	if fl.into != "discard" && fl.into != "memory" {
		return nil, 0, 0, usageError("--into %q: want discard or memory", fl.into)
	}
	if fl.concurrency < 1 || fl.concurrency > 1024 {
		return nil, 0, 0, usageError("--concurrency %d: want 1 to 1024", fl.concurrency)
	}
	opts = append(opts, load.WithConcurrency(fl.concurrency))
	if fl.bufferedIO {
		opts = append(opts, load.WithBufferedIO())
	}
	if fl.chunk != "" {
		n, err := parseSize(fl.chunk)
		if err != nil || n < 4<<10 || n > load.MaxChunk {
			return nil, 0, 0, usageError("--chunk %q: want a size from 4KiB to 1GiB", fl.chunk)
		}
		opts = append(opts, load.WithChunkSize(n))
	}
	for _, p := range fl.filters {
		if _, err := path.Match(p, ""); err != nil {
			return nil, 0, 0, usageError("--filter %q: %v", p, err)
		}
	}
	if len(fl.filters) > 0 {
		opts = append(opts, load.WithFilter(fl.filters...))
	}
	world = 1
	if fl.tp == "" {
		if len(fl.rules) > 0 || fl.noDefaults {
			return nil, 0, 0, usageError("--tp-rule and --tp-no-defaults need --tp RANK/WORLD")
		}
		return opts, 0, 1, nil
	}
	r, w, ok := strings.Cut(fl.tp, "/")
	rank, err1 := strconv.Atoi(r)
	world, err2 := strconv.Atoi(w)
	if !ok || err1 != nil || err2 != nil || world < 1 || world > 1<<16 || rank < 0 || rank >= world {
		return nil, 0, 0, usageError("--tp %q: want RANK/WORLD with 0 <= RANK < WORLD <= 65536, e.g. 0/8", fl.tp)
	}
	opts = append(opts, load.WithTensorParallel(rank, world))
	var rules []load.Rule
	for _, s := range fl.rules {
		rule, err := load.ParseRule(s)
		if err != nil {
			return nil, 0, 0, usageError("--tp-rule: %v", err)
		}
		rules = append(rules, rule)
	}
	if len(rules) > 0 {
		opts = append(opts, load.WithRules(rules...))
	}
	if fl.noDefaults {
		opts = append(opts, load.WithoutDefaultRules())
	}
	u, err := load.ParseUneven(fl.uneven)
	if err != nil {
		return nil, 0, 0, usageError("--tp-uneven: %v", err)
	}
	opts = append(opts, load.WithUneven(u))
	return opts, rank, world, nil
}

// loadProblem is exitFor, with tensor-parallel rules that do not
// fit the model counted as usage errors, and a file that changed while
// it was read as a failure to read it.
func loadProblem(loc string, err error) error {
	if errors.Is(err, load.ErrUneven) || errors.Is(err, load.ErrMisaligned) || errors.Is(err, load.ErrChanged) || errors.Is(err, load.ErrMisplaced) {
		return &exitError{Code: exitNoCheck, Err: err}
	}
	return exitFor(err)
}
