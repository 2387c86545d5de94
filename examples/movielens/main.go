// Command movielens trains biased matrix factorisation on the MovieLens ratings shipped in
// Debian's r-cran-dslabs package (the ml-latest-small snapshot of October 2016, 100,004 ratings)
// with hash embedding tables keyed by the raw user and movie ids, and reports the test RMSE of
// the global mean, of a biases-only model and of the factorisation model after each epoch on a
// per-user temporal split: the last 20% of each user's ratings by time are the test set.
//
// `make example` runs it with the defaults. The training curve goes to data/movielens/
// (curve.csv, and curve.png when gnuplot is installed).
package main

import (
	"flag"
	"fmt"
	"os"
)

func main() {
	cfg := DefaultConfig()
	flag.StringVar(&cfg.Data, "data", cfg.Data, "ratings CSV (extracted from r-cran-dslabs with Rscript when missing)")
	flag.StringVar(&cfg.OutDir, "out", cfg.OutDir, "directory for the training curve (curve.csv, curve.png); empty: none")
	flag.IntVar(&cfg.Dim, "dim", cfg.Dim, "factor dimension")
	flag.IntVar(&cfg.Epochs, "epochs", cfg.Epochs, "epochs")
	flag.IntVar(&cfg.BatchSize, "batch", cfg.BatchSize, "ratings per step")
	flag.Float64Var(&cfg.LR, "lr", cfg.LR, "learning rate of the tables' optimizer")
	flag.Float64Var(&cfg.L2, "l2", cfg.L2, "L2 weight on the factor rows each rating uses")
	flag.Float64Var(&cfg.L2Bias, "l2bias", cfg.L2Bias, "L2 weight on the biases each rating uses")
	flag.StringVar(&cfg.Optimizer, "opt", cfg.Optimizer, "optimizer: sgd, adagrad, sparseadam, adamw, ftrl")
	flag.Uint64Var(&cfg.Seed, "seed", cfg.Seed, "seed of the initial rows and the shuffling")
	flag.IntVar(&cfg.MaxUsers, "users", cfg.MaxUsers, "keep only this many users (0: all)")
	flag.Parse()
	if fi, err := os.Stdout.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
		cfg.Live = true
	}
	if _, err := run(cfg, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "movielens:", err)
		os.Exit(1)
	}
}
