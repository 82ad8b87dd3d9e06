package audit_test

// Scan soundness on polyglots, judged by real torch: mutants of files that
// are another format whose first bytes torch.load reads as a pickle
// (internal/torchoracle.PolyglotMutant) are scanned as scan scans any file
// (audit.ScanReader: by content, validated, judged as torch would) and
// handed to torch.load under the oracle's audit hook. On every mutant:
//   - when scan says clean, torch asked for no importable global off the
//     allowlist, and its backstop saw nothing;
//   - when torch asked for an importable global off the allowlist, scan
//     names it;
//   - a valid safetensors file of the plain family (random header length,
//     payload pickles in tensor data torch never reads) from which torch
//     asked for nothing is clean: no false alarms on real models.
// GOSAFETENSORS_ORACLE_MUTANTS sets how many (default 40), as for
// torch.TestScanSoundnessOracle; GOSAFETENSORS_ORACLE_SEED the seed.

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/gosafetensors/safetensors"
	"github.com/gosafetensors/safetensors/audit"
	"github.com/gosafetensors/safetensors/compressed"
	"github.com/gosafetensors/safetensors/internal/torchoracle"
)

func TestPolyglotOracle(t *testing.T) {
	n := torchoracle.Count(t, "GOSAFETENSORS_ORACLE_MUTANTS", 40)
	seed := uint64(torchoracle.Count(t, "GOSAFETENSORS_ORACLE_SEED", 1))
	if n == 0 {
		t.Skip("GOSAFETENSORS_ORACLE_MUTANTS=0")
	}
	o := torchoracle.Require(t, torchoracle.Options{Allow: torchoracle.ScanAllowlist})
	ctx := context.Background()
	base := smallST(0x40, oneTensor)
	var zst bytes.Buffer
	if _, err := compressed.Compress(ctx, &zst, bytes.NewReader(base), int64(len(base))); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	stats := map[string]int{}
	var failures []string
	for i := range n {
		data, kind, desc := torchoracle.PolyglotMutant(seed, i, zst.Bytes())
		path := filepath.Join(dir, fmt.Sprintf("polyglot-%d-%d", seed, i))
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		r := audit.ScanReader(ctx, path, bytes.NewReader(data), int64(len(data)))
		res, err := o.Load(path)
		os.Remove(path)
		if err != nil {
			t.Fatalf("mutant %d: oracle: %v", i, err)
		}
		var refused []string
		for _, g := range res.Refused {
			if torchoracle.ImportableGlobal(g) {
				refused = append(refused, g)
			}
		}
		_, stErr := safetensors.NewReader(bytes.NewReader(data), int64(len(data)))
		stats[fmt.Sprintf("%s: scan %s", kind, r.Verdict)]++
		if len(refused) > 0 {
			stats[kind+": torch refused a global"]++
		}
		fail := ""
		switch {
		case r.Verdict == audit.Error:
			fail = "scan could not check it: " + r.Error
		case len(res.Events) > 0:
			fail = fmt.Sprintf("the oracle's backstop fired: %v", res.Events)
		case r.Verdict == audit.Clean && len(refused) > 0:
			fail = fmt.Sprintf("scan says clean (%s), torch asked for %v", r.Format, refused)
		case kind == torchoracle.PolyglotPlain && stErr == nil && len(refused) == 0 && r.Verdict != audit.Clean:
			fail = fmt.Sprintf("a valid safetensors file torch takes nothing from is %s: %v %q", r.Verdict, r.Globals, r.Problems)
		}
		for _, g := range refused {
			if !slices.ContainsFunc(r.Globals, func(x audit.Global) bool { return x.String() == g && x.Verdict != audit.Allowed }) {
				fail += fmt.Sprintf("; torch asked for %s, scan (%s) does not name it", g, r.Verdict)
			}
		}
		if fail != "" {
			failures = append(failures, fmt.Sprintf("mutant %d of seed %d (%s: %s): %s", i, seed, kind, desc, fail))
		}
	}
	keys := make([]string, 0, len(stats))
	for k := range stats {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		t.Logf("%-45s %d", k, stats[k])
	}
	for _, f := range failures {
		t.Error(f)
	}
	// the differential must see torch run something in each family that
	// can, and clean files, or it proves nothing
	if n >= 40 {
		for _, k := range []string{torchoracle.PolyglotHeaderName + ": torch refused a global", torchoracle.PolyglotSkippable + ": torch refused a global", torchoracle.PolyglotPlain + ": scan clean"} {
			if stats[k] == 0 {
				t.Errorf("%d mutants, none with %q: %v", n, k, strings.Join(keys, ", "))
			}
		}
	}
}

