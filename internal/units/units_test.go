package units

import "testing"

func TestBytes(t *testing.T) {
	for n, want := range map[int64]string{0: "0 B", 1023: "1023 B", 1024: "1.0 KiB", 1536: "1.5 KiB",
		1<<20 - 1: "1.0 MiB", 5 << 30: "5.0 GiB", 1<<63 - 1: "8.0 EiB"} {
		if got := Bytes(n); got != want {
			t.Errorf("Bytes(%d) = %q, want %q", n, got, want)
		}
	}
}

func TestCount(t *testing.T) {
	for n, want := range map[int64]string{0: "0", 1: "1", 999: "999", 1000: "1.00K", 1584: "1.58K", 1600: "1.60K",
		9995: "10.0K", 99_949: "99.9K", 99_950: "100K", 999_499: "999K", 999_500: "1.00M", 137_022_464: "137M",
		1_100_048_384: "1.10B", 8_030_261_248: "8.03B", -1500: "-1.50K", 1<<63 - 1: "9223Q", -1 << 63: "-9223Q"} {
		if got := Count(n); got != want {
			t.Errorf("Count(%d) = %q, want %q", n, got, want)
		}
	}
}

func TestDigits(t *testing.T) {
	for n, want := range map[int64]string{0: "0", 999: "999", 1000: "1,000", 137022464: "137,022,464", -1234: "-1,234",
		-1 << 63: "-9,223,372,036,854,775,808"} {
		if got := Digits(n); got != want {
			t.Errorf("Digits(%d) = %q, want %q", n, got, want)
		}
	}
	if got := DigitsU(1<<64 - 1); got != "18,446,744,073,709,551,615" {
		t.Errorf("DigitsU(max) = %q", got)
	}
}
