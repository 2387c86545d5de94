package main

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSplitHoldsOutEachUsersLatest checks the protocol on a toy log.
func TestSplitHoldsOutEachUsersLatest(t *testing.T) {
	var rs []Rating
	for u := int64(1); u <= 3; u++ {
		for k := int64(0); k < 10; k++ {
			rs = append(rs, Rating{User: u, Item: 100 - k, Value: 3, Time: 1000 - 10*k + u})
		}
	}
	train, test := Split(rs, 0.2)
	if len(train) != 24 || len(test) != 6 {
		t.Fatalf("split %d/%d, want 24/6", len(train), len(test))
	}
	latest := map[int64]int64{}
	for _, r := range train {
		latest[r.User] = max(latest[r.User], r.Time)
	}
	for _, r := range test {
		if r.Time <= latest[r.User] {
			t.Fatalf("test rating %+v is not after user %d's training ratings (latest %d)", r, r.User, latest[r.User])
		}
	}
}

// TestSmallConfig runs the example end to end on the real data with fewer epochs and a
// smaller model: the factorisation model must beat the biases-only model, which must beat the
// global mean.
func TestSmallConfig(t *testing.T) {
	dir := t.TempDir()
	cfg := DefaultConfig()
	cfg.Data, cfg.OutDir = filepath.Join(dir, "ratings.csv"), dir
	cfg.Dim, cfg.Epochs, cfg.BatchSize, cfg.LR = 64, 5, 512, 0.005
	var out bytes.Buffer
	res, err := run(cfg, &out)
	if errors.Is(err, ErrNoData) {
		t.Skipf("MovieLens data not available (install r-cran-dslabs, e.g. with `make deps`): %v", err)
	}
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	t.Logf("\n%s", out.String())
	if res.Train+res.Test != 100004 || res.Test < 19000 || res.Test > 21000 {
		t.Errorf("split %d train / %d test, want 100,004 ratings with about 20%% held out", res.Train, res.Test)
	}
	if res.GlobalMean < 1 || res.GlobalMean > 1.1 {
		t.Errorf("global mean RMSE %.4f, want about 1.06", res.GlobalMean)
	}
	if res.Biases > res.GlobalMean-0.1 {
		t.Errorf("biases only %.4f does not beat the global mean %.4f by 0.1", res.Biases, res.GlobalMean)
	}
	if res.Final() > res.Biases-0.005 || res.MSEGain < 3*res.GainSE {
		t.Errorf("MF %.4f does not clearly beat biases only %.4f (MSE gain %.4f ± %.4f)", res.Final(), res.Biases, res.MSEGain, res.GainSE)
	}
	if res.WarmTest >= res.Test || res.WarmMF >= res.WarmBiases {
		t.Errorf("on %d of %d test ratings with known movies: MF %.4f, biases only %.4f", res.WarmTest, res.Test, res.WarmMF, res.WarmBiases)
	}
	if res.Users != 671 || res.Items < 7000 {
		t.Errorf("tables hold %d users and %d movies, want 671 and the ~7,700 rated in training", res.Users, res.Items)
	}
	for _, want := range []string{"protocol: the last 20%", "biases only", "summary"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q", want)
		}
	}
	csv, err := os.ReadFile(filepath.Join(dir, "curve.csv"))
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(csv), "\n"); n != cfg.Epochs+1 {
		t.Errorf("curve.csv has %d lines, want a header and one per epoch", n)
	}
}

// Without Rscript, a missing CSV is ErrNoData (what TestSmallConfig skips on), with the fix.
func TestEnsureDataWithoutR(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	err := EnsureData(filepath.Join(t.TempDir(), "ratings.csv"))
	if !errors.Is(err, ErrNoData) || !strings.Contains(err.Error(), "r-cran-dslabs") {
		t.Fatalf("got %v, want ErrNoData naming r-cran-dslabs", err)
	}
}

// Without gnuplot the curve's CSV is still written, and the output says the PNG was skipped.
func TestCurveWithoutGnuplot(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	dir := t.TempDir()
	var out bytes.Buffer
	res := Result{GlobalMean: 1.07, Biases: 0.91, MF: []float64{0.95, 0.90}, MFTrain: []float64{0.9, 0.8}}
	if err := writeCurve(dir, res, &out); err != nil {
		t.Fatal(err)
	}
	csv, err := os.ReadFile(filepath.Join(dir, "curve.csv"))
	if err != nil {
		t.Fatal(err)
	}
	if want := "2,0.80000,0.90000,0.91000,1.07000\n"; !strings.HasSuffix(string(csv), want) {
		t.Errorf("curve.csv:\n%s\nwant it to end with %q", csv, want)
	}
	if !strings.Contains(out.String(), "skipped the PNG") {
		t.Errorf("output %q does not say the PNG was skipped", out.String())
	}
	if _, err := os.Stat(filepath.Join(dir, "curve.png")); !os.IsNotExist(err) {
		t.Errorf("curve.png: %v", err)
	}
}
