package stats_test

import (
	"context"
	"fmt"
	"log"

	"github.com/gosafetensors/safetensors"
	"github.com/gosafetensors/safetensors/stats"
)

func ExampleCompute() {
	f, err := safetensors.Open("../testdata/torch/tiny_transformer.safetensors")
	if err != nil {
		log.Fatal(err)
	}
	defer f.Close()
	res, err := stats.Compute(context.Background(), f, []string{"h.0.ln_1.weight", "h.0.ln_1.bias"})
	if err != nil {
		log.Fatal(err)
	}
	for _, s := range res {
		fmt.Printf("%s: min %g max %g mean %g std %g zeros %d NaN %d\n", s.Name, s.Min, s.Max, s.Mean, s.Std, s.Zeros, s.NaN)
	}
	// Output:
	// h.0.ln_1.weight: min 1 max 1 mean 1 std 0 zeros 0 NaN 0
	// h.0.ln_1.bias: min 0 max 0 mean 0 std 0 zeros 8 NaN 0
}

func ExampleCountNonFinite() {
	// F8_E4M3 has no infinities: 0x7F and 0xFF are its NaNs.
	// F8_E5M2 is laid out like a half: 0x7C is +Inf, 0x7D NaN.
	a, _ := stats.CountNonFinite(safetensors.F8_E4M3, []byte{0x7F, 0x7C, 0xFF})
	b, _ := stats.CountNonFinite(safetensors.F8_E5M2, []byte{0x7F, 0x7C, 0xFC})
	fmt.Printf("%+v\n%+v\n", a, b)
	// Output:
	// {NaN:2 PosInf:0 NegInf:0}
	// {NaN:1 PosInf:1 NegInf:1}
}

func ExampleEstimateMemory() {
	f, err := safetensors.Open("../testdata/torch/tiny_transformer.safetensors")
	if err != nil {
		log.Fatal(err)
	}
	defer f.Close()
	m := stats.EstimateMemory(f)
	fmt.Println(m.Params, m.Stored, m.F16, m.AdamMixed)
	// Output: 1600 6464 3296 25472
}
