package main

import (
	"bytes"
	"errors"
	"io"
	"math"
	"strings"
	"testing"

	"github.com/gorec/gorec/cgotorch"
)

func TestAUC(t *testing.T) {
	for _, c := range []struct {
		scores []float64
		labels []bool
		want   float64
	}{
		{[]float64{0.1, 0.4, 0.35, 0.8}, []bool{false, false, true, true}, 0.75},
		{[]float64{1, 2, 3}, []bool{false, true, true}, 1},
		{[]float64{0.5, 0.5, 0.5, 0.5}, []bool{false, true, false, true}, 0.5},
	} {
		if got := auc(c.scores, c.labels); math.Abs(got-c.want) > 1e-12 {
			t.Errorf("auc(%v, %v) = %v, want %v", c.scores, c.labels, got, c.want)
		}
	}
	if !math.IsNaN(auc([]float64{1, 2}, []bool{true, true})) {
		t.Error("auc of one class is not NaN")
	}
	// A NaN score has no rank (the tie loop never passed it: auc did not return).
	if !math.IsNaN(auc([]float64{0.2, math.NaN(), 0.7, 0.4}, []bool{false, true, true, false})) {
		t.Error("auc with a NaN score is not NaN")
	}
}

// TestGeneratorBringsNewIDs checks that new ids keep appearing and that the log is
// reproducible.
func TestGeneratorBringsNewIDs(t *testing.T) {
	cfg := DefaultConfig().Gen
	a, b := NewGenerator(cfg), NewGenerator(cfg)
	seen := map[int64]bool{}
	newItems := make([]int, 4)
	for i := range 40_000 {
		s := a.Next()
		if s2 := b.Next(); s2.IDs != s.IDs || s2.Click != s.Click {
			t.Fatalf("sample %d differs between two generators with one seed", i)
		}
		if !seen[s.IDs[fItem]] {
			seen[s.IDs[fItem]] = true
			newItems[i/10_000]++
		}
	}
	if newItems[3] < 500 {
		t.Errorf("new items per 10,000 samples: %v; the last quarter should still bring many", newItems)
	}
}

// TestSmallConfig trains on a short stream: the model must learn (AUC above 0.7, log-loss below
// the constant click rate's) without beating the hidden model.
func TestSmallConfig(t *testing.T) { checkSmallRun(t, cgotorch.CPU) }

// TestSmallConfigCUDA trains the same on a GPU (skipped without one). Without one, asking for
// it is an error wrapping cgotorch.ErrDevice.
func TestSmallConfigCUDA(t *testing.T) {
	if !cgotorch.CUDAAvailable() {
		cfg := DefaultConfig()
		cfg.Device = cgotorch.CUDA(0)
		if _, err := run(cfg, io.Discard); !errors.Is(err, cgotorch.ErrDevice) {
			t.Fatalf("run on a missing GPU: %v, want ErrDevice", err)
		}
		t.Skip("no CUDA device")
	}
	checkSmallRun(t, cgotorch.CUDA(0))
}

func checkSmallRun(t *testing.T, d cgotorch.Device) {
	t.Helper()
	cfg := DefaultConfig()
	cfg.Device = d
	cfg.Train, cfg.Test, cfg.ReportEvery = 150_000, 30_000, 50_000
	cfg.LR, cfg.DenseLR = 0.01, 0.001 // a short stream learns faster with larger steps
	var out bytes.Buffer
	res, err := run(cfg, &out)
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	t.Logf("\n%s", out.String())
	if !(res.AUC > 0.7 && res.AUC < res.OracleAUC) {
		t.Errorf("AUC %.4f, want above 0.7 and below the oracle's %.4f", res.AUC, res.OracleAUC)
	}
	if !(res.LogLoss < res.BaseLogLoss && res.LogLoss > res.OracleLogLoss) {
		t.Errorf("log-loss %.4f, want between the oracle's %.4f and the click rate's %.4f", res.LogLoss, res.OracleLogLoss, res.BaseLogLoss)
	}
	if res.TableLen["user"] < 10_000 || res.TableLen["item"] < 5_000 || res.TableLen["category"] != 200 {
		t.Errorf("table sizes %v", res.TableLen)
	}
	// Evaluation scores a batch before counting its unseen ids: were evaluation lookups to insert
	// ids (a bag left in training mode, say), none would be unseen.
	if res.UnseenItems < 0.05 || res.UnseenItems > 0.5 {
		t.Errorf("%.1f%% of held-out samples have an item unseen in training, want new items to keep coming", 100*res.UnseenItems)
	}
	if strings.Count(out.String(), "  ids:") != 3 {
		t.Errorf("want 3 progress reports:\n%s", out.String())
	}
}
