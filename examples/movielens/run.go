package main

import (
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/gorec/gorec/embedding"
)

// Config is the example's configuration; main fills it from flags.
type Config struct {
	Data      string  // the ratings CSV (extracted from r-cran-dslabs when missing)
	OutDir    string  // where the training curve goes (CSV and PNG); "" writes nothing
	Dim       int     // factor dimension
	Epochs    int     // epochs of each trained model
	BatchSize int     // ratings per step
	LR        float64 // the tables' learning rate
	L2        float64 // weight of the squared norm of the factor rows a rating uses
	L2Bias    float64 // weight of the squares of the biases a rating uses
	Optimizer string  // sgd, adagrad, sparseadam, adamw or ftrl
	Seed      uint64
	TestFrac  float64 // the last TestFrac of each user's ratings by time are the test set
	MaxUsers  int     // > 0 keeps the users with the MaxUsers smallest ids (quick runs)
	Live      bool    // redraw the progress bars in place (a terminal)
}

// DefaultConfig is the configuration of `make example`.
func DefaultConfig() Config {
	return Config{
		Data: filepath.Join("data", "movielens", "ratings.csv"), OutDir: filepath.Join("data", "movielens"),
		Dim: 128, Epochs: 15, BatchSize: 512, LR: 0.003, L2: 0.1, L2Bias: 0.01, Optimizer: "sparseadam",
		Seed: 1, TestFrac: 0.2,
	}
}

// Result holds the test RMSEs of a run.
type Result struct {
	Train, Test int       // ratings in each set
	GlobalMean  float64   // test RMSE of predicting the training mean
	Biases      float64   // test RMSE of the biases-only model after its last epoch
	MF          []float64 // test RMSE of the factorisation model after each epoch
	MFTrain     []float64 // its training RMSE over each epoch
	// MSEGain is how much lower the factorisation model's final test MSE is than the biases-only
	// model's, and GainSE its standard error over the test ratings (paired).
	MSEGain, GainSE float64
	// WarmTest counts the test ratings of movies rated in training; WarmBiases and WarmMF are the
	// final test RMSEs on them (the other test movies are unknown to both models).
	WarmTest           int
	WarmBiases, WarmMF float64
	Users, Items       int // ids in the factorisation model's tables at the end
	Elapsed            time.Duration
}

// Final is the factorisation model's test RMSE after its last epoch.
func (r Result) Final() float64 { return r.MF[len(r.MF)-1] }

func optimizer(name string, lr float64) (embedding.Optimizer, error) {
	switch strings.ToLower(name) {
	case "sgd":
		return embedding.SGD{LR: lr}, nil
	case "adagrad":
		return embedding.Adagrad{LR: lr}, nil
	case "sparseadam":
		return embedding.SparseAdam{LR: lr}, nil
	case "adamw":
		return embedding.AdamW{LR: lr}, nil
	case "ftrl":
		return embedding.FTRL{Alpha: lr, Beta: 1}, nil
	}
	return nil, fmt.Errorf("unknown optimizer %q (sgd, adagrad, sparseadam, adamw, ftrl)", name)
}

func (c Config) validate() error {
	if c.Dim <= 0 || c.Epochs <= 0 || c.BatchSize <= 0 || !(c.LR > 0) || !(c.L2 >= 0) || !(c.L2Bias >= 0) ||
		!(c.TestFrac > 0 && c.TestFrac < 1) || c.MaxUsers < 0 {
		return fmt.Errorf("bad configuration %+v", c)
	}
	return nil
}

