package torch_test

import (
	"errors"
	"fmt"
	"log"

	"github.com/gosafetensors/safetensors"
	"github.com/gosafetensors/safetensors/torch"
)

func ExampleOpen() {
	c, err := torch.Open("../testdata/torch/dtypes.pt")
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	t, err := c.Tensor("bf16")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(c.Format, t.DType, t.Shape, t.NBytes(), "bytes")
	if _, err := c.Tensor("nope"); errors.Is(err, safetensors.ErrTensorNotFound) {
		fmt.Println(err)
	}
	// Output:
	// zip BF16 [2 2] 8 bytes
	// ../testdata/torch/dtypes.pt: tensor "nope": no such tensor (TensorNotFound)
}

func ExampleScanFile() {
	rep, err := torch.ScanFile("../testdata/malicious/reduce_posix_system_p2.pkl")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(rep.Verdict(), rep.NotAllowed())
	// Output: dangerous [posix.system]
}

func ExampleOpen_refused() {
	_, err := torch.Open("../testdata/malicious/reduce_posix_system_p2.pkl")
	var te *torch.Error
	if errors.As(err, &te) && errors.Is(err, torch.ErrNotAllowed) {
		fmt.Println("refused:", te.Global)
	}
	// Output: refused: posix.system
}

func ExampleWithLimits() {
	lim := torch.DefaultLimits()
	lim.MaxTensorBytes = 16 // the checkpoint holds a 32-byte tensor
	_, err := torch.Open("../testdata/torch/dtypes.pt", torch.WithLimits(lim))
	fmt.Println(errors.Is(err, torch.ErrLimit))

	lim.MaxDims = 0 // a cap below 1 is refused before anything is read
	_, err = torch.Open("../testdata/torch/dtypes.pt", torch.WithLimits(lim))
	fmt.Println(err)
	// Output:
	// true
	// invalid option: WithLimits: MaxDims is 0, want at least 1 (start from DefaultLimits())
}
