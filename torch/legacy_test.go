package torch

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestLegacyRefusals(t *testing.T) {
	orig, err := os.ReadFile(filepath.Join(testdata, "torch", "tied_weights_legacy.pt"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := openBytes(t, orig); err != nil {
		t.Fatal(err)
	}
	patch := func(old, new string) []byte {
		b := bytes.Replace(append([]byte(nil), orig...), []byte(old), []byte(new), 1)
		if bytes.Equal(b, orig) {
			t.Fatalf("pattern %q not found", old)
		}
		return b
	}
	cases := []struct {
		name string
		b    []byte
		kind error
	}{
		{"protocol", patch("\x80\x02M\xe9\x03.", "\x80\x02M\xea\x03."), ErrUnsupported},
		{"broken pid tuple", patch("K(N", "K(K"), ErrCorrupt},
		{"truncated storages", orig[:len(orig)-1], ErrCorrupt},
		{"unknown key", patch("X\t\x00\x00\x00842154240q\x01", "X\t\x00\x00\x00842154241q\x01"), ErrCorrupt},
	}
	for _, c := range cases {
		if _, err := openBytes(t, c.b); !errors.Is(err, c.kind) {
			t.Errorf("%s: got %v, want %v", c.name, err, c.kind)
		}
	}
	// torch.load ignores sys_info (and reads the data in native, little
	// endian order): little_endian False, 1 or a missing dict change nothing
	for name, b := range map[string][]byte{
		"little_endian False": patch("little_endianq\x02\x88", "little_endianq\x02\x89"),
		"little_endian 1":     patch("little_endianq\x02\x88", "little_endianq\x02K\x01"),
	} {
		if c, err := openBytes(t, b); err != nil || len(c.Tensors()) == 0 {
			t.Errorf("%s: %v", name, err)
		}
	}
}
