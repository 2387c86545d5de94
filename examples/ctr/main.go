// Command ctr trains a DeepFM click-through-rate model over several hash embedding tables on a
// synthetic click log: Zipf-distributed user and item ids whose popular heads keep moving to
// ids never seen before, and labels drawn from a hidden logistic model, so that the best
// achievable AUC (that of the true probabilities) is known and printed next to the model's.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/gorec/gorec/cgotorch"
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
	flag.Parse()
	var err error
	if cfg.Device, err = cgotorch.ParseDevice(*device); err != nil {
		fmt.Fprintln(os.Stderr, "ctr:", err)
		os.Exit(2)
	}
	if _, err := run(cfg, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "ctr:", err)
		os.Exit(1)
	}
}
