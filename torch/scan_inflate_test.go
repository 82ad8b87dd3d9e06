package torch

import (
	"bytes"
	"compress/flate"
	"encoding/binary"
	"hash/crc32"
	"os"
	"strings"
	"testing"
)

// inflateScale returns the inflate budget the tests use and the limits
// that give it: 16 MiB (the same rules at a sixteenth of the work), or, with
// GOSAFETENSORS_LONG=1, the default limits' 256 MiB (GiB-scale records).
func inflateScale() (budget int, lim Limits) {
	lim = DefaultLimits()
	if os.Getenv("GOSAFETENSORS_LONG") != "" {
		return minInflateBudget, lim
	}
	lim.MaxInflateBytes = 16 << 20
	return int(lim.MaxInflateBytes), lim
}

func scanLim(t *testing.T, b []byte, lim Limits) *ScanReport {
	t.Helper()
	rep, err := Scan(bytes.NewReader(b), int64(len(b)), "mem.pt", WithLimits(lim))
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// zeroBomb returns a DEFLATE stream (non-final blocks, then an empty final
// one): head, then mib MiB of zeros (about 1 KiB of stream per MiB), then
// tail.
func zeroBomb(t *testing.T, head []byte, mib int, tail []byte) []byte {
	t.Helper()
	block := func(data []byte) []byte {
		var b bytes.Buffer
		w, err := flate.NewWriter(&b, flate.BestCompression)
		if err != nil {
			t.Fatal(err)
		}
		w.Write(data)
		w.Flush() // byte-aligned, not final: blocks can be concatenated
		return b.Bytes()
	}
	out := block(head)
	zeros := block(make([]byte, 1<<20))
	for range mib {
		out = append(out, zeros...)
	}
	out = append(out, block(tail)...)
	var end bytes.Buffer
	w, _ := flate.NewWriter(&end, flate.BestCompression)
	w.Close()
	return append(out, end.Bytes()...)
}

// deflatedZip is a torch-style zip whose archive/data.pkl is the DEFLATE
// stream body declaring usize inflated bytes.
func deflatedZip(body []byte, usize uint32) []byte {
	var out, cd []byte
	add := func(name string, method uint16, data []byte, us, crc uint32) {
		cd = append(cd, zipCentral(name, method, data, us, crc, len(out))...)
		out = append(append(out, zipLocal(name, method, data, us, crc)...), data...)
	}
	add("archive/data.pkl", 8, body, usize, 0)
	add("archive/version", 0, []byte("3\n"), 2, crc32.ChecksumIEEE([]byte("3\n")))
	e := binary.LittleEndian.AppendUint32(nil, sigEnd)
	e = append(e, 0, 0, 0, 0, 2, 0, 2, 0)
	e = binary.LittleEndian.AppendUint32(e, uint32(len(cd)))
	e = binary.LittleEndian.AppendUint32(e, uint32(len(out)))
	e = append(e, 0, 0)
	return append(append(out, cd...), e...)
}

// A DEFLATE data.pkl is inflated and walked for globals, but a small file
// may not keep the scan busy for minutes: a 1 MB record declaring 4 GiB
// took 8 s per GiB and 1 GB of memory. The scan's inflate budget (16x the
// file, at least 256 MiB) bounds the bytes inflated, and its walk budget
// what walking them costs; a global within both is named, one beyond
// either leaves the verdict invalid (never clean) and says which budget
// cut the scan. The work is counted, not timed: bytes inflated.
func TestScanInflateBudget(t *testing.T) {
	evil := []byte("cposix\nsystem\n.")
	budget, lim := inflateScale()
	within, past := budget>>22, budget>>18 // in MiB: 64 MiB and 1 GiB of a 256 MiB budget
	for _, c := range []struct {
		name      string
		mib       int
		at        string // where the global is: "end" after the zeros, "" none
		dangerous bool
	}{
		{"global within the budget", within, "end", true},
		{"global past the budget", past, "end", false},
		{"zeros past the budget", past, "", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			// the zeros are the payload of one BINBYTES, so that an
			// unpickler reads on to what follows them
			head := binary.LittleEndian.AppendUint32([]byte("\x80\x02B"), uint32(c.mib<<20))
			var tail []byte
			if c.at == "end" {
				tail = evil
			}
			b := deflatedZip(zeroBomb(t, head, c.mib, tail), 0xFFFFFFF0)
			if len(b) > 2<<20 {
				t.Fatalf("bomb is %d bytes", len(b))
			}
			rep := scanLim(t, b, lim)
			if max := int64(budget) + 2<<20; rep.inflated > max {
				t.Errorf("%d bytes inflated, more than the budget's %d", rep.inflated, budget)
			}
			switch v := rep.Verdict(); {
			case c.dangerous && v != VerdictDangerous:
				t.Fatalf("verdict %s, want dangerous: %v", v, rep.Problems)
			case !c.dangerous && v == VerdictClean:
				t.Fatal("verdict clean")
			}
			if p := strings.Join(rep.Problems, "\n"); c.mib == past && !strings.Contains(p, "inflate budget") && !strings.Contains(p, "walk budget") {
				t.Errorf("no budget problem reported: %q", rep.Problems)
			}
		})
	}
}

