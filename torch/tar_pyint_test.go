package torch

import (
	"bytes"
	"encoding/json"
	"os/exec"
	"testing"
)

// pyInt parses pax numbers as Python's int(str) does, Unicode digits and
// whitespace included: a pax size of "１０２４" (fullwidth) moved the next
// header for tarfile but not for us (red-team round 6). Checked against
// python3 where it is installed.
func TestPyIntMatchesPython(t *testing.T) {
	cases := []string{"１０２４", "\u0661\u0662", "\u0967\u0966", "\u00a012\u2003", " 1_000 ", "12\u00a0",
		"1\u2003 2", "𝟏𝟎", "\U0001D7D8\U0001D7E2", "x12", "٣", "1e3", "-５", "+\u06f7", "\u1040\u1041",
		"\u30009\u3000", "\u200b1", "\x1c5\x1f", "\u0b66\u0b67", "0x10", "007", "1__0", "_1", "", " ", "\xff1"}
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 not installed")
	}
	in, _ := json.Marshal(cases)
	script := `import json, sys
out = []
for c in json.load(sys.stdin):
    try: out.append(int(c))
    except Exception: out.append(None)
print(json.dumps(out))`
	cmd := exec.Command(py, "-c", script)
	cmd.Stdin = bytes.NewReader(in)
	outb, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	var want []*int64
	if err := json.Unmarshal(outb, &want); err != nil {
		t.Fatal(err)
	}
	for i, c := range cases {
		got, ok := pyInt(c)
		switch {
		case want[i] == nil && ok:
			t.Errorf("pyInt(%q) = %d, Python raises", c, got)
		case want[i] != nil && (!ok || got != *want[i]):
			t.Errorf("pyInt(%q) = %d, %v; Python gives %d", c, got, ok, *want[i])
		}
	}
}