// run trains the baselines and the factorisation model and reports on out.
func run(cfg Config, out io.Writer) (res Result, err error) {
	start := time.Now()
	if err := cfg.validate(); err != nil {
		return res, err
	}
	opt, err := optimizer(cfg.Optimizer, cfg.LR)
	if err != nil {
		return res, err
	}
	if err := EnsureData(cfg.Data); err != nil {
		return res, err
	}
	ratings, err := LoadRatings(cfg.Data)
	if err != nil {
		return res, err
	}
	if cfg.MaxUsers > 0 {
		ratings = firstUsers(ratings, cfg.MaxUsers)
	}
	train, test := Split(ratings, cfg.TestFrac)
	res.Train, res.Test = len(train), len(test)
	nu, ni := countIDs(ratings)
	fmt.Fprintf(out, "MovieLens ratings (dslabs snapshot of ml-latest-small): %d ratings, %d users, %d movies\n", len(ratings), nu, ni)
	fmt.Fprintf(out, "protocol: the last %.0f%% of each user's ratings by time are the test set: %d train, %d test ratings;\n",
		100*cfg.TestFrac, len(train), len(test))
	fmt.Fprintf(out, "          test RMSE with predictions clipped to [0.5, 5], ids unseen in training get zero rows\n")

	mu := meanRating(train)
	res.GlobalMean = constantRMSE(test, mu)
	fmt.Fprintf(out, "\nglobal mean %.3f                       test RMSE %.4f\n", mu, res.GlobalMean)

	fmt.Fprintf(out, "\nbiases only: mu + b_u + b_i (%s lr %g, bias l2 %g, batch %d)\n", cfg.Optimizer, cfg.LR, cfg.L2Bias, cfg.BatchSize)
	biasErrs, err := trainBiases(cfg, opt, mu, train, test, out)
	if err != nil {
		return res, err
	}
	res.Biases = rootMean(biasErrs)
	fmt.Fprintf(out, "biases only                              test RMSE %.4f\n", res.Biases)

	fmt.Fprintf(out, "\nmatrix factorisation: mu + b_u + b_i + <p_u, q_i>, dim %d (%s lr %g, l2 %g, bias l2 %g, batch %d)\n",
		cfg.Dim, cfg.Optimizer, cfg.LR, cfg.L2, cfg.L2Bias, cfg.BatchSize)
	m, err := NewModel(mu, cfg.Dim, opt, cfg.L2, cfg.L2Bias, cfg.Seed)
	if err != nil {
		return res, err
	}
	defer func() { err = errors.Join(err, m.Close()) }()
	var mfErrs []float64
	err = fit(m, train, cfg, "MF", out, func(epoch int, trainRMSE float64) (err error) {
		if mfErrs, err = squaredErrors(m, test); err != nil {
			return err
		}
		res.MF, res.MFTrain = append(res.MF, rootMean(mfErrs)), append(res.MFTrain, trainRMSE)
		fmt.Fprintf(out, "  epoch %2d: test RMSE %.4f\n", epoch, res.Final())
		return nil
	})
	if err != nil {
		return res, err
	}
	res.MSEGain, res.GainSE = pairedDiff(biasErrs, mfErrs)
	warm := warmRatings(train, test)
	res.WarmTest = len(warm)
	res.WarmBiases, res.WarmMF = rootMean(subset(biasErrs, warm)), rootMean(subset(mfErrs, warm))
	if res.Users, res.Items, err = m.Sizes(); err != nil {
		return res, err
	}
	res.Elapsed = time.Since(start)
	summary(res, out)
	if cfg.OutDir != "" {
		err = writeCurve(cfg.OutDir, res, out)
	}
	return res, err
}

// trainBiases trains the biases-only model as the factorisation model is trained and returns
// its squared errors on the test ratings after the last epoch.
func trainBiases(cfg Config, opt embedding.Optimizer, mu float64, train, test []Rating, out io.Writer) (sq []float64, err error) {
	b, err := NewModel(mu, 0, opt, cfg.L2, cfg.L2Bias, cfg.Seed)
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, b.Close()) }()
	if err := fit(b, train, cfg, "biases", out, func(int, float64) error { return nil }); err != nil {
		return nil, err
	}
	return squaredErrors(b, test)
}

func summary(res Result, out io.Writer) {
	best, bestEpoch := res.MF[0], 1
	for i, r := range res.MF {
		if r < best {
			best, bestEpoch = r, i+1
		}
	}
	fmt.Fprintf(out, "\nsummary (%d train / %d test ratings, %s):\n", res.Train, res.Test, res.Elapsed.Round(time.Second))
	fmt.Fprintf(out, "  global mean            %.4f\n", res.GlobalMean)
	fmt.Fprintf(out, "  biases only            %.4f\n", res.Biases)
	fmt.Fprintf(out, "  matrix factorisation   %.4f after %d epochs (best %.4f at epoch %d), %.1f%% below biases only\n",
		res.Final(), len(res.MF), best, bestEpoch, 100*(1-res.Final()/res.Biases))
	fmt.Fprintf(out, "  test MSE, biases only minus factorisation: %.4f ± %.4f (paired standard error over the test ratings)\n",
		res.MSEGain, res.GainSE)
	fmt.Fprintf(out, "  on the %d test ratings of movies rated in training: biases only %.4f, factorisation %.4f\n",
		res.WarmTest, res.WarmBiases, res.WarmMF)
	fmt.Fprintf(out, "  tables: %d users, %d movies\n", res.Users, res.Items)
}

// warmRatings returns the indices of the test ratings whose movie has a training rating.
func warmRatings(train, test []Rating) []int {
	seen := map[int64]bool{}
	for _, r := range train {
		seen[r.Item] = true
	}
	var idx []int
	for i, r := range test {
		if seen[r.Item] {
			idx = append(idx, i)
		}
	}
	return idx
}

func subset(v []float64, idx []int) []float64 {
	out := make([]float64, len(idx))
	for k, i := range idx {
		out[k] = v[i]
	}
	return out
}

// firstUsers keeps the ratings of the n users with the smallest ids.
func firstUsers(ratings []Rating, n int) []Rating {
	users := map[int64]bool{}
	for _, r := range ratings {
		users[r.User] = true
	}
	ids := make([]int64, 0, len(users))
	for u := range users {
		ids = append(ids, u)
	}
	slices.Sort(ids)
	if n < len(ids) {
		ids = ids[:n]
	}
	keep := map[int64]bool{}
	for _, u := range ids {
		keep[u] = true
	}
	var out []Rating
	for _, r := range ratings {
		if keep[r.User] {
			out = append(out, r)
		}
	}
	return out
}

func countIDs(ratings []Rating) (users, items int) {
	u, i := map[int64]bool{}, map[int64]bool{}
	for _, r := range ratings {
		u[r.User], i[r.Item] = true, true
	}
	return len(u), len(i)
}
