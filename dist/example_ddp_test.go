package dist_test

import (
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/gorec/gorec/cgotorch"
	"github.com/gorec/gorec/dist"
	"github.com/gorec/gorec/nn"
)

// Data-parallel training: every rank runs this loop on its slice of the global batch (here a
// group of one rank). The optimizer is made from the DataParallel, so its Step averages the
// gradients over the ranks before updating: the replicas stay equal.
func ExampleDataParallel() {
	dir, _ := os.MkdirTemp("", "dist-example")
	defer os.RemoveAll(dir)
	g, err := dist.New(dist.Options{WorldSize: 1, Store: dist.FileStore(filepath.Join(dir, "store"))})
	if err != nil {
		log.Fatal(err)
	}
	defer g.Close()

	cgotorch.ManualSeed(1)
	model := nn.NewSequential(nn.NewLinear(4, 8, true), &nn.ReLU{}, nn.NewLinear(8, 1, true))
	ddp, err := dist.NewDataParallel(g, model, dist.DataParallelOptions{}) // rank 0's weights everywhere
	if err != nil {
		log.Fatal(err)
	}
	opt, err := nn.NewAdam(ddp, nn.DefaultAdamOptions()) // from ddp, not from model
	if err != nil {
		log.Fatal(err)
	}
	x, y := cgotorch.Randn([]int64{16, 4}), cgotorch.Zeros([]int64{16, 1}) // this rank's slice
	var first, last float64
	for step := range 50 {
		opt.ZeroGrad()
		loss := nn.MSE(nn.ReduceMean)(model.Forward(x), y) // a mean over the slice
		loss.Backward()
		if err := opt.Step(); err != nil { // averages the gradients, then updates
			log.Fatal(err) // errors.Is(err, dist.ErrBroken): restart every rank
		}
		v, _ := loss.Item()
		if step == 0 {
			first = v
		}
		last = v
	}
	fmt.Println("loss went down:", last < first)
	// Output: loss went down: true
}
