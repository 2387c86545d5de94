package nn_test

import (
	"context"
	"fmt"
	"io"
	"os"
	"strconv"

	"github.com/gorec/gorec/cgotorch"
	"github.com/gorec/gorec/embedding"
	"github.com/gorec/gorec/nn"
)

// A whole model's checkpoint, staged so that training elsewhere waits only for the copy, with
// the data reader's position saved in the same checkpoint.
func ExampleSaveCheckpointWith() {
	dir, _ := os.MkdirTemp("", "ckpt")
	defer os.RemoveAll(dir)
	users, err := embedding.NewNamed("example-ckpt-users", embedding.Config{Dim: 8})
	if err != nil {
		panic(err)
	}
	defer users.Close()
	model := nn.NewSequential(nn.NewEmbedding(users, nn.EmbeddingOptions{}), nn.NewLinear(8, 1, true))
	model.Forward(cgotorch.MustFromSlice([]int64{4, 8, 15})) // rows for three ids

	position := 1200 // examples read so far
	err = nn.SaveCheckpointWith(context.Background(), dir, model, embedding.SaveOptions{Staged: true, Files: map[string]func(io.Writer) error{
		"reader": func(w io.Writer) error { _, err := fmt.Fprint(w, position); return err },
	}})
	if err != nil {
		panic(err)
	}

	position = 0
	err = nn.LoadCheckpointWith(context.Background(), dir, model, map[string]func(io.Reader) error{
		"reader": func(r io.Reader) error {
			b, err := io.ReadAll(r)
			if err == nil {
				position, err = strconv.Atoi(string(b))
			}
			return err
		},
	})
	fmt.Println(err, users.Len(), position)
	// Output:
	// <nil> 3 1200
}
