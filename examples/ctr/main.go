// Command ctr trains a DeepFM click-through-rate model over several hash embedding tables, looked
// up by one nn.EmbeddingBagCollection, on a synthetic click log: Zipf-distributed user and item
// ids whose popular heads keep moving to ids never seen before, and labels drawn from a hidden
// logistic model, so that the best achievable AUC (that of the true probabilities) is known and
// printed next to the model's.
//
// With -dist it runs as one rank of a distributed job, started the way PyTorch jobs are (the
// torchrun environment: RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT): the tables are sharded by
// id across the ranks (dist.ShardedTable; the collection fetches all their rows in one exchange),
// the MLP is replicated (dist.DataParallel), every rank trains on its slice of each batch, and
// rank 0 prints. On 2 local processes:
//
//	go build -o ctr ./examples/ctr
//	torchrun --no_python --nproc_per_node 2 --redirects 1 --tee 1 ./ctr -dist
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/gorec/gorec/cgotorch"
	"github.com/gorec/gorec/dist"
)

func main() {
	cfg := DefaultConfig()
	flag.IntVar(&cfg.Train, "train", cfg.Train, "training samples (one pass, in time order)")
	flag.IntVar(&cfg.Test, "test", cfg.Test, "held-out samples (those after the training ones)")
	flag.IntVar(&cfg.BatchSize, "batch", cfg.BatchSize, "samples per step")
	flag.IntVar(&cfg.Dim, "dim", cfg.Dim, "embedding width")
	flag.Float64Var(&cfg.LR, "lr", cfg.LR, "SparseAdam learning rate of the tables")
	flag.Float64Var(&cfg.DenseLR, "dense-lr", cfg.DenseLR, "Adam learning rate of the MLP")
	flag.IntVar(&cfg.ReportEvery, "report", cfg.ReportEvery, "samples between progress lines")
	flag.Uint64Var(&cfg.Gen.Seed, "seed", cfg.Gen.Seed, "seed of the log, the hidden model and the tables")
	flag.IntVar(&cfg.Gen.Users, "users", cfg.Gen.Users, "users (Zipf ranks)")
	flag.IntVar(&cfg.Gen.Items, "items", cfg.Gen.Items, "established items (Zipf ranks)")
	flag.Float64Var(&cfg.Gen.Zipf, "zipf", cfg.Gen.Zipf, "Zipf exponent of the id frequencies (> 1)")
	flag.IntVar(&cfg.Gen.Launch, "launch", cfg.Gen.Launch, "samples between two item launches")
	flag.IntVar(&cfg.Gen.Fresh, "fresh", cfg.Gen.Fresh, "how many of the newest items share the fresh impressions")
	flag.Float64Var(&cfg.Gen.FreshShare, "fresh-share", cfg.Gen.FreshShare, "share of impressions on fresh items")
	device := flag.String("device", "cpu", "where the model trains: cpu, cuda or cuda:N")
	distributed := flag.Bool("dist", false, "run as one rank of a job started by torchrun (or with RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT set)")
	flag.BoolVar(&cfg.Pipeline, "pipeline", false, "with -dist: fetch the next batch's rows while the current one trains (dist.TrainPipeline)")
	flag.BoolVar(&cfg.Fetch, "fetch", false, "with -dist: fetch each batch's rows in one exchange before its forward pass (dist.TrainStep)")
	flag.Parse()
	var err error
	if cfg.Device, err = cgotorch.ParseDevice(*device); err != nil {
		fmt.Fprintln(os.Stderr, "ctr:", err)
		os.Exit(2)
	}
	if err := runMain(cfg, *distributed); err != nil {
		fmt.Fprintln(os.Stderr, "ctr:", err)
		os.Exit(1)
	}
}

// runMain runs the example, as one rank of a distributed job when distributed (rank 0 prints).
func runMain(cfg Config, distributed bool) (err error) {
	var out io.Writer = os.Stdout
	if distributed {
		if cfg.Group, err = dist.FromEnv(); err != nil {
			return err
		}
		defer func() { err = errors.Join(err, cfg.Group.Close()) }()
		if cfg.Group.Rank() != 0 {
			out = io.Discard
		}
	}
	_, err = run(cfg, out)
	if err != nil && cfg.Group != nil {
		err = fmt.Errorf("rank %d: %w", cfg.Group.Rank(), err)
	}
	return err
}
