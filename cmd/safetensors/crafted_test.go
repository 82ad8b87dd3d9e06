package main

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
)

// Every crafted attack file (testdata/crafted/INDEX.json) gets its expected
// verdict from the CLI too, whatever its name, naming the expected globals;
// and inspect, get and convert refuse what scan does not call clean.
func TestCraftedThroughCLI(t *testing.T) {
	b, err := os.ReadFile("../../testdata/crafted/INDEX.json")
	if err != nil {
		t.Fatal(err)
	}
	var cases []struct {
		Name    string   `json:"name"`
		Verdict string   `json:"scan_verdict"`
		Globals []string `json:"globals"`
		Convert string   `json:"convert"`
	}
	if err := json.Unmarshal(b, &cases); err != nil {
		t.Fatal(err)
	}
	if len(cases) < 30 {
		t.Fatalf("%d cases", len(cases))
	}
	for _, c := range cases {
		path := "../../testdata/crafted/" + c.Name
		_, out, errOut := runCLI(t, "scan", "--json", path)
		var res []scanResult
		if err := json.Unmarshal([]byte(out), &res); err != nil || len(res) != 1 {
			t.Fatalf("%s: %v\n%s%s", c.Name, err, out, errOut)
		}
		r := res[0]
		if r.Verdict != c.Verdict {
			t.Errorf("%s: scan says %s, want %s (problems %v)", c.Name, r.Verdict, c.Verdict, r.Problems)
		}
		for _, g := range c.Globals {
			found := false
			for _, rg := range r.Globals {
				if rg.Module+"."+rg.Name == g {
					found = true
				}
			}
			if !found {
				t.Errorf("%s: scan does not name %s", c.Name, g)
			}
		}
		if c.Verdict != "clean" {
			if code, _, _ := runCLI(t, "inspect", path); code == 0 {
				t.Errorf("%s (%s): inspect accepted it", c.Name, c.Verdict)
			}
			if code, _, _ := runCLI(t, "get", path, "x"); code == 0 {
				t.Errorf("%s (%s): get accepted it", c.Name, c.Verdict)
			}
			if c.Verdict == "dangerous" {
				_, _, errOut := runCLI(t, "inspect", path)
				named := len(c.Globals) == 0
				for _, g := range c.Globals {
					named = named || strings.Contains(errOut, g)
				}
				if !named && !strings.Contains(errOut, "not allowed") && !strings.Contains(errOut, "refusing") {
					t.Errorf("%s: inspect's refusal does not say why: %s", c.Name, errOut)
				}
			}
		}
	}
}
