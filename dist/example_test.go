package dist_test

import (
	"fmt"
	"log"
	"os"
	"path/filepath"
	"time"

	"github.com/gorec/gorec/cgotorch"
	"github.com/gorec/gorec/dist"
)

// A group of one rank over a FileStore; with more ranks every process runs the same code with
// its own Rank, and the sum is taken over all of them.
func Example() {
	dir, err := os.MkdirTemp("", "dist-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	g, err := dist.New(dist.Options{
		Rank: 0, WorldSize: 1,
		Store:   dist.FileStore(filepath.Join(dir, "store")),
		Timeout: time.Minute,
		Job:     "example",
	})
	if err != nil {
		log.Fatal(err)
	}
	defer g.Close()

	grad, _ := cgotorch.FromSlice([]float32{0.5, -1, 2})
	defer grad.Close()
	avg, err := g.AllReduce(grad, dist.Avg)
	if err != nil {
		log.Fatal(err) // errors.Is(err, dist.ErrBroken): close and restart every rank
	}
	defer avg.Close()
	v, _ := cgotorch.ToSlice[float32](avg)
	fmt.Println(v)
	// Output: [0.5 -1 2]
}

// Ids go to the ranks that own them with uneven splits: here 3 ids to rank 0 of a group of
// one; the receive splits say how many came from each rank.
func ExampleGroup_AllToAll() {
	dir, _ := os.MkdirTemp("", "dist-example")
	defer os.RemoveAll(dir)
	g, err := dist.New(dist.Options{WorldSize: 1, Store: dist.FileStore(filepath.Join(dir, "store"))})
	if err != nil {
		log.Fatal(err)
	}
	defer g.Close()
	ids, _ := cgotorch.FromSlice([]int64{7, 42, 9})
	defer ids.Close()
	got, recv, err := g.AllToAll(ids, []int64{3})
	if err != nil {
		log.Fatal(err)
	}
	defer got.Close()
	v, _ := cgotorch.ToSlice[int64](got)
	fmt.Println(v, recv)
	// Output: [7 42 9] [3]
}

// A trainer started by torchrun (or any launcher that sets RANK, WORLD_SIZE, MASTER_ADDR and
// MASTER_PORT):
//
//	torchrun --no_python --nproc_per_node 2 --redirects 1 --tee 1 ./trainer
func ExampleFromEnv() {
	g, err := dist.FromEnv(dist.Options{Timeout: 2 * time.Minute})
	if err != nil {
		log.Fatal(err)
	}
	defer g.Close()
	fmt.Printf("rank %d of %d\n", g.Rank(), g.WorldSize())
}
