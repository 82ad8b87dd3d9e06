package load_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/gosafetensors/safetensors"
	"github.com/gosafetensors/safetensors/internal/pacedserver"
	"github.com/gosafetensors/safetensors/load"
	"github.com/gosafetensors/safetensors/remote"
	"github.com/gosafetensors/safetensors/source"
)

// TestTensorParallelBytes loads every rank of worlds of 1, 2 and 4 from a
// loopback server that counts the tensor-data bytes it sends: over all
// ranks they are the model once plus (world-1) times the replicated
// tensors (plus the few bytes past each header that opening a shard reads
// to detect its format), not world times the model, and each rank's parts
// are exactly the reference's slices.
func TestTensorParallelBytes(t *testing.T) {
	files, err := small.Model()
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var dataBytes int64
	dataStart := map[string]int64{}
	for name, f := range files {
		if g, ok := f.Content.(*pacedserver.Generated); ok {
			dataStart[name] = int64(len(g.Header))
		}
	}
	srv, err := pacedserver.Start(pacedserver.Config{OnRead: func(name string, off, n int64) {
		ds, ok := dataStart[name]
		if !ok {
			return
		}
		lo := max(off, ds)
		if hi := off + n; hi > lo {
			mu.Lock()
			dataBytes += hi - lo
			mu.Unlock()
		}
	}}, files)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	u := srv.URL + "/model.safetensors.index.json"
	ref := reference(t, u)
	var model int64
	for _, r := range ref {
		model += r.Size()
	}
	for _, world := range []int{1, 2, 4} {
		t.Run(fmt.Sprintf("world%d", world), func(t *testing.T) {
			mu.Lock()
			dataBytes = 0
			mu.Unlock()
			var replicated, loaded, moved, opened int64
			split := 0
			for rank := range world {
				// An 8-byte first request: the header is then read on
				// its own, and every data byte counted is the load's.
				l, err := load.Open(context.Background(), u, load.WithTensorParallel(rank, world), load.WithChunkSize(64<<10),
					load.WithSourceOptions(source.WithRemote(remote.WithPrefetch(8))))
				if err != nil {
					t.Fatal(err)
				}
				// Opening reads headers (and a little more: format
				// detection); count the load's bytes alone.
				mu.Lock()
				opened += dataBytes
				dataBytes = 0
				mu.Unlock()
				got, st := collect(t, l)
				mu.Lock()
				moved += dataBytes
				dataBytes = 0
				mu.Unlock()
				l.Close()
				if len(got) != len(ref) {
					t.Fatalf("rank %d: %d tensors, want %d", rank, len(got), len(ref))
				}
				for _, g := range got {
					expectPart(t, ref, g)
					if world > 1 && g.Split >= 0 {
						split++
					}
				}
				if rank == 0 {
					replicated = l.Replicated()
				} else if l.Replicated() != replicated {
					t.Fatalf("rank %d replicates %d bytes, rank 0 %d", rank, l.Replicated(), replicated)
				}
				loaded += st.Bytes
			}
			if perShard := opened / int64(world*small.Shards); perShard > 64<<10 {
				t.Errorf("opening read %d data bytes per shard", perShard)
			}
			t.Logf("world %d: the opens read %d data bytes per shard and rank", world, opened/int64(world*small.Shards))
			want := model + int64(world-1)*replicated
			// The loads deliver exactly the model plus the replicas; the
			// server sends those bytes once, and what the opens fetched
			// (cached by the readers, and counted above) at most once more.
			if loaded != want || moved+opened < want || moved+opened > want+opened {
				t.Fatalf("world %d: %d data bytes moved by the loads, %d by the opens, %d loaded; want model %d + %d × replicated %d = %d",
					world, moved, opened, loaded, model, world-1, replicated, want)
			}
			if world > 1 {
				// Only the norms are replicated in this model.
				if split != world*(len(ref)-2*int(small.Layers)-1) || replicated != (2*small.Layers+1)*small.Hidden*4 {
					t.Fatalf("%d split parts, %d bytes replicated", split, replicated)
				}
				if moved > model+model/10 {
					t.Fatalf("%d bytes moved for a %d-byte model and %d ranks", moved, model, world)
				}
			}
		})
	}
}

