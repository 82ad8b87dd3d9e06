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
