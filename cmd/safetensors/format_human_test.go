package main

import "testing"

func TestHumanCount(t *testing.T) {
	for n, want := range map[int64]string{
		0:                 "0",
		1:                 "1",
		999:               "999",
		1000:              "1.00K",
		1500:              "1.50K",
		1234:              "1.23K",
		99_950:            "100K",
		999_999:           "1.00M",
		137_022_464:       "137M",
		8_030_261_248:     "8.03B",
		7_241_732_096:     "7.24B",
		124_439_808:       "124M",
		70_553_706_496:    "70.6B",
		1_000_000_000_000: "1.00T",
	} {
		if got := humanCount(n); got != want {
			t.Errorf("humanCount(%d) = %q, want %q", n, got, want)
		}
	}
}

func TestHumanBytes(t *testing.T) {
	for n, want := range map[int64]string{
		0:              "0 B",
		1023:           "1023 B",
		1024:           "1.0 KiB",
		1536:           "1.5 KiB",
		1048575:        "1.0 MiB",
		1288490189:     "1.2 GiB",
		16_060_522_496: "15.0 GiB",
	} {
		if got := humanBytes(n); got != want {
			t.Errorf("humanBytes(%d) = %q, want %q", n, got, want)
		}
	}
}

func TestGroupDigitsAndDisplay(t *testing.T) {
	for n, want := range map[int64]string{0: "0", 999: "999", 1000: "1,000", 137022464: "137,022,464", -1234: "-1,234"} {
		if got := groupDigits(n); got != want {
			t.Errorf("groupDigits(%d) = %q, want %q", n, got, want)
		}
	}
	if got := display("a\x1b[2Jb"); got != `"a\x1b[2Jb"` {
		t.Errorf("display did not quote a control sequence: %q", got)
	}
	if got := display("model.layers.0.weight"); got != "model.layers.0.weight" {
		t.Errorf("display changed a plain name: %q", got)
	}
	if got := formatShape(nil); got != "[]" {
		t.Errorf("formatShape(nil) = %q", got)
	}
}

func TestParseSize(t *testing.T) {
	for in, want := range map[string]int64{"1048576": 1 << 20, "512MiB": 512 << 20, "200GB": 200e9, "2 TiB": 2 << 40, "-1": -1, "10B": 10, "1.5GiB": 3 << 29} {
		if got, err := parseSize(in); err != nil || got != want {
			t.Errorf("parseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "0", "-5", "abc", "9999999999TiB"} {
		if _, err := parseSize(in); err == nil {
			t.Errorf("parseSize(%q) accepted", in)
		}
	}
}

func TestPlural(t *testing.T) {
	for _, c := range []struct {
		n    int64
		noun string
		want string
	}{
		{1, "entry", "1 entry"}, {3, "entry", "3 entries"}, {2, "tied alias", "2 tied aliases"},
		{0, "tensor", "0 tensors"}, {1024, "shard", "1,024 shards"}, {2, "key", "2 keys"}, {2, "zip member", "2 zip members"},
	} {
		if got := plural(c.n, c.noun); got != c.want {
			t.Errorf("plural(%d, %q) = %q, want %q", c.n, c.noun, got, c.want)
		}
	}
}
