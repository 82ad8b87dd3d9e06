package pickle

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"math/big"
	"os/exec"
	"strings"
	"testing"
)

// pyDescribe is the Python half of describeForCPython: an Unpickler whose
// find_class imports nothing, and d, which describes what it returns.
const pyDescribe = `
import json, pickle, struct, sys, io
class U(pickle.Unpickler):
    def find_class(self, m, n):
        return ("global", m, n)
def d(v):
    if v is None: return "None"
    if v is True or v is False: return "bool:" + str(v)
    if isinstance(v, int): return "int:" + str(v)
    if isinstance(v, float):
        if v != v: return "float:nan"
        return "float:" + struct.pack(">d", v).hex()
    if isinstance(v, str): return "str:" + v.encode("utf-8", "surrogatepass").hex()
    if isinstance(v, bytes): return "bytes:" + v.hex()
    if isinstance(v, tuple) and len(v) == 3 and v[0] == "global": return "global:" + v[1] + "." + v[2]
    if isinstance(v, (list, tuple)): return "seq:" + ",".join(d(x) for x in v)
    if isinstance(v, dict): return "dict:" + ",".join(d(k) + "=" + d(x) for k, x in v.items())
    return "other:" + type(v).__name__
`

// cpythonScript unpickles each case with CPython's C unpickler (find_class
// is overridden, so nothing is imported) and describes the result the way
// describeForCPython does.
const cpythonScript = pyDescribe + `
out = []
for h in json.load(sys.stdin):
    try:
        out.append(d(U(io.BytesIO(bytes.fromhex(h)), encoding="utf-8").load()))
    except Exception as e:
        out.append("error")
print(json.dumps(out))
`

func describeForCPython(v any) string {
	switch x := v.(type) {
	case nil:
		return "None"
	case bool:
		if x {
			return "bool:True"
		}
		return "bool:False"
	case int64:
		return fmt.Sprint("int:", x)
	case *big.Int:
		return "int:" + x.String()
	case float64:
		if math.IsNaN(x) {
			return "float:nan"
		}
		return fmt.Sprintf("float:%016x", math.Float64bits(x))
	case string:
		return "str:" + hex.EncodeToString([]byte(x))
	case []byte:
		return "bytes:" + hex.EncodeToString(x)
	case *testGlobal:
		return "global:" + x.module + "." + x.name
	case Tuple:
		return describeSeq(x)
	case *List:
		return describeSeq(x.Items)
	case *Dict:
		return describeDict(x)
	}
	return "other:" + TypeName(v)
}

func describeSeq(items []any) string {
	parts := make([]string, len(items))
	for i, it := range items {
		parts[i] = describeForCPython(it)
	}
	return "seq:" + strings.Join(parts, ",")
}

