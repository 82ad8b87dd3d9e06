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
		{"big endian", patch("little_endianq\x02\x88", "little_endianq\x02\x89"), ErrUnsupported},
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
}