// Without a central directory every local header is tried; K headers
// nested in each other's extra fields all start their data at the same
// DEFLATE stream with different sizes, which was inflated K times. It is
// now one record, and all records share one budget.
func TestScanFallbackSharedStream(t *testing.T) {
	budget, lim := inflateScale()
	stream := zeroBomb(t, []byte("\x80\x02}q\x00("), budget>>19, nil) // twice the budget
	const k = 24
	const name = "a.pkl"
	// Header i's extra field holds headers i+1..k-1, so every header's
	// data begins right after the innermost one.
	var headers [][]byte
	for i := k - 1; i >= 0; i-- {
		var inner []byte
		if len(headers) > 0 {
			inner = headers[len(headers)-1]
		}
		h := binary.LittleEndian.AppendUint32(nil, sigLocal)
		h = binary.LittleEndian.AppendUint16(h, 20)
		h = binary.LittleEndian.AppendUint16(h, 0)
		h = binary.LittleEndian.AppendUint16(h, 8)
		h = binary.LittleEndian.AppendUint32(h, 0)
		h = binary.LittleEndian.AppendUint32(h, 0)
		h = binary.LittleEndian.AppendUint32(h, uint32(len(stream)-i)) // sizes differ
		h = binary.LittleEndian.AppendUint32(h, 0xFFFFFFF0)
		h = binary.LittleEndian.AppendUint16(h, uint16(len(name)))
		h = binary.LittleEndian.AppendUint16(h, uint16(len(inner)))
		h = append(append(h, name...), inner...)
		headers = append(headers, h)
	}
	b := append(headers[len(headers)-1], stream...)
	rep := scanLim(t, b, lim)
	if rep.Verdict() == VerdictClean {
		t.Fatal("verdict clean")
	}
	// inflated once (plus once more to reach where decoding stopped), not k times
	if max := 2*int64(budget) + 4<<20; rep.inflated > max {
		t.Errorf("%d bytes inflated for %d headers on one stream (at most %d)", rep.inflated, k, max)
	}
}

// Red-team round 4 (B1): the "does the record go on past the budget?"
// check read from the inflater after the walk, whose 32 KiB read-ahead had
// already drained what was left: a payload a few bytes past the budget's
// end was neither named nor reported. The record is one BINBYTES8 of
// zeros (which the walker steps over in one opcode) ending 10 bytes before
// the end of the inflate budget, then zeros, then the payload, slack bytes
// past that end.
func TestScanInflateBudgetReadAhead(t *testing.T) {
	payload := []byte("0cposix\nsystem\nX\x02\x00\x00\x00id\x85R0}.")
	build := func(f, gap int) ([]byte, int) {
		head := binary.LittleEndian.AppendUint64([]byte("\x80\x02\x8e"), uint64(f))
		tail := append(make([]byte, f%(1<<20)+gap), payload...)
		stream := zeroBomb(t, head, f>>20, tail)
		return deflatedZip(stream, uint32(len(head)+f+gap+len(payload))), len(stream)
	}
	budget, lim := inflateScale()
	for _, slack := range []int{50, 20000} {
		// from = 2 (the opcode walk resumes at the BINBYTES8, which ends
		// at 11 + f); the walk ends at from + the budget less what was
		// inflated into memory
		f := budget
		var b []byte
		for range 5 {
			var csize int
			b, csize = build(f, 10+slack)
			mem := inflateRatio*csize + 1024
			f = 2 + budget - mem - 11 - 10
		}
		rep := scanLim(t, b, lim)
		if rep.Verdict() == VerdictDangerous {
			t.Errorf("slack %d: the payload past the budget is named", slack)
		}
		if !strings.Contains(strings.Join(rep.Problems, "\n"), "inflate budget") {
			t.Errorf("slack %d: %s, payload neither named nor the budget reported: %q", slack, rep.Verdict(), rep.Problems)
		}
	}
}