// textOpcodeCases builds protocol-0 pickles around every dialect of the
// text operands: bases, signs, blanks, underscores, NULs, overflow, bool
// spelling, float spellings, escapes and surrogates.
func textOpcodeCases() []string {
	var cases []string
	leads := []string{"", " ", "\t", "+", "-", " -", "\x0b"}
	bodies := []string{"0", "1", "00", "01", "07", "010", "0x10", "0X1f", "0x", "0o17", "0O7", "0b101", "0B1", "0b", "0o",
		"08", "09", "0_0", "0_7", "1_000", "1__0", "_1", "1_", "0x_1f", "0x__1", "12345678901234567890123456789",
		"9223372036854775807", "9223372036854775808", "18446744073709551616", "0777777777777777777777777",
		"0xffffffffffffffffffff", "٣", "1e3", "1.0", "", "+", "x", "\x00", "\x001", "1\x00", "00000000000000000000001"}
	tails := []string{"", " ", "\t", "\x00", "\x00junk", "L", "x", " \x00z"}
	for _, l := range leads {
		for _, b := range bodies {
			for _, tl := range tails {
				v := l + b + tl
				cases = append(cases, "I"+v+"\n.", "L"+v+"\n.", "L"+v+"L\n.")
				if len(v) < 12 {
					cases = append(cases, "I7\np"+v+"\n0g"+v+"\n.", "I7\np1\n0g"+v+"\n.")
				}
			}
		}
	}
	for _, f := range []string{"1.5", "-2e3", "inf", "-inf", "+inf", "Infinity", "INFINITY", "-infinity", "infinit", "infx",
		"nan", "-nan", "+NaN", "nan(1)", "1e", "1e+", "1E5", "1e-400", "1e999", "-1e999", ".5", "5.", ".", "e5", "0x1p-2",
		"1_0.5", "1.5e+3", " 1.5", "1.5 ", "+.5", "-.5e-3", "00.5", "1.5\x00x", "\x001", "", "-", "1.7976931348623157e308",
		"1.7976931348623159e308", "4.9e-324", "2.4703282292062328e-324", "0.1", "1e0000000000000000000000001"} {
		cases = append(cases, "F"+f+"\n.")
	}
	for _, s := range []string{`'a'`, `"a"`, `'a"`, `'`, `''`, `'\x41'`, `'\x4'`, `'\x4g'`, `'\101'`, `'\777'`, `'\q'`,
		`'\n\t\r\a\b\f\v'`, `'a'b'`, "'\\\n'", `'\xe9'`, `'\xc3\xa9'`, `'\xed\xa0\x80'`, "'caf\xc3\xa9'", `a`, `'a' `} {
		cases = append(cases, "S"+s+"\n.")
	}
	for _, s := range []string{`\u0041`, `\\u0041`, `\\\u0041`, `\U0001F600`, `\U00110000`, `\ud800`, `\uDFFF`, `\ud83d\ude00`,
		`\u004`, `\u00g1`, `a\Ub`, `\U`, "caf\xe9", "\xff", `\x41`, ``} {
		cases = append(cases, "V"+s+"\n.")
	}
	for _, b := range []string{"A", "\xc3\xa9", "\xed\xa0\x80", "\xed\xbf\xbf", "\xed\xa0\xbd\xed\xb8\x80", "\xf0\x9f\x98\x80", "\xc0\x80",
		"\xe0\x80\x80", "\xf4\x90\x80\x80", "\xed\xa0", "\xff", "a\x00b"} {
		cases = append(cases, "\x80\x02X"+string([]byte{byte(len(b)), 0, 0, 0})+b+".", "\x80\x04\x8c"+string([]byte{byte(len(b))})+b+".")
	}
	for _, g := range []string{"os\nsystem\n", "\nsystem\n", "os\n\n", "o\xffs\nx\n", "a.b\nc.d\n", "os \nsystem\n"} {
		cases = append(cases, "c"+g+".")
	}
	return cases
}

// TestTextOpcodesMatchCPython decodes every case with the machine and with
// python3's C unpickler and requires the same value or both refusing.
func TestTextOpcodesMatchCPython(t *testing.T) {
	py := python(t)
	cases := textOpcodeCases()
	hexes := make([]string, len(cases))
	for i, c := range cases {
		hexes[i] = hex.EncodeToString([]byte(c))
	}
	in, _ := json.Marshal(hexes)
	cmd := exec.Command(py, "-c", cpythonScript)
	cmd.Stdin = bytes.NewReader(in)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("python3: %v", err)
	}
	var want []string
	if err := json.Unmarshal(out, &want); err != nil || len(want) != len(cases) {
		t.Fatalf("python3 output: %v (%d results for %d cases)", err, len(want), len(cases))
	}
	bad := 0
	for i, c := range cases {
		v, err := decode([]byte(c))
		got := "error"
		if err == nil {
			got = describeForCPython(v)
		}
		if got != want[i] {
			bad++
			if bad <= 40 {
				t.Errorf("%q: ours %s, CPython %s", c, got, want[i])
			}
		}
	}
	if bad > 0 {
		t.Errorf("%d of %d cases differ", bad, len(cases))
	}
	errs := 0
	for _, w := range want {
		if w == "error" {
			errs++
		}
	}
	if errs == 0 || errs == len(want) {
		t.Fatalf("degenerate corpus: %d of %d refused", errs, len(want))
	}
	t.Logf("%d text-opcode cases agree with CPython (%d refused by both)", len(cases), errs)
}

// python returns python3's path, or skips the test saying so.
func python(t *testing.T) string {
	t.Helper()
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 not installed: the differential test against CPython's pickle does not run")
	}
	return py
}
