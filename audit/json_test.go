package audit_test

import (
	"bytes"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/gosafetensors/safetensors/audit"
)

// The streamed array is byte for byte what marshalling the whole array
// prints (scan: json.MarshalIndent; validate: an Encoder that does not
// escape HTML), for no, one and several elements.
func TestReportWriterBytes(t *testing.T) {
	reports := scanAll(t, "../testdata/malicious/")
	if len(reports) < 3 {
		t.Fatalf("%d reports", len(reports))
	}
	reports[0].Problems = append(reports[0].Problems, "<html> & \u2028")
	for _, n := range []int{0, 1, len(reports)} {
		var got bytes.Buffer
		w := audit.NewScanWriter(&got)
		for _, r := range reports[:n] {
			if err := w.Write(r); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		arr := reports[:n:n]
		if arr == nil {
			arr = []*audit.ScanReport{}
		}
		want, err := json.MarshalIndent(arr, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		if want = append(want, '\n'); !bytes.Equal(got.Bytes(), want) {
			t.Fatalf("%d reports:\n%s\nwant\n%s", n, got.Bytes(), want)
		}
	}
	var vals []*audit.ValidateReport
	for r := range audit.Validate(t.Context(), "../testdata/safetensors/files/") {
		vals = append(vals, r)
	}
	var got, want bytes.Buffer
	w := audit.NewValidateWriter(&got)
	for _, r := range vals {
		w.Write(r)
	}
	w.Close()
	enc := json.NewEncoder(&want)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	enc.Encode(vals)
	if !bytes.Equal(got.Bytes(), want.Bytes()) || len(vals) < 50 {
		t.Fatalf("validate array differs (%d reports)", len(vals))
	}
	if err := w.Write(vals[0]); err == nil {
		t.Fatal("Write after Close succeeded")
	}
}

// Every enum marshals to its documented name and back; an unknown name is
// an error, not a zero value.
func TestEnumsText(t *testing.T) {
	type text interface {
		MarshalText() ([]byte, error)
		String() string
	}
	check := func(v text, back func([]byte) (string, error)) {
		b, err := v.MarshalText()
		if err != nil || string(b) != v.String() {
			t.Errorf("%v: %q %v", v, b, err)
		}
		if s, err := back(b); err != nil || s != v.String() {
			t.Errorf("%v: back %q %v", v, s, err)
		}
	}
	for v := audit.Clean; v <= audit.Error; v++ {
		check(v, func(b []byte) (string, error) { var x audit.Verdict; err := x.UnmarshalText(b); return x.String(), err })
	}
	for _, f := range audit.Formats() {
		check(f, func(b []byte) (string, error) { var x audit.Format; err := x.UnmarshalText(b); return x.String(), err })
	}
	for g := audit.Allowed; g <= audit.NotAllowed; g++ {
		check(g, func(b []byte) (string, error) {
			var x audit.GlobalVerdict
			err := x.UnmarshalText(b)
			return x.String(), err
		})
	}
	for s := audit.OK; s <= audit.Unreadable; s++ {
		check(s, func(b []byte) (string, error) { var x audit.Status; err := x.UnmarshalText(b); return x.String(), err })
	}
	var v audit.Verdict
	if err := v.UnmarshalText([]byte("fine")); err == nil {
		t.Error("unknown verdict accepted")
	}
	if _, err := audit.Verdict(99).MarshalText(); err == nil {
		t.Error("verdict 99 marshalled")
	}
	if got := []string{audit.Clean.String(), audit.Invalid.String(), audit.Unsupported.String(), audit.Dangerous.String(), audit.Error.String()}; strings.Join(got, " ") != "clean invalid unsupported dangerous error" {
		t.Errorf("verdicts %v", got)
	}
}

// docs/json.md lists every value "format", "verdict" and "status" can
// take (issue 16.4: scan --json printed a format the schema did not
// list).
func TestSchemaDocumentsEveryValue(t *testing.T) {
	doc, err := os.ReadFile("../docs/json.md")
	if err != nil {
		t.Fatal(err)
	}
	var values []string
	for _, f := range audit.Formats() {
		values = append(values, f.String())
	}
	for v := audit.Clean; v <= audit.Error; v++ {
		values = append(values, v.String())
	}
	for g := audit.Allowed; g <= audit.NotAllowed; g++ {
		values = append(values, g.String())
	}
	for s := audit.OK; s <= audit.Unreadable; s++ {
		values = append(values, s.String())
	}
	for _, v := range values {
		if !bytes.Contains(doc, []byte(`"`+v+`"`)) {
			t.Errorf("docs/json.md does not list %q", v)
		}
	}
}
