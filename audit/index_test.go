package audit_test

import (
	"path/filepath"
	"reflect"
	"testing"

	"github.com/gosafetensors/safetensors/audit"
	"github.com/gosafetensors/safetensors/source"
)

// A model's index is not a pickle: scanning it scans the model, one report
// per shard (issue 14.4), locally, over HTTP and from a Hub repository.
func TestScanIndexScansShards(t *testing.T) {
	binDir := binModel(t)
	stDir, stShards := safetensorsModel(t)
	wantBin := func(prefix string) map[string]string {
		return map[string]string{
			prefix + "pytorch_model-00001-of-00002.bin": "clean",
			prefix + "pytorch_model-00002-of-00002.bin": "dangerous",
		}
	}
	wantST := func(prefix string) map[string]string {
		m := map[string]string{}
		for _, s := range stShards {
			m[prefix+s] = "clean"
		}
		return m
	}
	binHTTP := serveDir(t, binDir)
	stHTTP := serveDir(t, stDir)
	_, binHub := serveHub(t, binDir)
	stHubSrv, stHub := serveHub(t, stDir)
	for _, tc := range []struct {
		name string
		loc  string
		opts []audit.Option
		want map[string]string
	}{
		{"local bin index", filepath.Join(binDir, "pytorch_model.bin.index.json"), nil, wantBin(binDir + "/")},
		{"local safetensors index", filepath.Join(stDir, "model.safetensors.index.json"), nil, wantST(stDir + "/")},
		{"http bin index", binHTTP.URL + "/pytorch_model.bin.index.json", nil, wantBin(binHTTP.URL + "/")},
		{"http safetensors index", stHTTP.URL + "/model.safetensors.index.json", nil, wantST(stHTTP.URL + "/")},
		{"hub repo", "hf://org/model", []audit.Option{audit.WithSource(source.WithHub(stHub))}, wantST("hf://org/model/")},
		{"hub index", "hf://org/model/pytorch_model.bin.index.json", []audit.Option{audit.WithSource(source.WithHub(binHub))}, wantBin("hf://org/model/")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reports := scanAll(t, tc.loc, tc.opts...)
			if got := verdicts(reports); !reflect.DeepEqual(got, tc.want) {
				for _, r := range reports {
					t.Logf("%s: %s %s %v", r.Path, r.Verdict, r.Error, r.Problems)
				}
				t.Fatalf("scan %s:\n got %v\nwant %v", tc.loc, got, tc.want)
			}
			for _, r := range reports {
				if r.Format == audit.FormatIndex || r.Format == audit.FormatUnknown {
					t.Errorf("%s: format %s", r.Path, r.Format)
				}
			}
		})
	}
	// every shard of the Hub repository was read at the commit the index
	// was read at, not at the branch
	if revs := stHubSrv.Requests(); revs["main"] != 1 || revs[hubCommit] < len(stShards) {
		t.Errorf("Hub requests by revision %v: want the index at main once, each shard at the commit", revs)
	}
}

// An index that is not a valid index is reported as itself; an index
// reached by listing a bucket prefix is reported as itself too (its shards
// are listed beside it), as clean JSON, not as a broken pickle.
func TestScanIndexAsItself(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "model.safetensors.index.json"), `{"weight_map": {"a": "../escape.safetensors"}}`)
	r := scanAll(t, filepath.Join(dir, "model.safetensors.index.json"))
	if len(r) != 1 || r[0].Verdict != audit.Invalid || r[0].Format != audit.FormatIndex || len(r[0].Problems) != 1 {
		t.Fatalf("broken index: %+v", r[0])
	}
	binDir := binModel(t)
	abs, _ := filepath.Abs(binDir)
	got := verdicts(scanAll(t, "file://"+filepath.ToSlash(abs)+"/"))
	if len(got) != 3 || got["file://"+abs+"/pytorch_model.bin.index.json"] != "clean" || got["file://"+abs+"/pytorch_model-00002-of-00002.bin"] != "dangerous" {
		t.Fatalf("bucket prefix: %v", got)
	}
	for _, rep := range scanAll(t, "file://"+filepath.ToSlash(abs)+"/") {
		if rep.Path == "file://"+abs+"/pytorch_model.bin.index.json" && rep.Format != audit.FormatIndex {
			t.Errorf("listed index: format %s", rep.Format)
		}
	}
}

// A shard the index names that is missing is reported as not checked,
// under its own name, and the other shards are still scanned.
func TestScanIndexMissingShard(t *testing.T) {
	dir := binModel(t)
	writeFile(t, filepath.Join(dir, "pytorch_model.bin.index.json"), `{"weight_map": {"a": "pytorch_model-00001-of-00002.bin", "b": "gone.bin"}}`)
	got := verdicts(scanAll(t, filepath.Join(dir, "pytorch_model.bin.index.json")))
	want := map[string]string{filepath.Join(dir, "gone.bin"): "error", filepath.Join(dir, "pytorch_model-00001-of-00002.bin"): "clean"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
}
