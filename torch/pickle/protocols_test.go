package pickle

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"os/exec"
	"sort"
	"strings"
	"testing"
)

// protocolsScript pickles a set of values with CPython's pickle in every
// protocol from 0 to 5 and prints each pickle with the description (as
// cpythonScript's d) of what CPython's C unpickler reads back from it.
const protocolsScript = pyDescribe + `
shared = ["shared"]
values = [
    None, True, False, 0, 1, -1, 255, 256, 65535, 65536, -2**31, 2**31 - 1, 2**31, 2**63 - 1, 2**63, -2**63 - 1, 2**200, -2**200,
    0.0, -0.0, 1.5, 1e308, float("inf"), float("-inf"), float("nan"),
    "", "a", "caf\u00e9", "\U0001F600", "\ud800", "x" * 300, "y" * 70000,
    b"", b"\x00\xff", b"z" * 300,
    (), (1,), (1, 2), (1, 2, 3), (1, 2, 3, 4), [], [1, [2, [3, []]]], {}, {"a": 1, "b": [1, 2]}, {1: "x", 2.5: "y", None: "z", True: "t"},
    [shared, shared, (shared,)], {"k": shared, "l": shared},
    list(range(20000)), {str(i): i for i in range(3000)},
]
out = []
for v in values:
    for proto in range(6):
        try:
            p = pickle.dumps(v, protocol=proto)
        except Exception:
            continue
        try:
            r = d(U(io.BytesIO(p), encoding="utf-8").load())
        except Exception:
            r = "error"
        out.append([p.hex(), r])
print(json.dumps(out))
`

func describeDict(d *Dict) string {
	parts := make([]string, d.Len())
	for i := range d.Keys {
		parts[i] = describeForCPython(d.Keys[i]) + "=" + describeForCPython(d.Values[i])
	}
	return "dict:" + strings.Join(parts, ",")
}

// TestProtocolsMatchCPython decodes what CPython's pickle writes for a
// set of values in protocols 0 to 5 (frames, memo references, every
// integer, string and container opcode a writer chooses) and requires what
// CPython's unpickler reads back.
func TestProtocolsMatchCPython(t *testing.T) {
	py := python(t)
	out, err := exec.Command(py, "-c", protocolsScript).Output()
	if err != nil {
		t.Fatalf("python3: %v", err)
	}
	var cases [][2]string
	if err := json.Unmarshal(out, &cases); err != nil || len(cases) < 200 {
		t.Fatalf("python3 output: %v (%d cases)", err, len(cases))
	}
	ops := map[string]bool{}
	for _, c := range cases {
		b, _ := hex.DecodeString(c[0])
		m := NewMachine(NewStream(bytes.NewReader(b), 0, int64(len(b))), Config{Limits: testLimits(), Policy: &testPolicy{}})
		v, err := m.Run()
		got := "error"
		if err == nil {
			got = describeForCPython(v)
		}
		if got != c[1] {
			t.Errorf("%.80q: ours %.200s, CPython %.200s", b, got, c[1])
		}
		seen := m.Opcodes()
		for i := range 256 {
			if seen.Has(Op(i)) {
				ops[Op(i).String()] = true
			}
		}
	}
	var names []string
	for n := range ops {
		names = append(names, n)
	}
	sort.Strings(names)
	if len(names) < 35 {
		t.Errorf("only %d opcodes exercised: %v", len(names), names)
	}
	t.Logf("%d pickles of protocols 0-5 read as CPython reads them, %d opcodes: %v", len(cases), len(names), names)
}
