package torch_test

import (
	"errors"
	"fmt"
	"log"

	"github.com/gosafetensors/safetensors/torch"
)

func ExampleOpen() {
	c, err := torch.Open("../testdata/torch/dtypes.pt")
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	t := c.Tensor("bf16")
	fmt.Println(c.Format, t.DType, t.Shape, t.NBytes(), "bytes")
	// Output: zip BF16 [2 2] 8 bytes
}

func ExampleOpen_refused() {
	_, err := torch.Open("../testdata/malicious/reduce_posix_system_p2.pkl")
	var te *torch.Error
	if errors.As(err, &te) && errors.Is(err, torch.ErrNotAllowed) {
		fmt.Println("refused:", te.Global)
	}
	// Output: refused: posix.system
}