// TestHeaderCallOracle: valid safetensors files shaped like real models
// whose header length's bytes, and the header JSON after them, are opcodes
// that act on builtin values (internal/torchoracle.HeaderCallMutant),
// judged by real torch. Where torch asks for nothing off the allowlist,
// scan must say clean and validate must accept the file (CPython raises at
// such a call having imported nothing: a false alarm there fails a CI gate
// on a real model); where torch asks for a global, scan must name it.
// GOSAFETENSORS_ORACLE_MUTANTS sets how many (default 40).
func TestHeaderCallOracle(t *testing.T) {
	n := torchoracle.Count(t, "GOSAFETENSORS_ORACLE_MUTANTS", 40)
	seed := uint64(torchoracle.Count(t, "GOSAFETENSORS_ORACLE_SEED", 1))
	if n == 0 {
		t.Skip("GOSAFETENSORS_ORACLE_MUTANTS=0")
	}
	o := torchoracle.Require(t, torchoracle.Options{Allow: torchoracle.ScanAllowlist})
	ctx := context.Background()
	dir := t.TempDir()
	stats := map[string]int{}
	for i := range n {
		data, desc := torchoracle.HeaderCallMutant(seed, i)
		path := filepath.Join(dir, fmt.Sprintf("headercall-%d-%d.safetensors", seed, i))
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		r := audit.ScanReader(ctx, path, bytes.NewReader(data), int64(len(data)))
		var v *audit.ValidateReport
		for x := range audit.Validate(ctx, path) {
			v = x
		}
		res, err := o.Load(path)
		os.Remove(path)
		if err != nil {
			t.Fatalf("mutant %d: oracle: %v", i, err)
		}
		var refused []string
		for _, g := range res.Refused {
			if torchoracle.ImportableGlobal(g) {
				refused = append(refused, g)
			}
		}
		stats[fmt.Sprintf("scan %s", r.Verdict)]++
		if len(res.Globals) > 0 {
			stats["torch asked for a global"]++
		}
		what := fmt.Sprintf("mutant %d of seed %d (%s)", i, seed, desc)
		if len(res.Events) > 0 {
			t.Errorf("%s: the oracle's backstop fired: %v", what, res.Events)
		}
		if len(refused) == 0 && r.Verdict != audit.Clean {
			t.Errorf("%s: torch takes nothing from it (%s), but scan says %s: %v %v %q", what, res.Error, r.Verdict, r.Globals, r.DangerousOpcodes, r.Problems)
		}
		if _, err := safetensors.NewReader(bytes.NewReader(data), int64(len(data))); err != nil {
			t.Fatalf("%s: the generator made an invalid file: %v", what, err)
		}
		if len(refused) == 0 && (v == nil || !v.Valid) {
			t.Errorf("%s: torch takes nothing from it, but validate refuses it: %+v", what, v)
		}
		for _, g := range refused {
			if !slices.ContainsFunc(r.Globals, func(x audit.Global) bool { return x.String() == g && x.Verdict != audit.Allowed }) {
				t.Errorf("%s: torch asked for %s, scan (%s) does not name it", what, g, r.Verdict)
			}
		}
	}
	keys := make([]string, 0, len(stats))
	for k := range stats {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		t.Logf("%-30s %d", k, stats[k])
	}
}