// tpModel writes a file with tensors shaped to exercise splits.
func tpModel(t *testing.T) (string, map[string]*safetensors.Tensor) {
	t.Helper()
	mk := func(name string, dt safetensors.DType, shape ...int64) safetensors.TensorData {
		n := int64(dt.Bits())
		for _, s := range shape {
			n *= s
		}
		b := make([]byte, n/8)
		for i := range b {
			b[i] = byte(i*7 + len(name))
		}
		return safetensors.TensorData{Name: name, DType: dt, Shape: shape, Data: b}
	}
	path := filepath.Join(t.TempDir(), "tp.safetensors")
	err := safetensors.WriteFile(path, []safetensors.TensorData{
		mk("a.q_proj.weight", safetensors.F32, 5, 4),
		mk("a.o_proj.weight", safetensors.F16, 4, 6),
		mk("a.o_proj.bias", safetensors.F16, 4),
		mk("a.experts", safetensors.BF16, 3, 4, 8),
		mk("a.q_proj.bias", safetensors.F32, 6),
		mk("f4.q_proj.weight", safetensors.F4, 2, 3),
		mk("scalar.q_proj.weight", safetensors.F32),
		mk("empty.q_proj.weight", safetensors.F32, 0, 4),
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return path, reference(t, path)
}

func loadParts(t *testing.T, path string, opts ...load.Option) (map[string]*load.Tensor, error) {
	t.Helper()
	l, err := load.Open(context.Background(), path, opts...)
	if err != nil {
		return nil, err
	}
	defer l.Close()
	got := map[string]*load.Tensor{}
	var mu sync.Mutex
	_, err = l.Load(context.Background(), func(tt *load.Tensor) error {
		mu.Lock()
		got[tt.Name] = tt
		mu.Unlock()
		return nil
	})
	return got, err
}

func TestTensorParallelRules(t *testing.T) {
	path, ref := tpModel(t)
	// Uneven: a.q_proj.weight has 5 rows.
	_, err := loadParts(t, path, load.WithTensorParallel(1, 2), load.WithFilter("a.*"))
	if !errors.Is(err, load.ErrUneven) || !strings.Contains(err.Error(), "a.q_proj.weight") {
		t.Fatalf("uneven split: %v, want ErrUneven naming the tensor", err)
	}
	// A sub-byte part that does not start on a byte.
	_, err = loadParts(t, path, load.WithTensorParallel(1, 2), load.WithFilter("f4.*"))
	if !errors.Is(err, load.ErrMisaligned) {
		t.Fatalf("F4 split: %v, want ErrMisaligned", err)
	}
	type want struct {
		split       load.Split
		start, stop int64
	}
	for _, tc := range []struct {
		name        string
		rank, world int
		opts        []load.Option
		want        map[string]want
	}{
		{"chunk-rank1of2", 1, 2, []load.Option{load.WithUneven(load.Chunk), load.WithFilter("a.*", "scalar", "empty")}, map[string]want{
			"a.q_proj.weight": {load.Rows, 3, 5}, "a.o_proj.weight": {load.Cols, 3, 6}, "a.o_proj.bias": {load.Replicate, 0, 0},
			"a.experts": {load.Replicate, 0, 0}, "a.q_proj.bias": {load.Rows, 3, 6},
			"scalar.q_proj.weight": {load.Replicate, 0, 0}, "empty.q_proj.weight": {load.Rows, 0, 0},
		}},
		{"chunk-rank3of4", 3, 4, []load.Option{load.WithUneven(load.Chunk), load.WithFilter("a.*")}, map[string]want{
			// torch.chunk(5 rows, 4) gives 2, 2, 1 and (6 columns, 4)
			// 2, 2, 2: the fourth rank has none.
			"a.q_proj.weight": {load.Rows, 5, 5}, "a.o_proj.weight": {load.Cols, 6, 6}, "a.q_proj.bias": {load.Rows, 6, 6},
			"a.o_proj.bias": {load.Replicate, 0, 0}, "a.experts": {load.Replicate, 0, 0},
		}},
		{"rules", 1, 2, []load.Option{load.WithRules(load.Rule{Pattern: "a.experts", Split: load.Dim(2)}, load.Rule{Pattern: "*.o_proj.*", Split: load.Rows}), load.WithFilter("a.experts", "a.o_proj")}, map[string]want{
			"a.experts": {load.Dim(2), 4, 8}, "a.o_proj.weight": {load.Rows, 2, 4}, "a.o_proj.bias": {load.Rows, 2, 4},
		}},
		{"no-defaults", 0, 2, []load.Option{load.WithoutDefaultRules(), load.WithRules(load.Rule{Pattern: "a.experts", Split: load.Cols}), load.WithFilter("a.")}, map[string]want{
			"a.experts": {load.Cols, 0, 2}, "a.o_proj.weight": {load.Replicate, 0, 0}, "a.q_proj.bias": {load.Replicate, 0, 0},
			"a.o_proj.bias": {load.Replicate, 0, 0}, "a.q_proj.weight": {load.Replicate, 0, 0},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := loadParts(t, path, append(tc.opts, load.WithTensorParallel(tc.rank, tc.world))...)
			if err != nil {
				t.Fatal(err)
			}
			for name, w := range tc.want {
				g := got[name]
				if g == nil {
					t.Fatalf("%s not loaded", name)
				}
				if g.Split != w.split || (w.split >= 0 && (g.Start != w.start || g.Stop != w.stop)) {
					t.Errorf("%s: split %v %d:%d, want %v %d:%d", name, g.Split, g.Start, g.Stop, w.split, w.start, w.stop)
				}
				expectPart(t, ref, g)
			}
			if len(got) != len(tc.want) {
				t.Errorf("%d tensors loaded, want %d", len(got), len(tc.want))
			}
		})
	}
}

func TestParseRule(t *testing.T) {
	for s, want := range map[string]load.Rule{
		"*.q_proj.weight=rows": {Pattern: "*.q_proj.weight", Split: load.Rows},
		"a=b=cols":             {Pattern: "a=b", Split: load.Cols},
		"x=replicate":          {Pattern: "x", Split: load.Replicate},
		"x=dim3":               {Pattern: "x", Split: load.Dim(3)},
	} {
		r, err := load.ParseRule(s)
		if err != nil || r != want {
			t.Errorf("ParseRule(%q) = %v, %v; want %v", s, r, err, want)
		}
		if r.String() != s && !strings.HasSuffix(s, "=dim3") {
			t.Errorf("%v.String() = %q, want %q", r, r.String(), s)
		}
	}
	for _, s := range []string{"=rows", "x", "x=sideways", "[=rows", "x=dim", "x=dim-1", "x=dim07"} {
		if _, err := load.ParseRule(s); !errors.Is(err, load.ErrOption) {
			t.Errorf("ParseRule(%q): %v, want ErrOption", s, err)
		}
	}
	if u, err := load.ParseUneven("chunk"); err != nil || u != load.Chunk {
		t.Errorf("ParseUneven: %v %v", u, err)
	}
}

func TestDefaultRulesNames(t *testing.T) {
	// The defaults split the Llama names the way Megatron does.
	g, _, err := pacedserver.NewGenerated("m", pacedserver.ModelSpec{Hidden: 8, Intermediate: 16, Layers: 1, Vocab: 4}.Tensors())
	if err != nil {
		t.Fatal(err)
	}
	r, err := safetensors.NewReader(g, g.Size)
	if err != nil {
		t.Fatal(err)
	}
	l, err := load.New(r, load.WithTensorParallel(0, 2))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]load.Split{
		"model.embed_tokens.weight": load.Rows, "lm_head.weight": load.Rows, "model.norm.weight": load.Replicate,
		"model.layers.0.self_attn.q_proj.weight": load.Rows, "model.layers.0.self_attn.k_proj.weight": load.Rows,
		"model.layers.0.self_attn.v_proj.weight": load.Rows, "model.layers.0.self_attn.o_proj.weight": load.Cols,
		"model.layers.0.mlp.gate_proj.weight": load.Rows, "model.layers.0.mlp.up_proj.weight": load.Rows,
		"model.layers.0.mlp.down_proj.weight": load.Cols, "model.layers.0.input_layernorm.weight": load.Replicate,
		"model.layers.0.post_attention_layernorm.weight": load.Replicate,
	}
	for _, p := range l.Parts() {
		if w, ok := want[p.Name]; !ok || p.Split != w {
			t.Errorf("%s: %v, want %v", p.Name, p.Split, w)
		}
	}
}
