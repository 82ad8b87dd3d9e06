package torch

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os/exec"
	"testing"
)

const tarfileScript = `
import io, json, sys, tarfile
out = []
for h in json.load(sys.stdin):
    b = bytes.fromhex(h)
    try:
        t = tarfile.open(fileobj=io.BytesIO(b), mode="r:")
        out.append("ok")
    except tarfile.TarError:
        out.append("tarerror")
    except Exception as e:
        out.append("other")
print(json.dumps(out))
`

// tarHeaderCases varies every field tarfile checks in the first header:
// checksum (unsigned, signed, wrong, base-256, blanks), the numeric fields
// (octal with NUL/space termination, leading blanks, 0o prefix,
// underscores, signs, base-256, non-octal, non-ASCII), and type flags.
func tarHeaderCases() [][]byte {
	nums := []string{"0000644\x00", "644", " 644 ", "\x00garbage", "0o644", "0o6_44", "6__44", "_644", "644_", "+644", "-644",
		"-0o7", "648", "64 4", "\t644\x0b", "\x80\x00\x00\x00\x00\x00\x01\x00", "\xff\xff\xff\xff\xff\xff\xff\xff", "6\xe94",
		"0x10", "\x1c644\x1f", "", "        ", "0O7", "0o", "0_7"}
	var cases [][]byte
	base := func() []byte {
		b := make([]byte, tarBlock)
		copy(b, "member")
		copy(b[100:], "0000644\x00")
		copy(b[124:], "00000000000\x00")
		b[156] = '0'
		return b
	}
	for _, field := range [][2]int{{100, 108}, {108, 116}, {124, 136}, {136, 148}, {329, 337}, {337, 345}} {
		for _, n := range nums {
			b := base()
			copy(b[field[0]:field[1]], make([]byte, field[1]-field[0]))
			copy(b[field[0]:field[1]], n)
			for _, signed := range []bool{false, true} {
				c := append([]byte(nil), b...)
				setTarChecksum(c, signed)
				cases = append(cases, c)
			}
		}
	}
	for _, hi := range []bool{false, true} {
		for _, mode := range []string{"unsigned", "signed", "off", "blank", "b256", "spaces", "lead"} {
			b := base()
			if hi {
				b[20], b[400] = 0xe9, 0xff
			}
			var u, s int64 = 256, 256
			for i, c := range b {
				if i < 148 || i >= 156 {
					u += int64(c)
					s += int64(int8(c))
				}
			}
			switch mode {
			case "unsigned":
				copy(b[148:], fmt.Sprintf("%06o\x00 ", u))
			case "signed":
				copy(b[148:], fmt.Sprintf("%06o\x00 ", s))
			case "off":
				copy(b[148:], fmt.Sprintf("%06o\x00 ", u+1))
			case "blank":
				copy(b[148:], "        ")
			case "b256":
				b[148] = 0x80
				copy(b[149:], []byte{0, 0, 0, 0, byte(u >> 16), byte(u >> 8), byte(u)})
			case "spaces":
				copy(b[148:], fmt.Sprintf("  %o  ", u))
			case "lead":
				copy(b[148:], fmt.Sprintf("0o%o\x00", u))
			}
			cases = append(cases, b)
		}
	}
	cases = append(cases, make([]byte, tarBlock), make([]byte, 100))
	for _, typ := range []byte{0, '0', '1', '2', '5', '7', 'g', 'Z', 0xff} {
		b := base()
		b[156] = typ
		setTarChecksum(b, false)
		cases = append(cases, b)
	}
	return cases
}

// TestTarHeaderMatchesPython checks isTarStart against Python's own
// tarfile.open(mode="r:") on the same bytes (followed by end-of-archive
// blocks). Skipped without python3.
func TestTarHeaderMatchesPython(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 not installed")
	}
	cases := tarHeaderCases()
	hexes := make([]string, len(cases))
	files := make([][]byte, len(cases))
	for i, c := range cases {
		files[i] = append(append([]byte(nil), c...), make([]byte, 2*tarBlock)...)
		hexes[i] = hex.EncodeToString(files[i])
	}
	in, _ := json.Marshal(hexes)
	cmd := exec.Command(py, "-c", tarfileScript)
	cmd.Stdin = bytes.NewReader(in)
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	if err := json.Unmarshal(out, &want); err != nil || len(want) != len(cases) {
		t.Fatalf("python3: %v", err)
	}
	oks := 0
	for i, f := range files {
		got := isTarStart(bytes.NewReader(f), int64(len(f)))
		if got {
			oks++
		}
		if got != (want[i] != "tarerror") {
			t.Errorf("case %d %q...: isTarStart %v, tarfile %s", i, cases[i][min(100, len(cases[i])):min(160, len(cases[i]))], got, want[i])
		}
	}
	if oks == 0 || oks == len(files) {
		t.Fatalf("degenerate corpus: %d of %d accepted", oks, len(files))
	}
	t.Logf("%d tar headers agree with Python's tarfile (%d accepted)", len(files), oks)
}
